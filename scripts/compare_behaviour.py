"""Two detectors on the same behavioural records: is B's matched AUC really above A's?

Reads the `--details` files of two `evaluate_behaviour.py` runs over the same split and
prints, over all records, per capability and per kind of control, both matched AUCs and
their difference with a paired bootstrap interval (records resampled together), the
share of records whose outcome changed and the share of resamples without a gain. A
difference whose interval holds 0 is within what the records can tell.

    python scripts/evaluate_behaviour.py --split dev --details runs/a-dev.jsonl
    python scripts/evaluate_behaviour.py --split dev --set 'rescorer.model="B"' --details runs/b-dev.jsonl
    python scripts/compare_behaviour.py runs/a-dev.jsonl runs/b-dev.jsonl --split dev
"""
import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import typer

from spacy_inconsistency.corpora.behaviour import read_behaviour_suite, split_pattern
from spacy_inconsistency.metrics.behaviour import paired_auc_difference

ROOT = Path(__file__).resolve().parent.parent


def read_details(path: Path) -> Dict[str, Tuple[float, float]]:
    """Record id -> (contradiction score, control score) of one details file."""
    sides: Dict[str, Dict[str, float]] = defaultdict(dict)
    with path.open(encoding="utf8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("side") not in ("contradiction", "control") or "id" not in row or "score" not in row:
                raise typer.BadParameter(f"{path}:{n}: not a line of evaluate_behaviour.py --details")
            sides[row["id"]][row["side"]] = float(row["score"])
    incomplete = sorted(i for i, s in sides.items() if len(s) != 2)
    if incomplete:
        raise typer.BadParameter(f"{path}: records without both documents: {incomplete[:5]}")
    return {i: (s["contradiction"], s["control"]) for i, s in sides.items()}


def compare(a: Dict[str, Tuple[float, float]], b: Dict[str, Tuple[float, float]], groups: Dict[str, List[str]],
            *, n_resamples: int = 2000, seed: int = 0) -> Dict[str, Optional[Dict[str, float]]]:
    """`paired_auc_difference` of B against A for each group of record ids."""
    out = {}
    for name, ids in groups.items():
        row = paired_auc_difference([a[i][0] for i in ids], [a[i][1] for i in ids], [b[i][0] for i in ids],
                                    [b[i][1] for i in ids], n_resamples=n_resamples, seed=seed)
        out[name] = None if row is None else {"n": len(ids), **row}
    return out


def markdown(rows: Dict[str, Optional[Dict[str, float]]]) -> str:
    lines = ["| records | n | A | B | B - A | 95% interval | changed | no gain |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        if r is not None:
            lines.append(f"| {name} | {r['n']} | {r['a']:.3f} | {r['b']:.3f} | {r['difference']:+.3f} | "
                         f"{r['low']:+.3f} to {r['high']:+.3f} | {r['changed']:.3f} | {r['no_gain']:.3f} |")
    return "\n".join(lines)


def main(
    details_a: Path = typer.Argument(..., help="Details of detector A (evaluate_behaviour.py --details)."),
    details_b: Path = typer.Argument(..., help="Details of detector B, over the same records."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of the suite files (capabilities, control kinds)."),
    split: str = typer.Option(..., help="The split both ran on: 'dev', 'dev2', 'dev3', 'test', 'test2', 'test3' or globs."),
    n_resamples: int = typer.Option(2000, help="Bootstrap resamples."),
    seed: int = typer.Option(0, help="Seed of the resampling."),
    output: Optional[Path] = typer.Option(None, help="Write the rows as JSON here."),
) -> None:
    records = read_behaviour_suite(suite, split_pattern(split))
    a, b = read_details(details_a), read_details(details_b)
    ids = [r["id"] for r in records]
    for path, scores in ((details_a, a), (details_b, b)):
        if set(scores) != set(ids):
            missing, extra = sorted(set(ids) - set(scores)), sorted(set(scores) - set(ids))
            raise typer.BadParameter(f"{path} does not hold the records of {split}: "
                                     f"{len(missing)} missing {missing[:3]}, {len(extra)} others {extra[:3]}")
    groups: Dict[str, List[str]] = {"all": ids}
    for key, label in (("capability", "capability: {}"), ("kind", "control: {}")):
        by: Dict[str, List[str]] = defaultdict(list)
        for r in records:
            value = r["capability"] if key == "capability" else r["control"].get("kind") or "(none)"
            by[label.format(value)].append(r["id"])
        groups.update(sorted(by.items()))
    rows = compare(a, b, groups, n_resamples=n_resamples, seed=seed)
    typer.echo(f"A = {details_a}\nB = {details_b}\n")
    typer.echo(markdown(rows))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
