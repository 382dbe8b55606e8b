"""ProSeCCo: does the pairwise score separate one speaker's self-contradictions from other pairs?

Each of the 1,327 pairs (685 "self-contradiction", 642 "no self-contradiction")
is scored in both directions by the NLI model; the score is a fixed rule
(`min`, `mean`, `max`) of the two P(contradiction), or the learned pair score
that `find_contradictions` reports (`learned`: both directions' probabilities
and the alignment features of the two statements; `learned_nli`: without the
features). Reported: ROC-AUC, and precision / recall / F1 at the threshold
(0.5 by default for the fixed rules, chosen before looking at this data; for
the learned score its own pair threshold, the one `find_contradictions` uses).
The best-F1 threshold on the same data is shown too, marked as an oracle (it
is fitted on the test set).

    python scripts/pairwise/evaluate_prosecco.py --data ../shared/data/contradiction/ProSeCCo_final.csv \
        --output metrics/pairwise_prosecco.json
"""
import csv
import json
import os
import time
from enum import Enum
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import sys  # noqa: E402

import numpy  # noqa: E402
import typer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learned_pairs import learned_scores  # noqa: E402


class Field(str, Enum):
    proposition = "proposition"
    locution = "locution"


def main(
    data: str = typer.Option("../shared/data/contradiction/ProSeCCo_final.csv"),
    model: str = typer.Option("default"),
    device: str = typer.Option("cpu"),
    field: Field = typer.Option(Field.proposition, help="score the reconstructed propositions or the verbatim "
                                "locutions"),
    threshold: float = typer.Option(0.5),
    limit: Optional[int] = typer.Option(None, help="first N pairs only (smoke tests)"),
    output: str = typer.Option("metrics/pairwise_prosecco.json"),
) -> None:
    """ProSeCCo: does the pairwise score separate one speaker's self-contradictions from other pairs?"""
    field = field.value

    import torch
    from sklearn.metrics import precision_recall_fscore_support, roc_auc_score

    from spacy_inconsistency.backends.nli import NLIBackend
    from spacy_inconsistency.components.pairwise import AGGREGATIONS
    from spacy_inconsistency.pair_score import stack_probabilities

    torch.set_num_threads(1)
    with open(data, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:limit]
    gold = numpy.array([r["label"] == "self-contradiction" for r in rows])
    a = [r[f"{field}_1"] for r in rows]
    b = [r[f"{field}_2"] for r in rows]
    backend = NLIBackend(model, device=device)
    t = time.time()
    probs = stack_probabilities(backend.predict([p for x, y in zip(a, b) for p in ((x, y), (y, x))]), 2 * len(rows))
    seconds = time.time() - t
    forward, backward = probs[0::2, 2], probs[1::2, 2]
    learned = learned_scores(backend, model, a, b, probs[0::2], probs[1::2])
    report = {"n": len(rows), "positives": int(gold.sum()), "field": field, "model": model,
              "threshold": threshold, "seconds": round(seconds, 1),
              "pairs_per_s": round(len(rows) / seconds, 1), "aggregations": {},
              # What flagging every pair would score: the floor any F1 must beat.
              "all_positive_f1": float(2 * gold.mean() / (1 + gold.mean())) if len(gold) else None}
    rules = [(name, fn(forward, backward), threshold) for name, fn in AGGREGATIONS.items()]
    rules += [(name, learned[name], learned["threshold"]) for name in ("learned", "learned_nli")]
    for name, score, cut in rules:
        pred = score >= cut
        p, r, f1, _ = precision_recall_fscore_support(gold, pred, average="binary", zero_division=0)
        grid = numpy.linspace(0.05, 0.95, 19)
        f1s = [precision_recall_fscore_support(gold, score >= g, average="binary", zero_division=0)[2] for g in grid]
        best = int(numpy.argmax(f1s))
        report["aggregations"][name] = {
            "roc_auc": float(roc_auc_score(gold, score)), "threshold": cut,
            "precision": float(p), "recall": float(r), "f1": float(f1),
            "oracle_threshold": float(grid[best]), "oracle_f1": float(f1s[best]),
        }
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    typer.run(main)
