#!/usr/bin/env python
"""An NLI model's probabilities on the pairs a pair-score fit reads, scored once and kept.

`fit_pair_scorer.py` scores ~100k (premise, hypothesis) pairs before it fits anything: minutes for
the embedded MiniLM, one and a half to two hours for the mpnet second stage on 2 CPU cores. With
the probabilities at hand the fit takes three minutes, so alignment features can be tried against
the second stage on a CPU. The pairs themselves are not stored: `fit_pair_scorer.py --list-pairs`
lists them again (deterministically, from the project's assets) and the stored SHA-256 of that
list says whether they are the same pairs in the same order.

    python scripts/nli/fit_pair_scorer.py --list-pairs training/fit-pairs.json --nli-dir assets/nli \\
        --suite tests/behaviour --true-dir ../shared/data/true
    python scripts/nli/fit_cache.py score --model MODEL --pairs training/fit-pairs.json \\
        --output training/fit_cache/NAME.npz        # resumes where it stopped
    python scripts/nli/fit_cache.py to-json --probs training/fit_cache/NAME.npz --pairs training/fit-pairs.json \\
        --output training/NAME-fitcache.json     # then fit_pair_scorer.py --cache training/NAME-fitcache.json
"""
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

import numpy
import typer

app = typer.Typer(add_completion=False, no_args_is_help=True)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_pairs(path: Path) -> Tuple[List[Tuple[str, str]], str]:
    """The listed pairs and the SHA-256 of their canonical JSON."""
    pairs = [tuple(p) for p in json.loads(path.read_text(encoding="utf8"))]
    digest = hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf8")).hexdigest()
    return pairs, digest


def _load(path: Path, digest: str, n: int, model: Optional[str] = None, dtype: Optional[str] = None) -> Tuple[numpy.ndarray, int]:
    if not path.exists():
        return numpy.zeros((n, 3), dtype=numpy.float32), 0
    stored = numpy.load(path)
    if str(stored["pairs_sha256"]) != digest or len(stored["probs"]) != n:
        raise typer.BadParameter(f"{path} holds the probabilities of other pairs (another --list-pairs list)")
    # The folder's name: `download` builds the second stage into a folder named by its adapters' hash.
    if model is not None and str(stored["model"]) != Path(model).name:
        raise typer.BadParameter(f"{path} holds the probabilities of {stored['model']}, not of {Path(model).name}")
    # One file holds one dtype's probabilities: a resumed run does not mix float32 rows with bf16 ones.
    # (Files written before the dtype was stored are float32: the only dtype then used.)
    stored_dtype = str(stored["dtype"]) if "dtype" in stored.files else "float32"
    if dtype is not None and stored_dtype != dtype:
        raise typer.BadParameter(f"{path} holds {stored_dtype} probabilities, not {dtype} ones")
    return stored["probs"].astype(numpy.float32), int(stored["done"])


def _save(path: Path, probs: numpy.ndarray, done: int, digest: str, model: str, dtype: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    numpy.savez_compressed(tmp, probs=probs, done=numpy.int64(done), pairs_sha256=numpy.str_(digest),
                           model=numpy.str_(Path(model).name), dtype=numpy.str_(dtype))
    tmp.replace(path)


@app.command()
def score(
    model: str = typer.Option(..., help="NLI model directory (as the detector loads it)."),
    pairs: Path = typer.Option(..., help="The JSON list of `fit_pair_scorer.py --list-pairs`."),
    output: Path = typer.Option(..., help="NPZ of P(entailment, neutral, contradiction), one row per listed pair."),
    chunk: int = typer.Option(2048, help="Pairs scored between two saves."),
    threads: int = typer.Option(2),
    dtype: str = typer.Option("float32", help="The backend's dtype ('float32': the probabilities to the last digit; "
                              "'bfloat16': twice as fast where the CPU has native bf16, mean |dp| ~0.0005 on the mpnet second stage)."),
) -> None:
    """Score the listed pairs, saving after every chunk; a second call goes on where the first stopped."""
    import torch

    from spacy_inconsistency.backends.nli import NLIBackend
    from spacy_inconsistency.pair_score import stack_probabilities

    torch.set_num_threads(threads)
    todo, digest = read_pairs(pairs)
    probs, done = _load(output, digest, len(todo), model, dtype)
    backend = NLIBackend(model, device="cpu", dtype=dtype)
    start = time.time()
    first = done
    while done < len(todo):
        part = todo[done : done + chunk]
        probs[done : done + len(part)] = stack_probabilities(backend.predict(part), len(part))
        done += len(part)
        _save(output, probs, done, digest, model, dtype)
        rate = (done - first) / (time.time() - start)
        log(f"{done}/{len(todo)} pairs, {rate:.1f}/s, {(len(todo) - done) / rate / 60:.0f} min left")
    log(f"{len(todo)} pairs -> {output}")


@app.command("to-json")
def to_json(
    probs: Path = typer.Option(..., help="The NPZ `score` wrote."),
    pairs: Path = typer.Option(..., help="The JSON list it was scored from (listed again here)."),
    output: Path = typer.Option(..., help="The cache `fit_pair_scorer.py --cache` reads."),
) -> None:
    """Write the NLI cache of `fit_pair_scorer.py` from the stored probabilities."""
    todo, digest = read_pairs(pairs)
    values, done = _load(probs, digest, len(todo))
    if done < len(todo):
        raise typer.BadParameter(f"{probs} has {done} of {len(todo)} pairs scored: run `score` again to finish")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps([[list(p), [float(x) for x in row]] for p, row in zip(todo, values)]), encoding="utf8")
    log(f"{len(todo)} pairs -> {output}")


if __name__ == "__main__":
    app()
