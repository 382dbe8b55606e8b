"""Hard negatives for the second stage: the consistent pairs of written documents it scores highest.

In the suite's matched pairs the contradiction document and its control share every unit but
one, so a shared, consistent pair that the second stage scores high hides the gold pair in the
one and gives a false alarm in the other (the two documents tie: docs/detection.md).
`make_near_miss_pairs.py` teaches the gold pair against the control's near miss and two pairs
of each document drawn at random; the random ones are mostly easy. This script
runs the default detector on the written training records (`data/near_miss`, none of the suite's)
and keeps, as `not_contradiction` rows in the order read, the pairs its second stage read and
scored at or over `--min-score`: every such pair of the control document (consistent by the
writers' brief) and those of the contradiction document that touch neither gold sentence (the
same sentences as the control's, or consistent with them).

    python scripts/nli/mine_hard_negatives.py --input data/near_miss --pattern "train_*.jsonl" --min-score 0.1 --output assets/nli/hard_negatives_train.jsonl

The shipped hard negatives were mined with the adapters the shipped ones were continued from
(`spacy project run hard-negatives` passes them as `--rescorer`).
"""
import json
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

import typer

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from evaluate_behaviour import _overlapping_units, build_pipeline  # noqa: E402

from spacy_inconsistency.corpora.behaviour import read_behaviour_suite  # noqa: E402

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def consistent_pairs(scores, gold: Tuple[Tuple[int, int], Tuple[int, int]], side: str, min_score: float) -> List[Tuple[int, int, float]]:
    """(premise unit, hypothesis unit, score) of the read pairs at or over `min_score` that are not
    contradictions: all of a control's; a contradiction document's that touch no gold unit."""
    touched: Set[int] = set()
    if side == "contradiction":
        touched = set(_overlapping_units(scores.units, gold[0])) | set(_overlapping_units(scores.units, gold[1]))
    out = []
    for (i, j), s in zip(scores.pairs.tolist(), scores.score.tolist()):
        if s >= min_score and i not in touched and j not in touched:
            out.append((i, j, float(s)))
    return out


@app.command()
def main(
    input_dir: Path = typer.Option(..., "--input", help="Folder of written records (the suite's format)."),
    pattern: str = typer.Option("train_*.jsonl"),
    output: Path = typer.Option(..., help="JSONL rows (premise, hypothesis, label, source, doc, score)."),
    min_score: float = typer.Option(0.1, help="Keep read pairs the default detector scores at least this."),
    model: str = typer.Option("default"),
    rescorer: str = typer.Option("mpnet-lora", help="The second stage whose read pairs are mined: mpnet-lora (the shipped adapters) or a merged model directory with its pair_scorer.json."),
    batch_size: int = typer.Option(32),
) -> None:
    records = read_behaviour_suite(input_dir, pattern)
    nlp = build_pipeline(model, {"rescorer.model": rescorer})
    detector = nlp.get_pipe("inconsistency_detector")
    jobs = [(r, "contradiction") for r in records] + [(r, "control") for r in records]
    rows: Dict[Tuple[str, str], dict] = {}
    by_side = {"contradiction": 0, "control": 0}
    for start in range(0, len(jobs), batch_size):
        batch = jobs[start : start + batch_size]
        docs = [nlp.make_doc(r[side]["text"]) for r, side in batch]
        detector.segment(docs)
        for (r, side), doc, s in zip(batch, docs, detector.predict(docs)):
            gold = r["gold"] if side == "contradiction" else r["control_gold"]
            texts = [u.text.strip() for u in s.units]  # what the models read
            for i, j, score in consistent_pairs(s, gold, side, min_score):
                key = (texts[i], texts[j])
                if key not in rows:
                    by_side[side] += 1
                    rows[key] = {"premise": key[0], "hypothesis": key[1], "label": "not_contradiction",
                                 "source": "near_miss_hard", "doc": r["id"], "capability": r["capability"],
                                 "score": round(score, 4)}
        print(f"{min(start + batch_size, len(jobs))}/{len(jobs)} documents, {len(rows)} rows", file=sys.stderr, flush=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf8") as f:
        for row in rows.values():
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(json.dumps({"records": len(records), "rows": len(rows), "from_side": by_side, "min_score": min_score}))


if __name__ == "__main__":
    app()
