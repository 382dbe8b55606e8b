"""Build ContraDocPaired (redact-and-retry paper, Appendix D) from a ContraDoc file.

Positives whose evidence was cut out of the text are left out first (see
`read_contradoc`); the rest are paired longest-with-shortest. The output is
in ContraDoc's own format (evidence as a list), so `read_contradoc` reads it.
"""
import json
from pathlib import Path

import typer

from spacy_inconsistency.corpora.contradoc import NEGATIVE, POSITIVE, build_contradoc_paired, read_contradoc


def main(
    input_path: Path = typer.Option(..., "--input", help="ContraDoc JSON (e.g. contradiction/contradoc_50.json)"),
    output: Path = typer.Option(..., "--output", help="ContraDocPaired JSON to write"),
) -> None:
    records = read_contradoc(input_path)
    paired = build_contradoc_paired(records)
    out = [
        {"id": r["id"], "text": r["text"], "label": POSITIVE if r["label"] else NEGATIVE,
         "evidence": r["evidence"], "scope": r["scope"], "doc_type": r["doc_type"],
         **({"source_ids": r["source_ids"]} if "source_ids" in r else {})}
        for r in paired
    ]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(out, indent=1, ensure_ascii=False), encoding="utf-8")
    n_pos = sum(r["label"] for r in paired)
    longest = max((len(r["text"]) for r in paired if r["label"]), default=0)
    typer.echo(f"{len(records)} usable ContraDoc records ({sum(r['label'] for r in records)} positive) -> "
               f"{n_pos} paired positives (longest {longest} chars) + {len(paired) - n_pos} negatives: {output}")


if __name__ == "__main__":
    typer.run(main)
