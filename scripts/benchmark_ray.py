"""Documents per second of the Ray engine with 1 and 2 actors against plain `nlp.pipe`.

The same N news articles (distinct `grounding` texts of QAGS-XSum in
../shared/data/true/qags_xsum.csv) go through, in one run:

- plain `nlp.pipe` in this process (model loading timed apart);
- `ray_engine.detect_dataset` with 1 and with 2 actors on a local Ray.

Per actor count, a start-up probe first runs one short document per actor:
its wall time is what a pool costs before the first document (worker
processes, imports, loading the model; the actors start at the same time).
The main run's docs/s is reported with and without that start-up. Ray gives
each actor `--cpus-per-actor` CPUs, and sets its worker's thread count to
match (OMP_NUM_THREADS), while plain `nlp.pipe` uses torch's default thread
count, printed beside it. Findings of every Ray run are checked against the
plain run's.

    python scripts/benchmark_ray.py --n-docs 60 --actors 1,2
"""
import csv
import json
import time
from pathlib import Path
from typing import Any, Dict, List

import typer

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def load_docs(data_dir: Path, n_docs: int) -> List[str]:
    docs: List[str] = []
    seen = set()
    with (data_dir / "true" / "qags_xsum.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            text = row["grounding"]
            if text not in seen:
                seen.add(text)
                docs.append(text)
    if len(docs) < n_docs:
        raise SystemExit(f"only {len(docs)} documents available, asked for {n_docs}")
    return docs[:n_docs]


def _findings(doc: Any) -> List[Any]:
    return [[(u["start_char"], u["end_char"]) for u in f["units"]] for f in doc._.inconsistencies]


def main(
    n_docs: int = typer.Option(60, help="Number of documents."),
    actors: str = typer.Option("1,2", help="Comma-separated actor counts."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
    model: str = typer.Option("default", help="NLI model."),
    batch_size: int = typer.Option(8, help="Documents per batch (nlp.pipe and map_batches)."),
    cpus_per_actor: float = typer.Option(1.0, help="CPUs per actor."),
    num_cpus: int = typer.Option(2, help="CPUs of the local Ray."),
    output: Path = typer.Option(None, help="Also write the figures as JSON here."),
) -> None:
    import ray
    import ray.data
    import torch

    from spacy_inconsistency.cli import build_pipeline
    from spacy_inconsistency.ray_engine import detect_dataset

    settings: Dict[str, Any] = {"model": model, "device": "cpu"}
    docs = load_docs(data_dir, n_docs)
    n_chars = sum(len(d) for d in docs)
    print(f"{n_docs} documents, {n_chars / n_docs:.0f} characters on average, batch size {batch_size}")

    started = time.perf_counter()
    nlp = build_pipeline(**settings)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    plain_docs = list(nlp.pipe(docs, batch_size=batch_size))
    plain_s = time.perf_counter() - started
    plain = {"threads": torch.get_num_threads(), "load_s": load_s, "seconds": plain_s, "docs_per_s": n_docs / plain_s}
    expected = [_findings(d) for d in plain_docs]
    print(f"plain nlp.pipe ({plain['threads']} torch threads): load {load_s:.1f}s, "
          f"{plain_s:.1f}s, {plain['docs_per_s']:.2f} docs/s")

    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    results: Dict[str, Any] = {"n_docs": n_docs, "batch_size": batch_size, "model": model,
                               "cpus_per_actor": cpus_per_actor, "plain": plain, "ray": {}}
    for n_actors in [int(a) for a in actors.split(",")]:
        common = dict(make_pipeline=build_pipeline, pipeline_settings=settings, num_actors=n_actors,
                      batch_size=batch_size, num_cpus_per_actor=cpus_per_actor)
        probe = [{"id": f"probe-{i}", "text": "It rains. It does not rain."} for i in range(n_actors)]
        started = time.perf_counter()
        detect_dataset(ray.data.from_items(probe, override_num_blocks=n_actors), **{**common, "batch_size": 1}).take_all()
        startup_s = time.perf_counter() - started
        items = [{"id": str(i), "text": text} for i, text in enumerate(docs)]
        blocks = max(1, -(-n_docs // batch_size))
        started = time.perf_counter()
        rows = detect_dataset(ray.data.from_items(items, override_num_blocks=blocks), **common).take_all()
        wall_s = time.perf_counter() - started
        rows.sort(key=lambda r: int(r["id"]))
        got = [[[(u["start_char"], u["end_char"]) for u in f["units"]] for f in json.loads(r["inconsistencies"])]
               for r in rows]
        same = len(rows) == n_docs and got == expected
        entry = {
            "startup_s": startup_s,
            "wall_s": wall_s,
            "docs_per_s": n_docs / wall_s,
            "docs_per_s_after_startup": n_docs / max(wall_s - startup_s, 1e-9),
            "findings_as_plain": same,
        }
        results["ray"][n_actors] = entry
        print(f"ray, {n_actors} actor(s): start-up {startup_s:.1f}s; {wall_s:.1f}s for {n_docs} docs = "
              f"{entry['docs_per_s']:.2f} docs/s ({entry['docs_per_s_after_startup']:.2f} docs/s after start-up, "
              f"{entry['docs_per_s_after_startup'] / plain['docs_per_s']:.2f}x plain); "
              f"findings as plain: {same}")
    ray.shutdown()
    if output is not None:
        output.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
