"""ContraDoc (50 documents): document-level self-contradiction with the pairwise detector.

Positives are the "contradictory" documents whose evidence sentence is still
in the text after the 2,000-character cut; contradictory documents whose
evidence was cut are left out (they may no longer contradict themselves);
all "non_contradictory" documents are negatives. The document score is the
highest pair score (the detector's pair score, the learned one by default),
so every pair is kept (threshold 0) and the threshold (default: the
detector's) is applied afterwards. Settings: the detector's default
candidates (all pairs up to the budget of 2,000) and the older rule (all
pairs up to 100, else a window of 4). Reported: ROC-AUC, P/R/F1 at the
threshold, pairs scored, and how often the top pair of a positive touches
the evidence.

    python scripts/pairwise/evaluate_contradoc.py --data ../shared/data/contradiction/contradoc_50.json \
        --output metrics/pairwise_contradoc.json
"""
import json
import os
import time
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy  # noqa: E402
import typer  # noqa: E402

SETTINGS = {
    "default": None,
    "classic (all pairs up to 100, else window 4)": {
        "@misc": "spacy-inconsistency.candidates.classic.v1", "window": 4, "max_all_pairs": 100,
    },
}


def main(
    data: str = typer.Option("../shared/data/contradiction/contradoc_50.json"),
    model: str = typer.Option("default"),
    device: str = typer.Option("cpu"),
    fixed_threshold: Optional[float] = typer.Option(None, "--threshold", help="default: the detector's threshold"),
    aggregation: str = typer.Option("learned"),
    limit: Optional[int] = typer.Option(None),
    output: str = typer.Option("metrics/pairwise_contradoc.json"),
) -> None:
    """ContraDoc (50 documents): document-level self-contradiction with the pairwise detector."""
    import spacy
    import torch
    from sklearn.metrics import precision_recall_fscore_support, roc_auc_score

    torch.set_num_threads(1)
    records = json.loads(Path(data).read_text(encoding="utf-8"))[:limit]
    kept = [r for r in records if r["label"] == "non_contradictory" or r["evidence"] in r["text"]]
    gold = numpy.array([r["label"] == "contradictory" for r in kept])
    report = {"n_documents": len(records), "n_kept": len(kept), "positives": int(gold.sum()),
              "left_out_evidence_cut": len(records) - len(kept), "aggregation": aggregation, "settings": {}}
    for name, candidates in SETTINGS.items():
        nlp = spacy.blank("en")
        nlp.add_pipe("inconsistency_segmenter")
        detector = nlp.add_pipe("contradiction_detector", config={
            "model": {"model": model, "device": device}, "aggregation": aggregation,
            "candidates": candidates,
        })
        threshold = detector.threshold if fixed_threshold is None else fixed_threshold
        report["threshold"] = threshold
        detector.cfg["threshold"] = 0.0
        t = time.time()
        scores, n_pairs, hits = [], 0, []
        for doc, rec in zip(nlp.pipe(r["text"] for r in kept), kept):
            found = doc._.contradictions
            n_pairs += len(found)
            scores.append(found[0]["score"] if found else 0.0)
            if rec["label"] == "contradictory":
                start = rec["text"].find(rec["evidence"])
                end = start + len(rec["evidence"])
                top = found[0]["units"] if found else []
                hits.append(any(u["start_char"] < end and start < u["end_char"] for u in top))
        seconds = time.time() - t
        scores = numpy.array(scores)
        p, r, f1, _ = precision_recall_fscore_support(gold, scores >= threshold, average="binary", zero_division=0)
        report["settings"][name] = {
            "roc_auc": float(roc_auc_score(gold, scores)), "precision": float(p), "recall": float(r), "f1": float(f1),
            "pairs_scored": n_pairs, "seconds": round(seconds, 1),
            "top_pair_touches_evidence": float(numpy.mean(hits)) if hits else None,
        }
        print(name, json.dumps(report["settings"][name]), flush=True)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    typer.run(main)
