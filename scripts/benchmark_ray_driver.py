"""Peak RSS of the driver of `detect_files` (detect --engine ray) as the corpus grows.

The corpus: N JSONL records, each a distinct text of about --chars characters
(sentences recombined from a fixed pool, so no two records are equal). The
pipeline in the actors is the segmenter alone (`spacy.blank("en")` +
`inconsistency_segmenter`): the driver's memory does not depend on the model,
and the NLI model would make 100k documents take hours on 2 cores. Peak RSS
of the driver process is sampled every 0.1 s from before the input is read
until the manifest is written, and its peak anonymous RSS (`RssAnon` in
/proc/PID/status: its own heap, without the pages of Ray's shared-memory
object store that it maps when it puts objects there); each size runs in a
fresh process.

    python scripts/benchmark_ray_driver.py --sizes 20000,100000
"""
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark_ray_across import PeakRSS  # noqa: E402

WORDS = ("council budget bridge river school vote mayor plan road tax park station hospital harbour "
         "market library museum report project week month year north south city board").split()


def segmenter_only(lang: str = "en"):
    import spacy

    from spacy_inconsistency.extensions import install_extensions

    install_extensions()  # the Doc attributes the result rows read, left at their defaults
    nlp = spacy.blank(lang)
    nlp.add_pipe("inconsistency_segmenter")
    return nlp


def write_corpus(path: Path, n: int, chars: int) -> int:
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            sentences = []
            while sum(len(s) + 1 for s in sentences) < chars:
                words = rng.sample(WORDS, 8)
                sentences.append(f"The {' '.join(words)} {i}.".capitalize())
            f.write(json.dumps({"id": f"d{i}", "text": " ".join(sentences)}) + "\n")
    return path.stat().st_size


class PeakAnon(PeakRSS):
    def _run(self) -> None:
        status = Path(f"/proc/{self.process.pid}/status")
        while not self._stop.is_set():
            for line in status.read_text().splitlines():
                if line.startswith("RssAnon:"):
                    self.peak = max(self.peak, int(line.split()[1]) * 1024)
            time.sleep(self.interval)


def one(corpus: Path, out: Path, num_actors: int, shard_size: int) -> None:
    """Runs in a child process: the job, with the driver's peak RSS and RssAnon."""
    from spacy_inconsistency.ray_engine import detect_files

    with PeakRSS() as peak, PeakAnon() as peak_anon:
        started = time.perf_counter()
        manifest = detect_files([corpus], out, make_pipeline=segmenter_only, pipeline_settings={},
                                shard_size=shard_size, num_actors=num_actors, batch_size=64, num_cpus=2)
        seconds = time.perf_counter() - started
    print(json.dumps({"records_out": manifest["records_out"], "errors": manifest["errors"],
                      "seconds": round(seconds, 1), "peak_rss_mb": round(peak.peak / 2**20, 1),
                      "peak_anon_mb": round(peak_anon.peak / 2**20, 1)}))


def main(
    sizes: str = typer.Option("20000,100000", help="Comma-separated numbers of documents."),
    chars: int = typer.Option(2000, help="Characters per document (about)."),
    num_actors: int = typer.Option(2, help="Actors."),
    shard_size: int = typer.Option(1000, help="Records per shard."),
    child: str = typer.Option("", hidden=True),
) -> None:
    if child:
        corpus, out = child.split("::")
        one(Path(corpus), Path(out), num_actors, shard_size)
        return
    print("| documents | input (MB) | records out | errors | wall (s) | peak driver RSS (MB) | peak driver RssAnon (MB) |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus.jsonl"
            size = write_corpus(corpus, n, chars)
            proc = subprocess.run([sys.executable, __file__, "--child", f"{corpus}::{Path(tmp) / 'out'}",
                                   "--num-actors", str(num_actors), "--shard-size", str(shard_size)],
                                  capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(proc.stderr[-3000:])
            # Ray's own warnings also go to stdout.
            got = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith('{"records_out"')))
            print(f"| {n:,} | {size / 2**20:.0f} | {got['records_out']:,} | {got['errors']} | {got['seconds']} | "
                  f"{got['peak_rss_mb']} | {got['peak_anon_mb']} |", flush=True)


if __name__ == "__main__":
    typer.run(main)
