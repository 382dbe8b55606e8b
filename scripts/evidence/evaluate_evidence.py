"""Every evidence strategy on ContraDoc / ContraDocPaired, in the layout of the paper's Tables 4-7.

Writes a JSON file (metrics per strategy, settings, timing, parse errors),
a Markdown table (rows: the paper's metrics; columns: strategies) and the
per-document predictions (JSONL). `--sample` evaluates a seeded, stratified
subsample (same fraction of positives and negatives) and says so in both
outputs; `--max-minutes` stops before a strategy that would start after the
budget and records which strategies were skipped.
"""
import json
import math
import random
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

STRATEGY_ORDER = ["direct", "self_consistency", "self_criticism", "rnr", "rnr_uf", "rnr_cf"]
ROWS = [
    ("accuracy", "accuracy"), ("precision", "precision"), ("F1 score", "f1"), ("TPR/recall", "recall"),
    ("FPR", "FPR"), ("TNR", "TNR"), ("FNR", "FNR"), ("EHR", "EHR"), ("EHRC", "EHRC"), ("EPR", "EPR"),
    ("EPRC", "EPRC"), ("ERR", "ERR"), ("ERRC", "ERRC"),
    ("avg#sen, pos", "avg_sentences_pos"), ("avg#sen, neg", "avg_sentences_neg"), ("avg#sen, all", "avg_sentences_all"),
    ("avg#retries, pos", "avg_retries_pos"), ("avg#retries, neg", "avg_retries_neg"), ("avg#retries, all", "avg_retries_all"),
]
RNR = ("rnr", "rnr_uf", "rnr_cf")


def _fmt(value: Optional[float]) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NA"
    return f"{value:.3g}"


def make_client(judge: str, *, model: str, base_url: str, cache_dir: Optional[str], max_concurrency: int,
                dtype: str = "auto") -> Any:
    from spacy_inconsistency.backends.llm import LocalHFChatClient, OpenAIChatClient
    from spacy_inconsistency.nli_judge import NLIJudgeClient

    if judge == "nli":
        return NLIJudgeClient(model or "default", device="cpu", dtype=dtype)
    if judge == "smollm2":
        return LocalHFChatClient(model or "smollm2", device="cpu")
    if judge == "openai":
        return OpenAIChatClient(model, base_url=base_url, cache_dir=cache_dir, max_concurrency=max_concurrency)
    raise typer.BadParameter(f"unknown judge {judge!r}")


def stratified_sample(records: List[Dict[str, Any]], n: int, seed: int) -> List[Dict[str, Any]]:
    """A seeded subsample of `n` records with the positive share of the full set."""
    if n <= 0 or n >= len(records):
        return records
    rng = random.Random(seed)
    pos = [r for r in records if r["label"]]
    neg = [r for r in records if not r["label"]]
    n_pos = max(1, round(n * len(pos) / len(records))) if pos else 0
    chosen = set(id(r) for r in rng.sample(pos, min(n_pos, len(pos))) + rng.sample(neg, min(n - n_pos, len(neg))))
    return [r for r in records if id(r) in chosen]


