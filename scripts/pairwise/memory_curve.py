"""Peak memory of candidate generation as the corpus grows (1k, 5k, 20k statements).

Each size runs in a fresh process: read Qual-O-Mat comments of all parties
(sorted by election date), split them into sentences (>= 5 tokens, no
duplicates), keep the first N, make Docs, encode them with all-MiniLM-L6-v2
and build the candidate pairs of `embedding_neighbours` (k = 20; exact
block-wise search below 20,000 statements, faiss HNSW from there on) joined
with `lexical_overlap` (k = 10). Peak RSS (ru_maxrss) is read after each
stage. No NLI scoring of the candidates: it runs on fixed-size chunks of
pairs and adds a constant. With `--hub-probes P`, `contradiction_hubs` runs
too (the NLI model scores P probe pairs per statement, both directions).

    python scripts/pairwise/memory_curve.py --qualomat ../shared/data/qualomat \
        --sizes 1000 --sizes 5000 --sizes 20000 --output metrics/pairwise_memory.json

With `--vectors random` the encoder is skipped and the search stages run on
random unit vectors of the same shape (n x 384): a measurement of the
memory of docs, neighbour search and lexical overlap alone, for machines
where encoding 20,000 statements takes too long. It says nothing about
neighbour quality.
"""
import json
import os
import resource
import subprocess
import sys
import time
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one_size(root: str, size: int, k: int, vectors_from: str = "encoder", threads: int = 1, hub_probes: int = 0) -> dict:
    import numpy
    import spacy
    import torch

    torch.set_num_threads(threads)
    from spacy_inconsistency.backends.embeddings import SentenceEncoder
    from spacy_inconsistency.candidates import make_embedding_strategy, make_lexical_strategy, normalise_pairs
    from spacy_inconsistency.corpora.qualomat import iter_qualomat_comments

    out = {"size": size, "stages": {}}
    t = time.time()
    nlp = spacy.blank("de")
    nlp.add_pipe("sentencizer")
    texts, seen = [], set()
    for doc in nlp.pipe(r["text"] for r in iter_qualomat_comments(root)):
        for sent in doc.sents:
            text = sent.text.strip()
            if len(sent) >= 5 and text not in seen:
                seen.add(text)
                texts.append(text)
        if len(texts) >= size:
            break
    texts = texts[:size]
    out["n"] = len(texts)
    encoder = SentenceEncoder(batch_size=64)
    if vectors_from == "encoder":
        encoder.encode(["warm up"])
    out["stages"]["imports+encoder"] = {"peak_rss_mb": round(rss_mb(), 1), "s": round(time.time() - t, 1)}
    t = time.time()
    blank = spacy.blank("de")
    spans = [blank.make_doc(x)[:] for x in texts]
    out["stages"]["docs"] = {"peak_rss_mb": round(rss_mb(), 1), "s": round(time.time() - t, 1)}
    t = time.time()
    if vectors_from == "encoder":
        vectors = encoder.encode(texts)
    else:
        # Memory of the search stage only: random unit vectors of the encoder's
        # shape (n x 384). Not embeddings; no neighbour quality is claimed.
        rng = numpy.random.default_rng(0)
        vectors = rng.normal(size=(len(texts), 384)).astype(numpy.float32)
        vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    out["vectors"] = vectors_from
    out["stages"]["encode" if vectors_from == "encoder" else "random-vectors"] = {
        "peak_rss_mb": round(rss_mb(), 1), "s": round(time.time() - t, 1)}

    class Cached:
        # The strategy encodes again otherwise; the vectors are already here.
        def encode(self, _texts):
            return vectors

    t = time.time()
    neighbours = make_embedding_strategy(encoder=Cached(), k=k)(spans)
    out["stages"]["neighbours"] = {"peak_rss_mb": round(rss_mb(), 1), "s": round(time.time() - t, 1),
                                   "search": "faiss-hnsw" if len(texts) >= 20_000 else "exact-blocks"}
    t = time.time()
    lexical = make_lexical_strategy(k=10)(spans)
    out["stages"]["lexical"] = {"peak_rss_mb": round(rss_mb(), 1), "s": round(time.time() - t, 1)}
    parts = [neighbours, lexical]
    if hub_probes:
        # contradiction_hubs with the embedded NLI model scoring the probes
        # (hub_probes per statement, both directions; hub_share 0.01, at most 100 hubs).
        from spacy_inconsistency.backends.nli import NLIBackend
        from spacy_inconsistency.candidates import make_hub_strategy, run_strategy
        from spacy_inconsistency.components.pairwise import ProbeScores

        t = time.time()
        probed = ProbeScores(NLIBackend("default", device="cpu", max_batch_size=64), texts)
        hubs = run_strategy(make_hub_strategy(probes=hub_probes), spans, scorer=probed)
        parts.append(hubs)
        out["stages"]["hubs"] = {"peak_rss_mb": round(rss_mb(), 1), "s": round(time.time() - t, 1),
                                 "probe_pairs": len(probed), "pairs": int(len(hubs))}
    pairs = normalise_pairs(numpy.concatenate(parts), len(spans))
    n = len(texts)
    out["pairs"] = int(len(pairs))
    out["fraction_of_all_pairs"] = len(pairs) / (n * (n - 1) / 2)
    out["peak_rss_mb"] = round(rss_mb(), 1)
    return out


class Vectors(str, Enum):
    encoder = "encoder"
    random = "random"


def main(
    qualomat: str = typer.Option("../shared/data/qualomat"),
    sizes: List[int] = typer.Option([1000, 5000, 20000],
                                    help="corpus sizes (repeat the flag: --sizes 1000 --sizes 5000)"),
    k: int = typer.Option(20),
    vectors: Vectors = typer.Option(Vectors.encoder, help="'random': skip the encoder and measure the search stage on "
                                    "random unit vectors"),
    threads: int = typer.Option(1, help="torch threads (encoder and NLI model)"),
    hub_probes: int = typer.Option(0, help="also run contradiction_hubs with this many probes per statement "
                                   "(NLI model; 0: skip)"),
    one: Optional[int] = typer.Option(None, hidden=True),
    output: str = typer.Option("metrics/pairwise_memory.json"),
) -> None:
    """Peak memory of candidate generation as the corpus grows (1k, 5k, 20k statements)."""
    vectors = vectors.value
    if one is not None:
        print(json.dumps(one_size(qualomat, one, k, vectors, threads, hub_probes)))
        return
    results = []
    for size in sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--qualomat", qualomat, "--k", str(k), "--vectors", vectors,
             "--threads", str(threads), "--hub-probes", str(hub_probes), "--one", str(size)],
            check=True, capture_output=True, text=True,
        )
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append(result)
        print(json.dumps(result), flush=True)
        # Written after each size, so that a cut-short run keeps what it measured.
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
