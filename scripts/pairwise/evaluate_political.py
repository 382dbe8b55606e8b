"""The political inconsistency benchmark as 3-class zero-shot NLI.

df_gold.csv has 698 statement pairs ("Text 1: ... Text 2: ...") with a
majority label in 3 classes. The NLI model's labels map to them:
contradiction -> Inconsistent, entailment -> Consistent, neutral -> Unrelated.
The pair is scored in both directions and the two probability vectors are
averaged (the relation is symmetric); the prediction is the argmax.
Reported: MCC per class (one class against the rest), overall MCC,
accuracy, macro F1 and the confusion matrix, against `Answer_3_classes`; and
Inconsistent against the rest as a ranking (ROC-AUC) and at a threshold, for
the fixed rules of the two P(contradiction) (`min`, `mean`, `max` at 0.5) and
the learned pair score `find_contradictions` reports (at its pair threshold).

    python scripts/pairwise/evaluate_political.py --data ../shared/data/political/df_gold.csv \
        --output metrics/pairwise_political.json
"""
import csv
import json
import os
import re
import time
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import sys  # noqa: E402

import typer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learned_pairs import learned_scores  # noqa: E402

CLASS_OF_LABEL = {"contradiction": "Inconsistent", "entailment": "Consistent", "neutral": "Unrelated"}
CLASSES = ["Inconsistent", "Consistent", "Unrelated"]
INPUT = re.compile(r"^\s*Text 1:\s*(?P<a>.*?)\s*Text 2:\s*(?P<b>.*?)\s*$", re.S)


def split_input(text: str):
    match = INPUT.match(text)
    if match is None:
        raise ValueError(f"not a 'Text 1: ... Text 2: ...' input: {text[:80]!r}")
    return match.group("a"), match.group("b")


def main(
    data: str = typer.Option("../shared/data/political/df_gold.csv"),
    model: str = typer.Option("default"),
    device: str = typer.Option("cpu"),
    limit: Optional[int] = typer.Option(None),
    output: str = typer.Option("metrics/pairwise_political.json"),
) -> None:
    """The political inconsistency benchmark as 3-class zero-shot NLI."""
    import torch
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, matthews_corrcoef, roc_auc_score

    from spacy_inconsistency.components.pairwise import AGGREGATIONS

    from spacy_inconsistency.backends.nli import NLIBackend

    torch.set_num_threads(1)
    with open(data, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:limit]
    pairs = [split_input(r["Input"]) for r in rows]
    gold = [r["Answer_3_classes"] for r in rows]
    backend = NLIBackend(model, device=device)
    labels = list(backend.labels)
    t = time.time()
    probs = backend.predict_proba([p for x, y in pairs for p in ((x, y), (y, x))])
    seconds = time.time() - t
    order = [labels.index(name) for name in ("entailment", "neutral", "contradiction")]
    forward, backward = probs[0::2][:, order], probs[1::2][:, order]
    learned = learned_scores(backend, model, [x for x, _ in pairs], [y for _, y in pairs], forward, backward)
    inconsistent = [g == "Inconsistent" for g in gold]
    rules = [(name, fn(forward[:, 2], backward[:, 2]), 0.5) for name, fn in AGGREGATIONS.items()]
    rules += [(name, learned[name], learned["threshold"]) for name in ("learned", "learned_nli")]
    ranking = {}
    for name, score, cut in rules:
        flagged = score >= cut
        hits = sum(1 for f, g in zip(flagged, inconsistent) if f and g)
        ranking[name] = {"roc_auc": float(roc_auc_score(inconsistent, score)), "threshold": cut,
                         "flagged": int(flagged.sum()), "inconsistent_flagged": hits}
    mean = (probs[0::2] + probs[1::2]) / 2.0
    names = [labels[i] for i in mean.argmax(axis=1)]
    pred = [CLASS_OF_LABEL.get(n, "Unrelated") for n in names]
    report = {
        "n": len(rows), "model": model, "label_order": labels,
        "gold_counts": {c: gold.count(c) for c in CLASSES},
        "pred_counts": {c: pred.count(c) for c in CLASSES},
        "accuracy": float(accuracy_score(gold, pred)),
        "macro_f1": float(f1_score(gold, pred, labels=CLASSES, average="macro", zero_division=0)),
        "mcc": float(matthews_corrcoef(gold, pred)),
        "mcc_per_class": {
            c: float(matthews_corrcoef([g == c for g in gold], [p == c for p in pred])) for c in CLASSES
        },
        "confusion_matrix": {"rows_gold_cols_pred": CLASSES,
                             "matrix": confusion_matrix(gold, pred, labels=CLASSES).tolist()},
        "inconsistent_vs_rest": ranking,
        "seconds": round(seconds, 1),
    }
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    typer.run(main)