def main(
    data: Optional[List[Path]] = typer.Option(None, help="ContraDoc-format JSON (contradoc_50.json or the ContraDocPaired file); repeat for several, all judged by one client (its caches are shared)"),
    judge: str = typer.Option("nli", help="nli (offline NLI judge), smollm2 (local HF), openai (HTTP endpoint)"),
    model: str = typer.Option("", help="Model for the judge (default: embedded NLI model / SmolLM2)"),
    base_url: str = typer.Option("http://localhost:8000/v1", help="For --judge openai"),
    cache_dir: Optional[str] = typer.Option(None, help="Disk cache of the HTTP client"),
    strategies: str = typer.Option(",".join(STRATEGY_ORDER), help="Comma-separated strategies"),
    n_samples: int = typer.Option(5, help="Self-consistency samples"),
    temperature: float = typer.Option(0.5, help="Self-consistency temperature"),
    max_tokens: int = typer.Option(512, help="Most tokens per answer"),
    max_retries: int = typer.Option(10, help="Bound of the redact-and-retry loop"),
    sample: int = typer.Option(0, help="Evaluate a stratified subsample of this many documents (0: all)"),
    seed: int = typer.Option(0),
    max_minutes: float = typer.Option(0.0, help="Skip strategies that would start after this many minutes (0: no limit)"),
    max_concurrency: int = typer.Option(4),
    threads: int = typer.Option(1),
    dtype: str = typer.Option("auto", help="--judge nli: number format of the NLI model's forward passes (auto, float32, bfloat16, ...)"),
    output: List[Path] = typer.Option(..., help="JSON output, one per --data; .md and .predictions.jsonl are written beside it"),
    rescore_only: bool = typer.Option(False, "--rescore", help="Only recompute metrics and tables from the predictions of an earlier run"),
) -> None:
    import torch

    if rescore_only:
        for output_path in output:
            rescore(output_path)
        return
    data = data or []
    if len(data) != len(output):
        raise typer.BadParameter("give one --output per --data")
    torch.set_num_threads(threads)
    wanted = [s.strip() for s in strategies.split(",") if s.strip()]
    client = make_client(judge, model=model, base_url=base_url, cache_dir=cache_dir, max_concurrency=max_concurrency,
                         dtype=dtype)
    started = time.time()
    for data_path, output_path in zip(data, output):
        evaluate(
            data_path, output_path, client=client, judge=judge, strategies=wanted, n_samples=n_samples,
            temperature=temperature, max_tokens=max_tokens, max_retries=max_retries, sample=sample, seed=seed,
            deadline=started + max_minutes * 60 if max_minutes else None,
        )


