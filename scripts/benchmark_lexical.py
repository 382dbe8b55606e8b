"""Seconds of the lexical-overlap search (`TermIndex.partners`) against a dense reference.

The corpus is `benchmark_ray_across.py`'s: distinct Qual-O-Mat sentences up to
their number, recombined sentence halves above it. Content words as
`lexical_overlap.v1` takes them (a blank German pipeline, no lemmas), the
defaults' max_df and min_shared, 10 partners. In the same process, per size:

- `TermIndex.partners`, which computes only the pairs that share a word;
- a dense reference: each block of rows against all units as a dense matrix,
  then the k best of each row (what `partners` did before it went sparse).

Both must select the same similarities (the pairs may differ only between
equally similar partners); the script stops if they do not.

    python scripts/benchmark_lexical.py --sizes 5000,20000,100000
"""
import time
from pathlib import Path
from typing import Tuple

import numpy
import typer

from benchmark_ray_across import DEFAULT_DATA, qualomat_sentences, synthetic


def dense_partners(index, k: int, min_shared: int) -> Tuple[numpy.ndarray, numpy.ndarray]:
    from spacy_inconsistency.backends.embeddings import block_rows

    n = index.n
    kk = min(k, n - 1)
    found, found_sims = [], []
    step = block_rows(n)
    for s in range(0, n, step):
        e = min(s + step, n)
        sims = (index.X[s:e] @ index.X.T).toarray()
        shared = (index.binary[s:e] @ index.binary.T).toarray()
        sims[numpy.arange(e - s), numpy.arange(s, e)] = 0.0
        sims[shared < min_shared] = 0.0
        part = numpy.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        vals = numpy.take_along_axis(sims, part, axis=1)
        r, c = numpy.nonzero(vals > 0)
        found.append(numpy.stack([r + s, part[r, c]], axis=1))
        found_sims.append(vals[r, c])
    return numpy.concatenate(found), numpy.concatenate(found_sims).astype(numpy.float32)


def main(
    sizes: str = typer.Option("5000,20000,100000", help="Comma-separated numbers of statements."),
    k: int = typer.Option(10, help="Partners per unit."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
) -> None:
    import spacy

    from spacy_inconsistency import defaults
    from spacy_inconsistency.candidates import TermIndex, _content_terms

    pool = qualomat_sentences(data_dir)
    nlp = spacy.blank("de")
    print("| statements | corpus | pairs sharing a word | partners found | sparse (s) | dense (s) | dense / sparse |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in sizes.split(",")):
        statements = pool[:n] if n <= len(pool) else synthetic(pool, n)
        terms = [_content_terms(doc[:], False) for doc in nlp.pipe(text for text, _ in statements)]
        index = TermIndex(terms, max_df=defaults.LEXICAL_MAX_DF)
        start = time.perf_counter()
        pairs, sims = index.partners(0, index.n, k=k, min_shared=defaults.LEXICAL_MIN_SHARED)
        sparse_s = time.perf_counter() - start
        start = time.perf_counter()
        _, ref_sims = dense_partners(index, k, defaults.LEXICAL_MIN_SHARED)
        dense_s = time.perf_counter() - start
        if not numpy.array_equal(numpy.sort(sims), numpy.sort(ref_sims)):
            raise SystemExit(f"{n}: the sparse search selected other similarities than the dense reference")
        sharing = sum((index.binary[s:s + 5000] @ index.binary.T).nnz for s in range(0, index.n, 5000))
        sharing = (sharing - int((index.binary.sum(axis=1) > 0).sum())) // 2  # less each unit with itself
        kind = "Qual-O-Mat" if n <= len(pool) else "synthetic"
        print(f"| {n:,} | {kind} | {sharing:,} | {len(pairs):,} | {sparse_s:.2f} | {dense_s:.2f} | "
              f"{dense_s / sparse_s:.1f}x |", flush=True)


if __name__ == "__main__":
    typer.run(main)
