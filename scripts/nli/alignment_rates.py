#!/usr/bin/env python
"""How often each alignment feature fires on the suite's contradiction pairs and on their
controls' near-miss pairs, by kind of control: a feature that fires as often on both says
little about whether two statements are one event. No NLI model is read; the pairs are the
records' own (`pair` of each side), parsed as the detector parses units.

    python scripts/nli/alignment_rates.py --split dev [--output rates.json]
"""
import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]


def feature_rates(records: List[dict]) -> Dict[str, Dict[str, float]]:
    """Per feature: the share of gold pairs and of control pairs (all, and by control kind) where it
    is not 0, with the numbers of pairs under "n"."""
    from spacy_inconsistency.alignment import FEATURE_NAMES, facts_of_texts, pair_feature_matrix

    texts = [t for r in records for t in (*r["contradiction"]["pair"], *r["control"]["pair"])]
    facts = facts_of_texts(texts)
    fired = pair_feature_matrix(facts, [(4 * k + s, 4 * k + s + 1) for k in range(len(records)) for s in (0, 2)]) != 0
    gold, control = fired[0::2], fired[1::2]
    kinds = defaultdict(list)
    for k, r in enumerate(records):
        kinds[r["control"].get("kind", "?")].append(k)
    out: Dict[str, Dict[str, float]] = {"n": {"gold": len(records), "control": len(records)}}
    out["n"].update({f"control: {kind}": len(rows) for kind, rows in sorted(kinds.items())})
    for i, name in enumerate(FEATURE_NAMES):
        row = {"gold": float(gold[:, i].mean()), "control": float(control[:, i].mean())}
        row.update({f"control: {kind}": float(control[rows, i].mean()) for kind, rows in sorted(kinds.items())})
        out[name] = row
    return out


def main(
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of the suite files."),
    split: str = typer.Option("dev", help="'dev', 'test', 'test2' or a glob."),
    output: Optional[Path] = typer.Option(None, help="Write the rates as JSON here."),
) -> None:
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    pattern = split if "*" in split else f"{split}_*.jsonl"
    rates = feature_rates(read_behaviour_suite(suite, pattern))
    columns = list(rates["n"])
    print("| feature | " + " | ".join(f"{c} ({rates['n'][c]})" for c in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, row in rates.items():
        if name != "n" and numpy.any([row[c] for c in columns]):
            print(f"| {name} | " + " | ".join(f"{row[c]:.2f}" for c in columns) + " |")
    if output is not None:
        output.write_text(json.dumps(rates, indent=1), encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