def evaluate(
    data: Path, output: Path, *, client: Any, judge: str, strategies: List[str], n_samples: int,
    temperature: float, max_tokens: int, max_retries: int, sample: int, seed: int, deadline: Optional[float],
) -> None:
    """Run the strategies on one data file and write the three outputs."""
    import spacy

    from spacy_inconsistency.components.evidence import SHORTHANDS, EvidenceExtractor
    from spacy_inconsistency.corpora.contradoc import read_contradoc

    all_records = read_contradoc(data)
    records = stratified_sample(all_records, sample, seed)
    wanted = strategies
    nlp = spacy.blank("en")
    nlp.max_length = 10_000_000
    started = time.time()
    results: Dict[str, Any] = {}
    skipped: List[str] = []
    predictions = []
    for strategy in wanted:
        if deadline is not None and time.time() > deadline:
            skipped.append(strategy)
            continue
        extractor = EvidenceExtractor(
            nlp, f"evidence_{strategy}", client=client, strategy=strategy, n_samples=n_samples,
            temperature=temperature, max_retries=max_retries, max_tokens=max_tokens, seed=seed,
        )
        t0 = time.time()
        with typer.progressbar(records, label=f"{SHORTHANDS[strategy]:7s}") as bar:
            for record in bar:
                doc = extractor(nlp.make_doc(record["text"]))
                trace = doc.user_data["inconsistency_evidence_trace"]
                predictions.append({
                    "strategy": strategy, "id": record["id"], "label": record["label"],
                    "gold_evidence": record["evidence"], "judgement": trace["judgement"],
                    "evidence": trace["evidence"], "n_calls": trace["n_calls"],
                    "n_parse_errors": trace["n_parse_errors"], "stop_reason": trace["stop_reason"],
                    "answers": [a for c in trace["calls"] for a in c["answers"]],
                })
        metrics = score_predictions([p for p in predictions if p["strategy"] == strategy])
        metrics["seconds"] = round(time.time() - t0, 1)
        results[strategy] = metrics
        typer.echo(f"{SHORTHANDS[strategy]:7s} acc {_fmt(metrics['accuracy'])} EHRC {_fmt(metrics['EHRC'])} "
                   f"EPRC {_fmt(metrics['EPRC'])} unreadable answers {metrics['n_parse_errors']}/{metrics['n_answers']} "
                   f"({metrics['n_calls']} calls), {metrics['seconds']}s")
    settings = {
        "data": str(data), "judge": judge, "client": client.name, "data_name": data.name, "n_docs": len(records),
        "n_docs_file": len(all_records), "n_pos": sum(r["label"] for r in records),
        "subsample": bool(sample and sample < len(all_records)), "seed": seed, "n_samples": n_samples,
        "temperature": temperature, "max_tokens": max_tokens, "max_retries": max_retries,
        "skipped_for_time": skipped, "minutes": round((time.time() - started) / 60, 2),
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.with_suffix(".predictions.jsonl").open("w", encoding="utf-8") as f:
        for p in predictions:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    write_results(output, settings, results)


def score_predictions(predictions: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The metrics of one strategy from its per-document predictions (as written to the JSONL)."""
    from spacy_inconsistency.metrics.evidence import evidence_metrics

    strategy = predictions[0]["strategy"] if predictions else ""
    metrics = evidence_metrics(
        [p["label"] for p in predictions], [p["gold_evidence"] for p in predictions],
        [p["judgement"] for p in predictions], [p["evidence"] for p in predictions],
        retries=[p["n_calls"] for p in predictions] if strategy in RNR else None,
    )
    metrics.update({
        "n_calls": sum(p["n_calls"] for p in predictions),
        "n_answers": sum(len(p["answers"]) for p in predictions),
        "n_parse_errors": sum(p["n_parse_errors"] for p in predictions),
    })
    return metrics


def rescore(output: Path) -> None:
    """Recompute the metrics and tables of an earlier run from its predictions (no model calls)."""
    old = json.loads(output.read_text(encoding="utf-8"))
    predictions = [json.loads(line) for line in output.with_suffix(".predictions.jsonl").open(encoding="utf-8")]
    results = {}
    for strategy in STRATEGY_ORDER:
        mine = [p for p in predictions if p["strategy"] == strategy]
        if mine:
            results[strategy] = score_predictions(mine)
            results[strategy]["seconds"] = old["results"].get(strategy, {}).get("seconds")
    settings = dict(old["settings"], rescored=True)
    write_results(output, settings, results)


def write_results(output: Path, settings: Dict[str, Any], results: Dict[str, Any]) -> None:
    """Write the JSON and the Markdown table (the paper's Table 4/5 layout)."""
    from spacy_inconsistency.components.evidence import SHORTHANDS

    output.write_text(json.dumps({"settings": settings, "results": results}, indent=2, default=str), encoding="utf-8")
    skipped = settings.get("skipped_for_time") or []
    done = [s for s in STRATEGY_ORDER if s in results]
    data_name = settings.get("data_name") or Path(settings["data"]).name
    lines = [
        f"Judge: {settings['client']}; data: {data_name}, {settings['n_docs']} documents ({settings['n_pos']} positive)"
        + (f", stratified subsample of {settings['n_docs_file']} (seed {settings['seed']})" if settings["subsample"] else "")
        + (f"; skipped for time: {', '.join(skipped)}" if skipped else ""),
        "",
        "| | " + " | ".join(SHORTHANDS[s] for s in done) + " |",
        "|---|" + "---|" * len(done),
    ]
    for label, key in ROWS:
        lines.append(f"| {label} | " + " | ".join(_fmt(results[s].get(key)) for s in done) + " |")
    lines.append("| unreadable answers / answers | " + " | ".join(
        f"{results[s]['n_parse_errors']}/{results[s]['n_answers']}" for s in done) + " |")
    lines.append("| LLM calls | " + " | ".join(str(results[s]["n_calls"]) for s in done) + " |")
    output.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    typer.echo("\n".join(lines))


if __name__ == "__main__":
    typer.run(main)
