"""Time and peak memory of one long news-like document (CPU).

The document is real news from ../shared/data: the distinct source articles
of the TRUE datasets (CNN/DailyMail and XSum, 488 articles), joined with blank
lines and repeated until the document has --mb megabytes of text. Each
measurement runs in a fresh process, so its peak RSS (`ru_maxrss`) is its own:

- segment: `inconsistency_segmenter` alone on the tokenized Doc;
- detect: `spacy.blank("en")` + `inconsistency_detector` (the default
  pipeline) on the text, tokenization included, model loading not.

Prints one line per measurement (units, pairs scored, wall-clock and CPU
seconds, peak RSS); on a shared machine the CPU seconds are the steadier figure.

    python scripts/benchmark_long_document.py --mb 1.0
"""
import csv
import json
import multiprocessing
import resource
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import typer

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
MEASUREMENTS = ("segment", "detect")


def load_articles(data_dir: Path) -> List[str]:
    """The distinct source articles of the TRUE news datasets, in file order."""
    articles: List[str] = []
    seen = set()
    for name in ("frank", "summeval", "qags_xsum"):
        with (data_dir / "true" / f"{name}.csv").open(encoding="utf-8") as f:
            for row in csv.DictReader(f):
                text = row["grounding"].strip()
                if text and text not in seen:
                    seen.add(text)
                    articles.append(text)
    if not articles:
        raise SystemExit(f"no articles found under {data_dir / 'true'}")
    return articles


def build_document(articles: List[str], n_chars: int) -> str:
    """Articles joined with blank lines, looping over them, cut to `n_chars` at a paragraph break."""
    parts: List[str] = []
    size = 0
    i = 0
    while size < n_chars:
        article = articles[i % len(articles)]
        parts.append(article)
        size += len(article) + 2
        i += 1
    text = "\n\n".join(parts)
    cut = text.rfind("\n\n", 0, n_chars)
    return text[:cut] if cut > 0 else text[:n_chars]


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (ru_maxrss is KB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def cpu_seconds() -> float:
    """User plus system CPU time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(what: str, text: str, config: Dict[str, Any], profile: int) -> Dict[str, Any]:
    """Run one measurement in this process; returns the figures."""
    import spacy

    from spacy_inconsistency.extensions import UNITS_KEY
    from spacy_inconsistency.pair_scoring import has_content, speaker_pairs

    nlp = spacy.blank("en")
    nlp.max_length = max(nlp.max_length, len(text) + 1)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    result: Dict[str, Any] = {"measurement": what, "chars": len(text)}
    if what == "segment":
        segmenter = nlp.add_pipe("inconsistency_segmenter")
        doc = nlp.make_doc(text)
        start, cpu_start = time.perf_counter(), cpu_seconds()
        if profiler:
            profiler.enable()
        segmenter(doc)
    else:
        start = time.perf_counter()
        detector = nlp.add_pipe("inconsistency_detector", config=config)
        result["load_seconds"] = time.perf_counter() - start
        start, cpu_start = time.perf_counter(), cpu_seconds()
        if profiler:
            profiler.enable()
        doc = nlp(text)
    result["seconds"] = time.perf_counter() - start
    result["cpu_seconds"] = cpu_seconds() - cpu_start
    if profiler:
        profiler.disable()
    result["peak_rss_mb"] = peak_rss_mb()
    units = list(doc.spans[UNITS_KEY])
    result["units"] = len(units)
    if what == "detect":
        content = [u for u in units if has_content(u)]
        pairs = detector.pairwise.unit_pairs(content)
        result["pairs"] = len(speaker_pairs(content, pairs, detector.cfg["speakers"]))
        result["findings"] = len(doc._.inconsistencies)
        result["inconsistency_score"] = float(doc._.inconsistency_score)
    if profiler:
        import io
        import pstats

        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(profile)
        result["profile"] = out.getvalue()
    return result


def _child(what: str, text: str, config: Dict[str, Any], profile: int, queue: Any) -> None:
    try:
        queue.put(measure(what, text, config, profile))
    except BaseException as err:  # report, so that the parent does not wait forever
        queue.put({"measurement": what, "error": repr(err)})
        raise


def run_isolated(what: str, text: str, config: Dict[str, Any], profile: int) -> Dict[str, Any]:
    """`measure` in a fresh process, so that peak memory is this measurement's alone."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(what, text, config, profile, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main(
    mb: float = typer.Option(1.0, help="Document size in megabytes of text (10^6 characters)."),
    data_dir: Path = typer.Option(DEFAULT_DATA, help="The shared data folder."),
    measurements: str = typer.Option(",".join(MEASUREMENTS), help="Comma-separated: segment, detect."),
    device: str = typer.Option("cpu", help="Device of the NLI model."),
    profile: int = typer.Option(0, help="Print the N functions with the most cumulative time (0: off)."),
    output: Path = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    chosen = [m.strip() for m in measurements.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(MEASUREMENTS))
    if unknown:
        raise typer.BadParameter(f"unknown measurement(s) {unknown}; options: {list(MEASUREMENTS)}")
    articles = load_articles(data_dir)
    text = build_document(articles, int(mb * 1_000_000))
    typer.echo(
        f"document: {len(text):,} characters, {text.count(chr(10)):,} line breaks, "
        f"from {len(articles)} distinct articles", err=True,
    )
    config = {"model": {"device": device}}
    results = {"mb": mb, "chars": len(text), "runs": []}
    for what in chosen:
        result = run_isolated(what, text, config, profile)
        results["runs"].append(result)
        if "error" in result:
            typer.echo(f"{what}: failed: {result['error']}", err=True)
            continue
        pairs = f", {result['pairs']:,} pairs scored, {result['findings']} findings" if what == "detect" else ""
        load = f" (model load {result['load_seconds']:.1f} s not included)" if what == "detect" else ""
        typer.echo(
            f"{what}: {result['units']:,} units{pairs}, {result['seconds']:.1f} s "
            f"({result['cpu_seconds']:.1f} s CPU){load}, "
            f"peak RSS {result['peak_rss_mb']:,.0f} MB"
        )
        if result.get("profile"):
            typer.echo(result.pop("profile"))
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    typer.run(main)
