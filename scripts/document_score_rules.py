"""Other document scores than the highest pair score, measured from one run's pair scores.

A Doc's `inconsistency_score` was its highest pair score until 2026-11-30, and is since the
noisy-OR of its three highest (`doc_score_top_k`; docs/detection.md, "The document's score").
This script asks which rule over the same pair scores ranks documents better:

* ``max``: the highest pair score (`doc_score_top_k = 1`);
* ``noisy_or``: 1 - prod(1 - s) over every compared pair, the chance that at least one
  pair contradicts if the calibrated pair scores were independent;
* ``noisy_or_top3``: the same over the document's three highest pair scores only (what the
  detector reports since 2026-11-30; the cascade's unread pairs score 0);
* ``length_aware``: F(max) ** k, where F is the distribution of pair scores in
  consistent news text that the document threshold is built on and k the number of
  pairs compared: how unlikely a highest score this high is in a consistent document
  of as many pairs. It is the document threshold's own quantity
  (`pair_score.DocumentThreshold`), so flagging at 1 - alpha is the same decision.

It reads the per-document files of `evaluate_behaviour.py --details` (matched and
pooled ROC-AUC between contradiction documents and their controls) and of
`evaluate_documents.py --details` (ContraDoc ROC-AUC), so nothing is scored twice:

    python scripts/evaluate_behaviour.py --split test --details metrics/behaviour_test_docs.jsonl
    python scripts/evaluate_documents.py --details metrics/documents_docs.jsonl
    python scripts/document_score_rules.py --suite-details metrics/behaviour_test_docs.jsonl \
        --documents-details metrics/documents_docs.jsonl
"""
import json
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy
import typer

from spacy_inconsistency.metrics.behaviour import matched_auc, pooled_auc
from spacy_inconsistency.pair_score import DocumentThreshold, PairScoreModel
from spacy_inconsistency.pair_scoring import noisy_or_top

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCORER = ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora" / "pair_scorer.json"


def _read(path: Path) -> List[dict]:
    with path.open(encoding="utf8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rules(threshold: DocumentThreshold) -> Dict[str, Callable[[List[float]], float]]:
    """Document score rules over a document's pair scores, by name.

    threshold (DocumentThreshold): The deciding model's document threshold (its F).
    RETURNS (Dict[str, Callable]): name -> function of the pair scores.
    """

    def highest(scores: List[float]) -> float:
        return max(scores) if scores else 0.0

    def noisy_or(scores: List[float]) -> float:
        return float(1.0 - numpy.prod(1.0 - numpy.asarray(scores, dtype=numpy.float64))) if scores else 0.0

    def noisy_or_top3(scores: List[float]) -> float:
        return noisy_or_top(numpy.asarray(scores, dtype=numpy.float64), 3)

    def length_aware(scores: List[float]) -> float:
        if not scores:
            return 0.0
        return float(numpy.interp(highest(scores), threshold.grid, threshold.cdf) ** len(scores))

    return {"max": highest, "noisy_or": noisy_or, "noisy_or_top3": noisy_or_top3, "length_aware": length_aware}


def main(
    suite_details: Optional[Path] = typer.Option(None, help="evaluate_behaviour.py --details output."),
    documents_details: Optional[Path] = typer.Option(None, help="evaluate_documents.py --details output."),
    pair_scorer: Path = typer.Option(DEFAULT_SCORER, help="pair_scorer.json of the model that decides (its document threshold's F)."),
    output: Optional[Path] = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    if suite_details is None and documents_details is None:
        raise typer.BadParameter("give --suite-details, --documents-details or both")
    threshold = PairScoreModel.from_disk(pair_scorer).document_thresholds.get("full")
    if threshold is None:
        raise typer.BadParameter(f"{pair_scorer} has no document threshold")
    suite: Dict[str, Dict[str, List[float]]] = {"contradiction": {}, "control": {}}
    if suite_details is not None:
        for d in _read(suite_details):
            if "pair_scores" not in d:
                raise typer.BadParameter(f"{suite_details} has no pair_scores: rerun evaluate_behaviour.py")
            suite[d["side"]][d["id"]] = d["pair_scores"]
    ids = sorted(set(suite["contradiction"]) & set(suite["control"]))
    contradoc = [d for d in _read(documents_details) if d["set"] == "contradoc"] if documents_details else []
    results: Dict[str, Dict[str, Optional[float]]] = {}
    for name, rule in rules(threshold).items():
        row: Dict[str, Optional[float]] = {}
        if suite_details is not None:
            positive = [rule(suite["contradiction"][i]) for i in ids]
            negative = [rule(suite["control"][i]) for i in ids]
            row["suite_matched_auc"] = matched_auc(positive, negative)
            row["suite_pooled_auc"] = pooled_auc(positive, negative)
        if documents_details is not None:
            row["contradoc_auc"] = pooled_auc(
                [rule(d["pair_scores"]) for d in contradoc if d["label"] == "contradictory"],
                [rule(d["pair_scores"]) for d in contradoc if d["label"] != "contradictory"],
            )
        results[name] = row
    columns = sorted({c for row in results.values() for c in row})
    typer.echo("| document score | " + " | ".join(columns) + " |")
    typer.echo("|---" * (len(columns) + 1) + "|")
    for name, row in results.items():
        typer.echo(f"| {name} | " + " | ".join("" if row[c] is None else f"{row[c]:.3f}" for c in columns) + " |")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
