"""How often the English check (W144, `backends.loading.english_share`) fires on real text.

Reads the distinct texts of `../shared/data` (English: TRUE, ContraDoc, ProSeCCo, ClaimDiff, the
political benchmark; German: Qual-O-Mat's party comments) and the behaviour suite, and prints, per
language, how many texts have enough words to be judged and how many of those would warn.

    python scripts/language_check_rates.py [--data-dir ../shared/data]
"""
import csv
import json
from pathlib import Path
from typing import Iterable, Set

import typer

ROOT = Path(__file__).resolve().parent.parent


def english_texts(data: Path) -> Set[str]:
    texts: Set[str] = set()
    for path in ROOT.joinpath("tests", "behaviour").glob("*.jsonl"):
        for line in path.open(encoding="utf8"):
            record = json.loads(line)
            texts |= {record["contradiction"]["text"], record["control"]["text"]}
    for path in (data / "true").glob("*.csv"):
        for row in csv.DictReader(path.open(encoding="utf8")):
            texts |= {row["grounding"], row["generated_text"]}
    texts |= {d["text"] for d in json.loads((data / "contradiction" / "contradoc_50.json").read_text(encoding="utf8"))}
    texts |= {row["Input"] for row in csv.DictReader((data / "political" / "df_gold.csv").open(encoding="utf8"))}
    for row in csv.DictReader((data / "contradiction" / "ProSeCCo_final.csv").open(encoding="utf8")):
        texts |= {row["locution_1"], row["locution_2"]}
    for path in (data / "claimdiff").glob("*.json"):
        for pair in json.loads(path.read_text(encoding="utf8"))["data"]:
            texts |= {pair["article_a"], pair["article_b"], pair["claim_a"], pair["claim_b"]}
    return texts


def german_texts(data: Path) -> Set[str]:
    texts: Set[str] = set()
    for path in data.joinpath("qualomat").glob("*/*/comment.json"):
        texts |= {c["text"] for c in json.loads(path.read_text(encoding="utf8")) if c.get("text")}
    return texts


def rates(name: str, texts: Iterable[str]) -> None:
    import spacy

    from spacy_inconsistency.backends.loading import MIN_ENGLISH_SHARE, english_share

    nlp = spacy.blank("en")
    shares = [english_share(doc) for doc in nlp.pipe(sorted(texts))]
    judged = [s for s in shares if s is not None]
    warned = sum(s < MIN_ENGLISH_SHARE for s in judged)
    typer.echo(f"{name}: {len(shares):,} texts, {len(judged):,} with enough words, {warned:,} would warn")


def main(data_dir: Path = typer.Option(ROOT.parent / "shared" / "data", help="The shared data folder.")) -> None:
    rates("English", english_texts(data_dir))
    rates("German (Qual-O-Mat comments)", german_texts(data_dir))


if __name__ == "__main__":
    typer.run(main)
