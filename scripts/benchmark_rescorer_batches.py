"""Seconds of each stage's model on the calls the default detector makes, per batch size.

Runs the default detector over the first --n-docs documents of the benchmark
corpus (`benchmark_detect.load_corpus`) with `nlp.pipe(batch_size=16)`, keeps
the texts of every call to each stage's model, then times those same calls
again with each `max_batch_size` (and the padded share of the tokens, which
`plan_batches` makes from the calls' lengths), --repeats times.

    python scripts/benchmark_rescorer_batches.py --n-docs 20 --sizes 64,32,16,8
"""
import time
from pathlib import Path

import typer

from benchmark_detect import DEFAULT_DATA, load_corpus


def main(
    n_docs: int = typer.Option(20, help="Number of documents."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
    sizes: str = typer.Option("64,32,16,8", help="Comma-separated max_batch_size values."),
    repeats: int = typer.Option(2, help="Timings per stage and size."),
) -> None:
    import spacy

    from spacy_inconsistency.backends.batching import plan_batches

    nlp = spacy.blank("en")
    detector = nlp.add_pipe("inconsistency_detector")
    stages = {"first": detector.pairwise.model, "second": detector.pairwise.rescorer}
    calls = {name: [] for name in stages}
    for name, backend in stages.items():
        real = backend.predict
        backend.predict = lambda texts, real=real, name=name: calls[name].append(list(texts)) or real(texts)
    list(nlp.pipe(load_corpus(data_dir, n_docs), batch_size=16))
    for name, backend in stages.items():
        del backend.predict  # the class's method again
        lengths = [[len(f["input_ids"]) for f in backend._encode(c)] for c in calls[name]]
        real_tokens = sum(map(sum, lengths))
        typer.echo(f"{name} stage ({backend.name}, {backend.dtype_name}): calls of {[len(c) for c in calls[name]]} "
                   f"inputs, {real_tokens} tokens; max_batch_size in use {backend.max_batch_size}")
        for size in (int(s) for s in sizes.split(",")):
            padded = sum(len(batch) * max(ls[i] for i in batch) for ls in lengths
                         for batch in plan_batches(ls, max_batch_size=size, max_batch_tokens=backend.max_batch_tokens))
            backend.max_batch_size = size
            seconds = []
            for _ in range(repeats):
                start = time.perf_counter()
                for call in calls[name]:
                    backend.predict(call)
                seconds.append(time.perf_counter() - start)
            typer.echo(f"  max_batch_size {size}: {', '.join(f'{s:.2f}' for s in seconds)} s; "
                       f"padded tokens {padded / real_tokens:.2f}x the real ones")


if __name__ == "__main__":
    typer.run(main)
