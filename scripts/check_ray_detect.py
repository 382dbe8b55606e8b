"""`detect --engine ray` against plain `detect` (nlp.pipe) on the same N documents: ids and findings.

The corpus: the distinct source articles of the TRUE CSVs in ../shared/data/true
(summeval, frank, qags_xsum), then their distinct summaries, until N records;
each JSONL record has an `id` (`doc-NNNNN`) and its `text`. Both runs are the
package's command line in child processes, with the same model and settings:

    python -m spacy_inconsistency detect corpus.jsonl -o local.jsonl ...
    python -m spacy_inconsistency detect corpus.jsonl --engine ray --output-dir ray/ --num-actors 2 ...

Then: every input id is in the Ray output exactly once and in input order,
and each record's findings (the two units' character offsets and texts) are
those of the plain run, scores within --tolerance. Exits 1 on any difference.

The NLI model is a tiny random BERT (tests/conftest.py's `build_tiny_nli`)
unless --model is given; with the embedded model 2,000 news-length documents
take hours on 2 CPU cores.

    python scripts/check_ray_detect.py --n-docs 2000 --num-actors 2
"""
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import typer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data"
SOURCES = ("summeval.csv", "frank.csv", "qags_xsum.csv")


def load_corpus(data_dir: Path, n_docs: int) -> List[str]:
    """Distinct source articles, then distinct summaries, of the TRUE CSVs."""
    articles: Dict[str, None] = {}
    summaries: Dict[str, None] = {}
    for name in SOURCES:
        with (data_dir / "true" / name).open(encoding="utf8") as f:
            for row in csv.DictReader(f):
                articles.setdefault(row["grounding"].strip(), None)
                summaries.setdefault(row["generated_text"].strip(), None)
    texts = [t for t in list(articles) + [s for s in summaries if s not in articles] if t]
    if len(texts) < n_docs:
        raise typer.BadParameter(f"only {len(texts)} distinct texts in {data_dir / 'true'}")
    return texts[:n_docs]


def _findings(record: dict) -> List[tuple]:
    return [
        (tuple((u["start_char"], u["end_char"], u["text"]) for u in f["units"]), f["score"])
        for f in record.get("inconsistencies", [])
    ]


def main(
    n_docs: int = typer.Option(2000, help="Documents."),
    num_actors: int = typer.Option(2, help="Ray actors."),
    model: Optional[str] = typer.Option(None, help="NLI model; default: a tiny random BERT built here."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
    work_dir: Optional[Path] = typer.Option(None, help="Folder for the corpus and outputs (default: a temporary one)."),
    tolerance: float = typer.Option(1e-5, help="Largest score difference accepted."),
    shard_size: int = typer.Option(250, help="Records per Ray output shard."),
) -> None:
    work = work_dir or Path(tempfile.mkdtemp(prefix="check-ray-detect-"))
    work.mkdir(parents=True, exist_ok=True)
    if model is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from conftest import build_tiny_nli

        model_dir = work / "tiny-nli"
        if not (model_dir / "config.json").exists():
            build_tiny_nli(model_dir, {0: "CONTRADICTION", 1: "Entailment", 2: "neutral"})
        model = str(model_dir)
    texts = load_corpus(data_dir, n_docs)
    corpus = work / "corpus.jsonl"
    ids = [f"doc-{i:05d}" for i in range(len(texts))]
    with corpus.open("w", encoding="utf8") as f:
        for i, text in zip(ids, texts):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    common = [sys.executable, "-m", "spacy_inconsistency", "detect", str(corpus), "--model", model,
              "--rescorer", "none", "--no-progress"]
    start = time.perf_counter()
    subprocess.run(common + ["-o", str(work / "local.jsonl")], check=True)
    local_s = time.perf_counter() - start
    ray_dir = work / "ray"
    start = time.perf_counter()
    subprocess.run(common + ["--engine", "ray", "--output-dir", str(ray_dir), "--num-actors", str(num_actors),
                             "--shard-size", str(shard_size)], check=True)
    ray_s = time.perf_counter() - start
    local = [json.loads(line) for line in (work / "local.jsonl").open(encoding="utf8")]
    remote = [json.loads(line) for p in sorted((ray_dir / "shards").glob("part-*.jsonl"))
              for line in p.open(encoding="utf8")]
    remote_ids = [r.get("id") for r in remote]
    problems = []
    if remote_ids != ids:
        missing, extra = set(ids) - set(remote_ids), len(remote_ids) - len(set(remote_ids))
        problems.append(f"ids differ: {len(remote_ids)} records out, {len(missing)} missing, {extra} repeated")
    if [r.get("id") for r in local] != ids:
        problems.append("the plain run's ids differ from the input's")
    n_findings = worst = 0.0
    for a, b in zip(local, remote):
        fa, fb = _findings(a), _findings(b)
        n_findings += len(fa)
        if [u for u, _ in fa] != [u for u, _ in fb]:
            problems.append(f"{a.get('id')}: findings differ")
            continue
        for (_, sa), (_, sb) in zip(fa, fb):
            worst = max(worst, abs(sa - sb))
    if worst > tolerance:
        problems.append(f"largest score difference {worst:.2e} > {tolerance}")
    errors = sum("error" in r for r in remote)
    typer.echo(json.dumps({
        "documents": len(ids), "ray_records": len(remote), "ids_exactly_once_in_order": remote_ids == ids,
        "findings": int(n_findings), "documents_with_findings": sum(bool(_findings(r)) for r in local),
        "error_records": errors, "largest_score_difference": worst, "plain_s": round(local_s, 1),
        "ray_s": round(ray_s, 1), "num_actors": num_actors, "model": model, "problems": problems[:10],
    }, indent=1))
    if problems:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
