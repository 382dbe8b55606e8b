"""Partisan bias audit: run judges over both languages, write tables and a plot.

Writes to --output-dir: predictions-<i>.jsonl, report.json, report.md (from
`spacy_inconsistency.bias.audit.audit`) and bias_audit.png (matplotlib, which
the package itself does not need).

    python scripts/bias/audit.py --output-dir metrics/bias --model default --threads 2
    python scripts/bias/audit.py --output-dir metrics/bias --judge-config my_llm_judge.cfg
"""
import json
import math
from pathlib import Path
from typing import List

import typer

VARIATION_ORDER = ("default", "conlast", "perm", "rand")
GROUPS = (("formal", "valid"), ("formal", "invalid"), ("material", "valid"), ("material", "invalid"))


def plot(reports, path: Path) -> None:
    """Accuracy per variation and group (as the paper's Figure 1) and weighted bias with 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    langs = [l for l in reports[0]["bias"] if l != "all"]
    fig, axes = plt.subplots(len(reports), len(langs) + 1, figsize=(5 * (len(langs) + 1), 3.6 * len(reports)),
                             squeeze=False)
    for row, report in enumerate(reports):
        acc = report["accuracy"]["language/kind/validity/variation"]
        for col, lang in enumerate(langs):
            ax = axes[row][col]
            width = 0.18
            for i, variation in enumerate(VARIATION_ORDER):
                values = [acc.get(f"{lang}/{k}/{v}/{variation}", {}).get("accuracy", math.nan) for k, v in GROUPS]
                xs = [g + (i - 1.5) * width for g in range(len(GROUPS))]
                ax.bar(xs, [100 * v for v in values], width, label=variation)
            ax.set_xticks(range(len(GROUPS)))
            ax.set_xticklabels([f"{k[:4]}-{v[:3]}" for k, v in GROUPS])
            ax.set_ylim(0, 100)
            ax.axhline(50, color="grey", lw=0.8, ls=":")
            ax.set_ylabel("accuracy (%)")
            ax.set_title(f"{report['judge']} - {lang}")
            if col == 0:
                ax.legend(fontsize=8, ncol=2)
        ax = axes[row][-1]
        names = list(report["bias"])
        means = [100 * report["bias"][n]["weighted_bias"] for n in names]
        # 95% interval of mean(X) = weighted bias: 1.96 s / sqrt(N).
        errs = [196 * report["bias"][n]["z_test"]["std"] / math.sqrt(report["bias"][n]["z_test"]["n"]) for n in names]
        ax.bar(names, means, yerr=errs, capsize=4, color=["tab:red" if m > 0 else "tab:blue" for m in means])
        ax.axhline(0, color="black", lw=0.8)
        for bound in (-1, 1):
            ax.axhline(bound, color="grey", lw=0.8, ls="--")
        ax.set_ylabel("weighted bias (points; <0 left, >0 right)")
        ax.set_title("weighted bias, 95% interval")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def subsample(arguments, per_cell: int, *, seed: int = 0):
    """A stratified, seeded subsample: `per_cell` arguments per (language, kind, validity, leaning, variation)."""
    import random

    rng = random.Random(seed)
    cells = {}
    for a in arguments:
        cells.setdefault((a.language, a.kind, a.valid, a.leaning, a.variation), []).append(a)
    chosen = set()
    for key in sorted(cells, key=str):
        chosen.update(id(a) for a in rng.sample(cells[key], min(per_cell, len(cells[key]))))
    return [a for a in arguments if id(a) in chosen]


def main(
    output_dir: Path = typer.Option(...),
    lang: List[str] = typer.Option(["en", "de"], help="Languages (repeat the flag: --lang en --lang de)."),
    model: List[str] = typer.Option(["default"], help="NLI models to audit (repeat the flag for several; "
                                    "--model none: skip NLI)."),
    judge_config: List[Path] = typer.Option([], help="spaCy configs with a \\[judge] block (repeatable)."),
    device: str = typer.Option("auto"),
    threads: int = typer.Option(1),
    as_printed: bool = typer.Option(False, "--as-printed", help="Tables exactly as printed (no errata)."),
    per_cell: int = typer.Option(0, help="Subsample: this many arguments per (language, kind, validity, leaning, "
                                 "variation) cell, seeded (0: all 384 per language). For slow judges (a CPU LLM)."),
    seed: int = typer.Option(0),
) -> None:
    """Partisan bias audit: run judges over both languages, write tables and a plot."""
    # "--model none" (or "--model ''") audits no NLI model, as a bare "--model" did.
    model = [m for m in model if m.lower() not in ("", "none")]

    import torch

    torch.set_num_threads(threads)
    from spacy_inconsistency.bias.audit import audit
    from spacy_inconsistency.bias.commands import build_judges
    from spacy_inconsistency.bias.dataset import generate

    arguments = [a for code in lang for a in generate(code, errata=not as_printed)]
    if per_cell:
        arguments = subsample(arguments, per_cell, seed=seed)
    if judge_config:
        # The chat clients register themselves on import (or through the
        # package's entry points once installed).
        import importlib

        importlib.import_module("spacy_inconsistency.backends.llm")
        importlib.import_module("spacy_inconsistency.nli_judge")
    judges = []
    for name in model:
        judges += build_judges(judge="nli", model=name, device=device)
    for config in judge_config:
        judges += build_judges(judge="config", judge_config=config)
    # Small batches for LLM judges (one chat call per argument) so the progress bar moves.
    batch_size = 8 if judge_config else 256
    reports = audit(judges, arguments, output_dir=output_dir, batch_size=batch_size, progress=True)
    plot(reports, output_dir / "bias_audit.png")
    print((output_dir / "report.md").read_text(encoding="utf-8"))
    print(json.dumps({r["judge"]: r["goals"] for r in reports}, indent=2))


if __name__ == "__main__":
    typer.run(main)
