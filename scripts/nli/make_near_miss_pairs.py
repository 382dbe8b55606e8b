"""NLI rows from written near-miss documents: the contradiction and the edit that undoes it.

Each record (the behavioural suite's format, `corpora.behaviour`) is a short document with one
contradiction and its consistent twin, which differs in a few words of one sentence (a change
over stated time, another entity, another aspect, a compatible number, a hedge, a paraphrase,
another speaker). The rows teach what the suite measures and templates did not: the gold pair is
a contradiction (both orders; `add_reverse_contradictions` adds the second when training), the
control's near-miss pair is not (both orders), and so are `--other-pairs` further pairs of units
of each document, drawn at random (each document has only the one contradiction). Labels come
from how the documents were written; nothing is scored by a model.

A control that gives the same words to another speaker adds no row (the two sentences alone do
contradict). Records are held out whole (`--heldout-records`), so that no held-out pair shares a
document with a training pair.

The training records are `data/near_miss/` (written for training, by writers who saw neither the
suite nor the models; its README says how). The behavioural suite's splits in `tests/behaviour/` are
for measuring: a model trained on some of them is measured on the others only.

    python scripts/nli/make_near_miss_pairs.py --input data/near_miss --output-dir assets/nli   # spacy project run near-miss-pairs
"""
import random
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import List

import typer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_edit_pairs import write_split  # noqa: E402
from suite_units import SIDES, unit_segmenter  # noqa: E402

NOT_CONTRADICTION = "not_contradiction"


def _same_text(texts) -> set:
    """The texts with runs of whitespace as one space (units and pair sentences may differ there)."""
    return {" ".join(t.split()) for t in texts}


def record_rows(record: dict, units: List[str], other_units: List[str], other_pairs: int, rng: random.Random) -> List[dict]:
    """Rows of one record: `units` are the contradiction document's, `other_units` the control's."""
    base = {"doc": record["id"], "capability": record["capability"]}
    a, b = record["contradiction"]["pair"]
    rows = [{"premise": a, "hypothesis": b, "label": "contradiction", "source": "near_miss_gold", **base}]
    ca, cb = record["control"]["pair"]
    kind = record["control"].get("kind", "")
    # A control that gives the same words to another speaker holds the gold pair itself: the
    # sentences alone contradict, and the detector's speaker grouping is what tells them apart.
    same_words = _same_text((a, b)) == _same_text((ca, cb))
    for p, h in () if same_words else ((ca, cb), (cb, ca)):
        rows.append({"premise": p, "hypothesis": h, "label": NOT_CONTRADICTION, "source": "near_miss_control",
                     "kind": kind, **base})
    for side, side_units in zip(SIDES, (units, other_units)):
        gold = _same_text(record[side]["pair"])
        pairs = [(x, y) for x, y in combinations(side_units, 2) if not _same_text((x, y)) <= gold and x != y]
        for x, y in rng.sample(pairs, min(other_pairs, len(pairs))):
            if rng.random() < 0.5:
                x, y = y, x
            rows.append({"premise": x, "hypothesis": y, "label": NOT_CONTRADICTION, "source": "near_miss_other", **base})
    return rows


def main(
    input_dir: Path = typer.Option(..., "--input", help="Folder of written records (*.jsonl, the suite's format)."),
    output_dir: Path = typer.Option(..., help="Where near_miss_train.jsonl / near_miss_heldout.jsonl go."),
    pattern: str = typer.Option("*.jsonl", help="Files of --input to read."),
    other_pairs: int = typer.Option(2, help="Further unit pairs of each document taken as not contradictions."),
    heldout_records: float = typer.Option(0.1, help="Share of records held out (whole records)."),
    seed: int = typer.Option(0),
) -> None:
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    rng = random.Random(seed)
    records = read_behaviour_suite(input_dir, pattern)
    units = unit_segmenter()
    ids = sorted(r["id"] for r in records)
    held_ids = set(random.Random(seed).sample(ids, int(round(len(ids) * heldout_records))))
    train, held = [], []
    for record in records:
        rows = record_rows(record, units(record["contradiction"]["text"]), units(record["control"]["text"]),
                           other_pairs, rng)
        (held if record["id"] in held_ids else train).extend(rows)
    info = {"records": len(records), "heldout_records": len(held_ids),
            "capabilities": dict(Counter(r["capability"] for r in records)),
            "control_kinds": dict(Counter(r["control"].get("kind", "") for r in records))}
    write_split(output_dir, "near_miss", train, held, info)


if __name__ == "__main__":
    typer.run(main)
