"""Copy the pattern and instruction tables of the partisan-inference paper into TSV files.

The seed text (`../shared/seeds/partisan-inference-bias.txt`) holds Tables 13-24
as tab-separated lines; this script copies them verbatim (only the bold markup
`<b>...</b>` of the instructions is removed, the `**valid**` asterisks stay) so
that `spacy_inconsistency/bias/data/` is a faithful, checkable transcription.
Corrections live apart, in `data/errata.json`.

    python scripts/bias/transcribe_tables.py --seed ../shared/seeds/partisan-inference-bias.txt \
        --output-dir spacy_inconsistency/bias/data
"""
import re
from pathlib import Path

import typer

TABLES = {
    13: "table13_en_formal_valid.tsv",
    14: "table14_de_formal_valid.tsv",
    15: "table15_en_formal_invalid.tsv",
    16: "table16_de_formal_invalid.tsv",
    17: "table17_en_material_valid.tsv",
    18: "table18_de_material_valid.tsv",
    19: "table19_en_material_invalid.tsv",
    20: "table20_de_material_invalid.tsv",
    21: "table21_en_material_instructions.tsv",
    22: "table22_de_material_instructions.tsv",
    23: "table23_en_formal_instructions.tsv",
    24: "table24_de_formal_instructions.tsv",
}


def extract_tables(lines):
    """Map table number -> (header, rows) for the tables in TABLES."""
    found = {}
    for i, line in enumerate(lines):
        match = re.match(r"^Table (\d+): ", line)
        if not match or int(match.group(1)) not in TABLES:
            continue
        # The table body is the block of tab-separated lines just above its caption.
        end = i
        while end > 0 and not lines[end - 1].strip():
            end -= 1
        start = end
        while start > 0 and "\t" in lines[start - 1]:
            start -= 1
        block = [re.sub(r"</?b>", "", l) for l in lines[start:end]]
        found[int(match.group(1))] = (block[0].split("\t"), [l.split("\t") for l in block[1:]])
    return found


def main(
    seed: Path = typer.Option(...),
    output_dir: Path = typer.Option(...),
) -> None:
    """Copy the pattern and instruction tables of the partisan-inference paper into TSV files."""
    lines = seed.read_text(encoding="utf-8").splitlines()
    tables = extract_tables(lines)
    missing = sorted(set(TABLES) - set(tables))
    if missing:
        raise SystemExit(f"tables not found in the seed: {missing}")
    output_dir.mkdir(parents=True, exist_ok=True)
    for number, (header, rows) in sorted(tables.items()):
        path = output_dir / TABLES[number]
        with path.open("w", encoding="utf-8") as f:
            f.write("\t".join(["Row"] + header) + "\n")
            for n, row in enumerate(rows, 1):
                if len(row) != len(header):
                    raise SystemExit(f"Table {number} row {n}: {len(row)} cells, expected {len(header)}")
                f.write("\t".join([str(n)] + row) + "\n")
        print(f"Table {number}: {len(rows)} rows -> {path}")


if __name__ == "__main__":
    typer.run(main)
