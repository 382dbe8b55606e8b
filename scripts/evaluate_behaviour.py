"""The detector on the behavioural suite: recall, pair hits, false alarms and matched AUC per capability.

Runs `inconsistency_detector` (default settings unless overridden) on every record's
contradiction document and its matched control, and prints a Markdown table.

    python scripts/evaluate_behaviour.py --suite tests/behaviour --split test --output metrics/behaviour_test.json
    python scripts/evaluate_behaviour.py --split dev --set aggregation=max --set threshold=0.7
"""
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
import typer

from spacy_inconsistency.corpora.behaviour import read_behaviour_suite, split_pattern
from spacy_inconsistency.metrics.behaviour import DocOutcome, MatchedOutcome, behaviour_metrics

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ("n", "recall", "pair_hits", "false_alarms", "matched_auc", "pooled_auc", "pair_auc")


def _parse_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_settings(items: List[str]) -> Dict[str, Any]:
    """`--set KEY=VALUE` options as a dict, each value read as JSON where it is JSON."""
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        settings[key] = _parse_value(value)
    return settings


def apply_settings(config: Dict[str, Any], settings: Dict[str, Any]) -> Dict[str, Any]:
    """Write `settings` into a detector config; "model.dtype" sets a value inside the model's block."""
    for key, value in settings.items():
        *parents, last = key.split(".")
        target = config
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return config


def build_pipeline(model: str, settings: Dict[str, Any]):
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_detector", config=apply_settings({"model": {"model": model}}, settings))
    return nlp


def _overlapping_units(units, span: Tuple[int, int]) -> List[int]:
    return [i for i, u in enumerate(units) if u.start_char < span[1] and span[0] < u.end_char]


def gold_pair_indices(scores, gold: Tuple[Tuple[int, int], Tuple[int, int]]) -> List[int]:
    """Indices of the compared pairs of units covering the two gold sentences, one each."""
    a = set(_overlapping_units(scores.units, gold[0]))
    b = set(_overlapping_units(scores.units, gold[1]))
    return [k for k, (i, j) in enumerate(scores.pairs.tolist()) if (i in a and j in b) or (i in b and j in a)]


def gold_pair_score(scores, gold: Tuple[Tuple[int, int], Tuple[int, int]]) -> Optional[float]:
    """Highest score of a scored pair of units covering the two gold sentences, one each."""
    found = gold_pair_indices(scores, gold)
    return max(float(scores.score[k]) for k in found) if found else None


def outcome(doc, scores, gold) -> DocOutcome:
    findings = doc._.contradictions or []
    top = None
    if findings:
        units = findings[0]["units"]
        top = tuple((u["start_char"], u["end_char"]) for u in units)
    return DocOutcome(
        score=float(doc._.inconsistency_score or 0.0),
        flagged=bool(findings),
        top_pair=top,
        gold_pair_score=gold_pair_score(scores, gold),
    )


def run_suite(nlp, records, *, batch_size: int = 32, progress: bool = True) -> Tuple[List[MatchedOutcome], list]:
    """Outcomes of every record; also the per-document details."""
    from tqdm import tqdm

    detector = nlp.get_pipe("inconsistency_detector")
    jobs = [(r, "contradiction") for r in records] + [(r, "control") for r in records]
    results: Dict[Tuple[str, str], DocOutcome] = {}
    details = []
    bar = tqdm(total=len(jobs), desc="documents", disable=not progress, file=sys.stderr)
    for start in range(0, len(jobs), batch_size):
        batch = jobs[start : start + batch_size]
        docs = [nlp.make_doc(r[side]["text"]) for r, side in batch]
        detector.segment(docs)
        scores = detector.predict(docs)
        detector.set_annotations(docs, scores)
        for (r, side), doc, s in zip(batch, docs, scores):
            gold = r["gold"] if side == "contradiction" else r["control_gold"]
            o = outcome(doc, s, gold)
            results[(r["id"], side)] = o
            details.append({
                "id": r["id"], "side": side, "score": o.score, "flagged": o.flagged,
                "gold_pair_score": o.gold_pair_score, "n_units": len(s.units), "n_pairs": int(len(s.pairs)),
                "top": [u["text"] for u in doc._.contradictions[0]["units"]] if doc._.contradictions else None,
                "top_score": doc._.contradictions[0]["score"] if doc._.contradictions else None,
                # Every compared pair's score, so that other document scores can be measured from one run
                # (scripts/document_score_rules.py).
                "pair_scores": [round(float(x), 6) for x in s.score],
            })
        bar.update(len(batch))
    bar.close()
    outcomes = [
        MatchedOutcome(
            capability=r["capability"], gold=r["gold"],
            contradiction=results[(r["id"], "contradiction")], control=results[(r["id"], "control")],
            control_kind=r["control"].get("kind", ""),
        )
        for r in records
    ]
    return outcomes, details


