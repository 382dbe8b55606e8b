"""Fit the SCALE score calibration of an entailment model on TRUE and measure it held out.

Reads the per-row scores that `evaluate_true.py --scores-out` writes, fits
P(supported) = sigmoid(a * logit(score) + b) (`spacy_inconsistency.calibration`), and
prints per dataset the model's own scores against the map fitted on the *other*
datasets (leave one dataset out: the held-out figure) and the map fitted on all of them
(the one written to `--output`; in-sample): ECE (15 bins), Brier score, and accuracy and
F1 of flagging unsupported claims at 0.5. Each dataset weighs the same in a fit.

    python scripts/scale/evaluate_true.py --datasets qags_xsum,frank,paws,summeval \\
        --limit paws=2000 --limit summeval=800 --scores-out metrics/scale_true_scores.jsonl
    python scripts/scale/fit_calibration.py metrics/scale_true_scores.jsonl --model mpnet-lora \\
        --output spacy_inconsistency/models/nli-mpnet-lora/scale_calibration.json
"""
import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

import numpy
import typer

from spacy_inconsistency.calibration import ScoreCalibration
from spacy_inconsistency.metrics.calibration import expected_calibration_error


def figures(labels: numpy.ndarray, scores: numpy.ndarray) -> Dict[str, float]:
    from sklearn.metrics import f1_score

    flagged = scores < 0.5
    return {
        "ece": expected_calibration_error(labels.tolist(), scores.tolist()),
        "brier": float(numpy.mean((scores - labels) ** 2)),
        "acc": float(numpy.mean(flagged == (labels == 0))),
        "f1_unsupported": float(f1_score(labels == 0, flagged, zero_division=0)),
        "mean": float(scores.mean()),
    }


def main(
    scores: List[Path] = typer.Argument(..., help="JSONL files of evaluate_true.py --scores-out."),
    model: str = typer.Option(..., help="The model the scores are of (stored with the map)."),
    output: Optional[Path] = typer.Option(None, help="Write the map fitted on every dataset here."),
) -> None:
    from sklearn.metrics import roc_auc_score

    rows: Dict[str, List[tuple]] = defaultdict(list)
    for path in scores:
        for line in path.open(encoding="utf-8"):
            r = json.loads(line)
            rows[r["dataset"]].append((float(r["score"]), int(r["label"])))
    names = sorted(rows)
    data = {n: (numpy.array([s for s, _ in rows[n]]), numpy.array([y for _, y in rows[n]])) for n in names}

    def fit(use: List[str]) -> ScoreCalibration:
        x = numpy.concatenate([data[n][0] for n in use])
        y = numpy.concatenate([data[n][1] for n in use])
        groups = [n for n in use for _ in range(len(data[n][0]))]
        return ScoreCalibration.fit(x, y, groups=groups)

    full = fit(names)
    held: Dict[str, Dict[str, float]] = {}
    header = ("| dataset | rows | consistent | ROC-AUC | ECE: model / held out / all | Brier: model / held out | "
              "accuracy at 0.5: model / held out | F1 unsupported at 0.5: model / held out | mean score held out |")
    typer.echo(header)
    typer.echo("|---" * (header.count("|") - 1) + "|")
    for name in names:
        x, y = data[name]
        other = fit([n for n in names if n != name]) if len(names) > 1 else full
        raw, out, inside = figures(y, x), figures(y, other(x)), figures(y, full(x))
        held[name] = {"ece": round(out["ece"], 4), "brier": round(out["brier"], 4), "acc": round(out["acc"], 4)}
        typer.echo(
            f"| {name} | {len(y)} | {y.mean():.2f} | {roc_auc_score(y, x) * 100:.1f} | "
            f"{raw['ece']:.3f} / {out['ece']:.3f} / {inside['ece']:.3f} | {raw['brier']:.3f} / {out['brier']:.3f} | "
            f"{raw['acc']:.3f} / {out['acc']:.3f} | {raw['f1_unsupported']:.3f} / {out['f1_unsupported']:.3f} | "
            f"{out['mean']:.2f} |"
        )
    typer.echo(f"\nmap fitted on {', '.join(names)}: P = sigmoid({full.slope:.4f} * logit(score) + {full.intercept:.4f}); "
               f"score 0.5 at raw {1 / (1 + numpy.exp(full.intercept / full.slope)):.6f}")
    if output is not None:
        calibration = ScoreCalibration(full.slope, full.intercept, {
            "model": model, "data": "TRUE: " + ", ".join(f"{n} ({len(data[n][1])} rows)" for n in names),
            "weights": "each dataset the same", "held_out": held,
        })
        output.parent.mkdir(parents=True, exist_ok=True)
        calibration.to_disk(output)
        typer.echo(f"wrote {output}")


if __name__ == "__main__":
    typer.run(main)
