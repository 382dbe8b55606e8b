"""Score the TRUE datasets with SCALE and write per-dataset metrics and a calibration plot.

    python scripts/scale/evaluate_true.py --data ../shared/data/true --output metrics/scale_true.json \
        --plot metrics/scale_true_calibration.png --model mpnet-lora

Each row's generated text is one claim; its SCALE score (max P(entailment)
over the chunks of the grounding) is compared with the label (1 = consistent).
"""
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, List, Optional

import typer

from spacy_inconsistency.chunk import DEFAULT_ENTAILMENT_MODEL

# The factory's default is a backend config; the script takes its model name.
DEFAULT_MODEL = DEFAULT_ENTAILMENT_MODEL["model"]
app = typer.Typer(add_completion=False)


def _limits(values: List[str]) -> Dict[str, int]:
    out = {}
    for value in values:
        name, _, n = value.partition("=")
        out[name] = int(n)
    return out


@app.command()
def main(
    data: Path = typer.Option(Path("../shared/data/true"), help="Folder with the TRUE CSV files."),
    output: Path = typer.Option(Path("metrics/scale_true.json"), help="Metrics JSON to write."),
    plot: Path = typer.Option(Path("metrics/scale_true_calibration.png"), help="Reliability plot (PNG)."),
    scores_out: Optional[Path] = typer.Option(None, help="Also write every row's score (JSONL)."),
    model: str = typer.Option(DEFAULT_MODEL, help="scale_scorer's default model (mpnet-lora); 'default': the embedded MiniLM NLI model; a local path or a hub id."),
    kind: str = typer.Option("auto", help="auto, seq2seq, nli or causal."),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N."),
    chunk_size: int = typer.Option(1000, help="Tokens per input, prompt included (clamped to the model's limit)."),
    window_size: float = typer.Option(0.25, help="Overlap of consecutive chunks (fraction)."),
    datasets: str = typer.Option("frank,summeval,qags_xsum,paws", help="Comma-separated dataset names."),
    limit: List[str] = typer.Option([], help="NAME=N: score a seeded random sample of N rows of NAME."),
    seed: int = typer.Option(0, help="Seed of the samples."),
    block: int = typer.Option(64, help="Rows per scoring call (progress is logged per block)."),
    threads: int = typer.Option(0, help="torch threads (0 = leave torch's default)."),
    dtype: str = typer.Option("auto", help="auto, float32 or bfloat16 (see EntailmentBackend)."),
) -> None:
    import torch

    from spacy_inconsistency.backends.entailment import EntailmentBackend
    from spacy_inconsistency.corpora.true import read_true
    from spacy_inconsistency.metrics.calibration import binary_metrics, plot_reliability, reliability_bins
    from spacy_inconsistency.scale import score_chunks

    if threads:
        torch.set_num_threads(threads)
    backend = EntailmentBackend(model, kind=kind, device=device, dtype=dtype)
    limits = _limits(limit)
    report = {
        "model": model, "kind": backend.kind, "device": str(backend.device), "dtype": str(backend.dtype),
        "chunk_size": chunk_size,
        "window_size": window_size, "seed": seed, "datasets": {},
    }
    curves = {}
    if scores_out:
        scores_out.parent.mkdir(parents=True, exist_ok=True)
    score_file = scores_out.open("w", encoding="utf-8") if scores_out else None
    for name in [d.strip() for d in datasets.split(",") if d.strip()]:
        path = data / f"{name}.csv"
        rows = read_true(path, limit=limits.get(name), seed=seed)
        n_total = len(read_true(path)) if name in limits else len(rows)
        start = time.perf_counter()
        scores: List[float] = []
        n_chunks = 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for b in range(0, len(rows), block):
                part = rows[b : b + block]
                per_window = score_chunks(
                    [r.source for r in part], [[r.claim] for r in part], backend=backend,
                    chunk_size=chunk_size, window_size=window_size,
                )
                for group in per_window:
                    scores.append(max(group[0]))
                    n_chunks += len(group[0])
                done = b + len(part)
                rate = done / (time.perf_counter() - start)
                print(f"{name}: {done}/{len(rows)} rows, {rate:.1f} rows/s", file=sys.stderr, flush=True)
        elapsed = time.perf_counter() - start
        labels = [r.label for r in rows]
        metrics = binary_metrics(labels, scores)
        metrics.update(
            n_rows_in_file=n_total, sampled=name in limits, seconds=round(elapsed, 1),
            mean_chunks_per_row=n_chunks / max(1, len(rows)),
            warnings=sorted({str(w.message)[:160] for w in caught}),
        )
        report["datasets"][name] = metrics
        curves[name] = reliability_bins(labels, scores)
        if score_file:
            for r, s in zip(rows, scores):
                score_file.write(json.dumps({"dataset": name, "row": r.row, "label": r.label, "score": s}) + "\n")
        print(json.dumps({name: {k: metrics[k] for k in ("n", "roc_auc", "pearson", "kendall_tau", "ece")}}),
              file=sys.stderr, flush=True)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(report, indent=2), encoding="utf-8")
    if score_file:
        score_file.close()
    report["reliability"] = curves
    output.write_text(json.dumps(report, indent=2), encoding="utf-8")
    plot_reliability(curves, plot, title=f"SCALE on TRUE, model={model} ({backend.kind})")
    typer.echo(f"wrote {output} and {plot}")


if __name__ == "__main__":
    app()