def markdown_table(metrics: Dict[str, Any]) -> str:
    def fmt(v):
        return "" if v is None else str(v) if isinstance(v, int) else f"{v:.2f}"

    lines = ["| capability | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, row in list(metrics["by_capability"].items()) + [("**all**", metrics["all"])]:
        lines.append(f"| {name} | " + " | ".join(fmt(row.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines)


def control_kind_table(metrics: Dict[str, Any]) -> str:
    """Which kinds of near miss the contradictions lose to (records without a kind: "(none)")."""
    lines = ["| control kind | n | false_alarms | matched_auc | lost: pair judgement | lost: other pairs |",
             "|---|---|---|---|---|---|"]
    for kind, row in metrics["by_control_kind"].items():
        lost = row["matched_losses"]
        lines.append(f"| {kind or '(none)'} | {row['n']} | {row['false_alarms']:.2f} | {row['matched_auc']:.3f} | "
                     f"{lost['pair']:.3f} | {lost['other_pairs']:.3f} |")
    return "\n".join(lines)


def main(
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of the suite files."),
    split: str = typer.Option("test", help="'test' (test_*.jsonl), 'test2' (test2_*.jsonl), 'test3' (test3_*.jsonl), "
                                             "'dev' (dev_*.jsonl), 'dev2', 'dev3' or globs (comma-separated)."),
    model: str = typer.Option("default", help="NLI model: 'default', a path or a hub id."),
    set_: List[str] = typer.Option([], "--set", help="Detector setting, e.g. --set aggregation=max or --set model.dtype=bfloat16 (JSON values)."),
    output: Optional[Path] = typer.Option(None, help="Write figures (and settings) as JSON here."),
    details: Optional[Path] = typer.Option(None, help="Write one JSON line per document here."),
    progress: bool = typer.Option(True, help="Progress bar on stderr."),
) -> None:
    pattern = split_pattern(split)
    records = read_behaviour_suite(suite, pattern)
    settings = parse_settings(set_)
    nlp = build_pipeline(model, settings)
    outcomes, per_doc = run_suite(nlp, records, progress=progress)
    metrics = behaviour_metrics(outcomes)
    detector = nlp.get_pipe("inconsistency_detector")
    metrics["settings"] = {"model": model, "split": pattern, "records": len(records), "set": settings,
                           **{k: v for k, v in detector.cfg.items()}}
    typer.echo(markdown_table(metrics))
    a = metrics["all"]
    low, high = a["matched_auc_interval"]
    typer.echo(
        f"\n{len(records)} records: recall {a['recall']:.2f}, pair hits {a['pair_hits']:.2f}, "
        f"false alarms {a['false_alarms']:.2f}, matched AUC {a['matched_auc']:.3f} "
        f"(95% bootstrap interval {low:.3f}-{high:.3f}), pair AUC {a['pair_auc']:.3f}"
    )
    lost = a["matched_losses"]
    typer.echo(
        f"records lost to their controls: {lost['pair']:.3f} by the pair judgement (gold pair <= near miss), "
        f"{lost['other_pairs']:.3f} by other pairs of the documents, {lost['not_compared']:.3f} gold pair not compared"
    )
    typer.echo("\n" + control_kind_table(metrics))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(metrics, indent=2, default=float) + "\n", encoding="utf8")
    if details:
        details.parent.mkdir(parents=True, exist_ok=True)
        with details.open("w", encoding="utf8") as f:
            for d in per_doc:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    typer.run(main)
