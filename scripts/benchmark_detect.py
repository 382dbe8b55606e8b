"""Documents per second of `inconsistency_detector` on news-length documents (CPU).

The corpus is real text from ../shared/data: every distinct source article of
the TRUE datasets (CNN/DailyMail and XSum news, 488 articles), topped up with
ConTRoL passages of at least 150 words to reach --n-docs. Prints one line
per setting (by default `single`, the embedded model alone in float32, the
default when the speed issue was opened, then the default) and the ratios
against the first, from the same run; `SETTINGS` lists the others.

    python scripts/benchmark_detect.py --n-docs 20 --settings single,both-orders,default,single
"""
import csv
import json
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, List

import typer

SECOND_FP32 = {"@misc": "spacy-inconsistency.NLIBackend.v1", "model": "mpnet-lora", "device": "cpu", "dtype": "float32"}
SETTINGS: Dict[str, Dict[str, Any]] = {
    # The default: the embedded model, its 8 highest pairs per document and the 4 most alike others
    # re-scored by mpnet-lora (dtype "auto": on CPUs with native bf16 the first model in bf16, the
    # second "mixed"; else both float32).
    "default": {},
    # The default until 2026-11-27 (night): no similar pairs, the first model's 8 highest only.
    "no-similar": {"rescore_similar_k": 0},
    # Opt-in: an eighth of a long document's pairs (up to 32) re-scored instead of its 8 highest.
    "share-eighth": {"rescore_top_share": 0.125},
    # The default until 2026-11-25: the second stage in float32, the first model on both orders of every pair.
    "before": {"model": {"dtype": "bfloat16"}, "rescorer": SECOND_FP32, "reverse_top_k": None,
               "rescore_reverse_top_k": None},
    # The default before the reverse budgets: both models read both orders of every pair they read.
    "both-orders": {"reverse_top_k": None, "rescore_reverse_top_k": None},
    # Only the first model's reverse budget (reverse_top_k); the second stage reads both orders.
    "first-budget": {"rescore_reverse_top_k": None},
    # The first model in one direction only (it ranks; the second stage reads both).
    "one-direction": {"first_stage_directions": 1},
    # The cascade in float32 (the default on CPUs without native bf16).
    "fp32": {"model": {"dtype": "float32"}},
    # The embedded model alone in float32 (the default until the cascade).
    "single": {"rescorer": None, "model": {"dtype": "float32"}},
    "previous": {
        "aggregation": "min", "threshold": 0.5, "rescorer": None, "model": {"dtype": "float32"},
        "candidates": {"@misc": "spacy-inconsistency.candidates.classic.v1", "window": 4, "max_all_pairs": 100},
    },
    # Cheaper forward passes (NLIBackend `dtype`; the rescorer follows an explicit one).
    "bf16": {"model": {"dtype": "bfloat16"}},
    "int8": {"model": {"dtype": "int8"}},
    # mpnet-lora on every pair.
    "mpnet": {"model": {"model": "mpnet-lora"}},
}

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def load_corpus(data_dir: Path, n_docs: int) -> List[str]:
    docs: List[str] = []
    seen = set()
    for name in ("frank", "summeval", "qags_xsum"):
        with (data_dir / "true" / f"{name}.csv").open(encoding="utf-8") as f:
            for row in csv.DictReader(f):
                text = row["grounding"]
                if text not in seen:
                    seen.add(text)
                    docs.append(text)
    with zipfile.ZipFile(data_dir / "nli" / "control.zip") as z:
        for member in ("control/val.jsonl", "control/train.jsonl"):
            for line in z.open(member):
                text = json.loads(line)["premise"]
                if len(text.split()) >= 150 and text not in seen:
                    seen.add(text)
                    docs.append(text)
    if len(docs) < n_docs:
        raise SystemExit(f"only {len(docs)} documents available, asked for {n_docs}")
    return docs[:n_docs]


def main(
    n_docs: int = typer.Option(1000, help="Number of documents."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
    batch_size: int = typer.Option(16, help="nlp.pipe batch size."),
    processes: str = typer.Option("1", help="Comma-separated n_process values to run."),
    settings: str = typer.Option("single,default", help=f"Comma-separated settings: {', '.join(SETTINGS)}."),
    output: Path = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    import spacy

    from spacy_inconsistency.pair_scoring import has_content, speaker_pairs

    texts = load_corpus(data_dir, n_docs)
    words = sum(len(t.split()) for t in texts)
    typer.echo(f"{len(texts)} documents, {words / len(texts):.0f} words on average", err=True)
    results = {"n_docs": len(texts), "mean_words": words / len(texts), "runs": []}
    for name in settings.split(","):
        nlp = spacy.blank("en")
        nlp.max_length = 10_000_000
        setting = dict(SETTINGS[name])
        model = {"device": "cpu", **setting.pop("model", {})}
        detector = nlp.add_pipe("inconsistency_detector", config={"model": model, **setting})
        for n_process in (int(p) for p in processes.split(",")):
            start = time.perf_counter()
            docs = list(nlp.pipe(texts, batch_size=batch_size, n_process=n_process))
            seconds = time.perf_counter() - start
            n_pairs = 0
            for doc in docs:
                units = [u for u in doc.spans["inconsistency_units"] if has_content(u)]
                n_pairs += len(speaker_pairs(units, detector.pairwise.unit_pairs(units), detector.cfg["speakers"]))
            flagged = sum(int(doc._.has_inconsistency) for doc in docs)
            scores = [doc._.inconsistency_score for doc in docs]
            flags = [bool(doc._.has_inconsistency) for doc in docs]
            run = {"doc_scores": scores, "doc_flags": flags, "setting": name, "n_process": n_process, "seconds": seconds, "docs_per_s": len(texts) / seconds,
                   "pairs": n_pairs, "pairs_per_doc": n_pairs / len(texts), "nli_calls_per_s": 2 * n_pairs / seconds,
                   "flagged": flagged}
            results["runs"].append(run)
            typer.echo(f"{name}, n_process={n_process}: {len(texts)} docs in {seconds:.1f} s = "
                       f"{run['docs_per_s']:.2f} docs/s, {run['nli_calls_per_s']:.0f} NLI pairs/s "
                       f"({n_pairs / len(texts):.0f} unit pairs a doc, {flagged} docs flagged)")
    if len(results["runs"]) > 1:
        base = results["runs"][0]
        for run in results["runs"][1:]:
            diff = max(abs(a - b) for a, b in zip(run["doc_scores"], base["doc_scores"]))
            same = sum(a == b for a, b in zip(run["doc_flags"], base["doc_flags"]))
            typer.echo(f"ratio {run['setting']}/n_process={run['n_process']} vs {base['setting']}/"
                       f"n_process={base['n_process']}: docs/s {run['docs_per_s'] / base['docs_per_s']:.2f}x, "
                       f"NLI pairs/s {run['nli_calls_per_s'] / base['nli_calls_per_s']:.2f}x; document scores "
                       f"differ by at most {diff:.3f}, same flag on {same} of {len(texts)}")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    typer.run(main)
