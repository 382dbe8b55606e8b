"""Command-line interface: `python -m spacy_inconsistency detect ...`."""
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, TextIO, Tuple

import typer

from .backends.loading import DEFAULT_MODEL
from .io import InputRecord, read_inputs

app = typer.Typer(
    name="spacy-inconsistency",
    help="Find where texts disagree (spaCy components).",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Find where texts disagree (spaCy components)."""


def build_pipeline(
    *,
    lang: str = "en",
    model: str = DEFAULT_MODEL,
    device: str = "auto",
    threshold: float = 0.5,
    window: int = 4,
    max_all_pairs: int = 100,
    max_chars: int = 10_000_000,
) -> Any:
    """A blank pipeline with `inconsistency_detector`.

    lang (str): spaCy language code for tokenization ("xx" for any).
    model (str): NLI model: "default", a local path or a hub id.
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    threshold (float): Lowest contradiction score reported.
    window (int): Units compared with each unit when not all pairs are.
    max_all_pairs (int): Up to this many pairs, all pairs are compared.
    max_chars (int): Longest text accepted (spaCy's `nlp.max_length`).
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
            "model": {"model": model, "device": device},
            "threshold": threshold,
            "window": window,
            "max_all_pairs": max_all_pairs,
        },
    )
    return nlp


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
    **pipeline_settings: Any,
) -> Dict[str, int]:
    """Run the detector over text/JSONL files and write one JSON line per document.

    Lines that cannot be read are written as records with an `error` field
    (and reported on stderr) in their place in the input order.

    inputs (List[Path]): Text files (one document each) or JSONL files.
    output (Optional[Path]): JSONL output file; None writes to stdout.
    text_field (str): The JSONL field holding the text.
    batch_size (int): Documents per `nlp.pipe` batch.
    n_process (int): Worker processes for `nlp.pipe`.
    progress (bool): Show a progress bar on stderr.
    html (Optional[Path]): Also write an HTML page of the documents with
        findings (see `spacy_inconsistency.render`); only those documents
        are kept in memory for it.
    **pipeline_settings: Passed to `build_pipeline`.
    RETURNS (Dict[str, int]): Counts of documents, errors and flagged documents.
    """
    from tqdm import tqdm

    for path in inputs:
        if not path.is_file():
            raise typer.BadParameter(f"not a file: {path}")
    nlp = build_pipeline(**pipeline_settings)
    counts = {"documents": 0, "errors": 0, "inconsistent": 0}

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


@app.command("detect")
def detect_cli(
    inputs: List[Path] = typer.Argument(..., help="Text files (one document each) or .jsonl files ({\"text\": ...} per line)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="JSONL output; stdout if not given."),
    model: str = typer.Option(DEFAULT_MODEL, help="NLI model: 'default' (embedded), a local directory or a hub id."),
    lang: str = typer.Option("en", help="spaCy language code for tokenization ('xx' for any language)."),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N."),
    threshold: float = typer.Option(0.5, help="Lowest contradiction score reported."),
    window: int = typer.Option(4, help="Following units compared with each unit (when not all pairs are)."),
    max_all_pairs: int = typer.Option(100, help="Compare all unit pairs when a document has at most this many."),
    text_field: str = typer.Option("text", help="Field of the JSONL objects that holds the text."),
    batch_size: int = typer.Option(16, help="Documents per batch."),
    n_process: int = typer.Option(1, help="Worker processes."),
    max_chars: int = typer.Option(10_000_000, help="Longest document accepted, in characters."),
    progress: bool = typer.Option(True, help="Progress bar on stderr."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML page of the findings."),
) -> None:
    """Find self-contradictions in documents and write JSONL findings."""
    counts = detect(
        inputs, output=output, text_field=text_field, batch_size=batch_size,
        n_process=n_process, progress=progress, html=html, lang=lang, model=model, device=device,
        threshold=threshold, window=window, max_all_pairs=max_all_pairs, max_chars=max_chars,
    )
    typer.echo(
        f"{counts['documents']} documents, {counts['inconsistent']} with inconsistencies, "
        f"{counts['errors']} unreadable",
        err=True,
    )


def main() -> None:
    app()


# Commands that live beside the code they drive register themselves on `app`
# (`from ..cli import app`) when imported here; heavy imports stay inside the
# command functions so that `--help` is fast. One import a line.

from . import relations_commands as _relations_commands  # noqa: E402,F401
from .bias import commands as _bias_commands  # noqa: E402,F401
