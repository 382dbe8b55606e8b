"""Held-out NLI accuracy of one model under several number formats, through `NLIBackend`.

The figures behind `dtype = "auto"`: a format becomes a default only where the
held-out accuracy stays within a point of float32. Each row is scored the way the
detector scores it (the package's backend, its batching and truncation); 3-way
rows count a hit when the argmax is the label, binary rows (`not_entailment`)
when "entailment is the argmax" agrees with the label. Also reports the largest
and the mean |P(contradiction) difference| to float32, and pairs/s.

    python scripts/nli/compare_dtypes.py --model default --heldout assets/nli/heldout.jsonl
    python scripts/nli/compare_dtypes.py --model mpnet-lora --limit-per-source 150
"""
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

import numpy
import typer

from spacy_inconsistency.backends.nli import NLIBackend

THREE_WAY = ("entailment", "neutral", "contradiction")


def read_rows(path: Path, limit_per_source: int) -> List[dict]:
    rows, seen = [], defaultdict(int)
    with path.open(encoding="utf8") as f:
        for line in f:
            row = json.loads(line)
            if row["label"] not in THREE_WAY + ("not_entailment",):
                continue
            if limit_per_source and seen[row["source"]] >= limit_per_source:
                continue
            seen[row["source"]] += 1
            rows.append(row)
    return rows


def hits(rows: List[dict], probs: numpy.ndarray) -> numpy.ndarray:
    """Per row, whether the prediction is right; `probs` columns in `THREE_WAY` order."""
    pred = [THREE_WAY[i] for i in probs.argmax(1)]
    out = []
    for row, p in zip(rows, pred):
        if row["label"] == "not_entailment":
            out.append(p != "entailment")
        else:
            out.append(p == row["label"])
    return numpy.array(out)


def main(
    model: str = typer.Option("default", help="NLI model: 'default', 'mpnet-lora' or a path."),
    heldout: Path = typer.Option(Path("assets/nli/heldout.jsonl"), help="Held-out rows (prepare-nli)."),
    dtypes: str = typer.Option("float32,bfloat16", help="Comma-separated; the first is the reference."),
    limit_per_source: int = typer.Option(0, help="Rows per source; 0: all."),
    output: Optional[Path] = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    if not heldout.exists():
        raise typer.BadParameter(f"{heldout} not found: run `spacy project run prepare-nli` first", param_hint="--heldout")
    rows = read_rows(heldout, limit_per_source)
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    sources = sorted({r["source"] for r in rows})
    results: Dict[str, dict] = {}
    reference = None
    for name in dtypes.split(","):
        backend = NLIBackend(model, dtype=name)
        labels = list(backend.labels)
        start = time.perf_counter()
        probs = backend.predict_proba(pairs).astype(numpy.float64)
        seconds = time.perf_counter() - start
        # Reorder columns to entailment, neutral, contradiction.
        probs = probs[:, [labels.index(label) for label in THREE_WAY]]
        hit = hits(rows, probs)
        entry = {
            "dtype": backend.dtype_name, "pairs_per_s": len(pairs) / seconds, "accuracy": float(hit.mean()),
            "by_source": {s: float(hit[[r["source"] == s for r in rows]].mean()) for s in sources},
        }
        if reference is None:
            reference = (probs, hit)
        else:
            diff = numpy.abs(probs[:, 2] - reference[0][:, 2])
            entry.update(max_abs_diff=float(diff.max()), mean_abs_diff=float(diff.mean()),
                         accuracy_change=float(hit.mean() - reference[1].mean()),
                         same_argmax=float((probs.argmax(1) == reference[0].argmax(1)).mean()))
        results[name] = entry
    typer.echo(f"{model}: {len(rows)} held-out rows from {heldout}")
    typer.echo("| dtype | accuracy | " + " | ".join(sources) + " | pairs/s | max abs diff P(c) | same argmax |")
    typer.echo("|---" * (len(sources) + 5) + "|")
    for name, e in results.items():
        cells = " | ".join(f"{e['by_source'][s]:.3f}" for s in sources)
        extra = f"{e['max_abs_diff']:.3f} | {e['same_argmax']:.3f}" if "max_abs_diff" in e else " | "
        typer.echo(f"| {name} | {e['accuracy']:.3f} | {cells} | {e['pairs_per_s']:.0f} | {extra} |")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps({"model": model, "heldout": str(heldout), "rows": len(rows), "results": results},
                                     indent=2) + "\n", encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
