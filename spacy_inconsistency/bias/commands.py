"""CLI: `bias-dataset` and `bias-audit` (registered on the package's typer app)."""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from ..cli_app import app

LANG_HELP = "Language: en (US politics), de (Swiss politics); repeat for several."


def write_dataset(*, langs: List[str], output: Path, errata: bool = True) -> int:
    """Write the arguments of the given languages as JSONL.

    langs (List[str]): Languages ("en", "de").
    output (Path): The JSONL file.
    errata (bool): Apply the corrections of `data/errata.json`.
    RETURNS (int): Number of arguments written.
    """
    from .dataset import generate, write_jsonl

    arguments = [a for lang in langs for a in generate(lang, errata=errata)]
    output.parent.mkdir(parents=True, exist_ok=True)
    return write_jsonl(arguments, output)


@app.command("bias-dataset")
def bias_dataset_cli(
    lang: List[str] = typer.Option(..., "--lang", help=LANG_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="JSONL file to write."),
    as_printed: bool = typer.Option(False, "--as-printed", help="Leave out the errata: the paper's tables exactly as printed."),
) -> None:
    """Write the partisan-inference arguments (384 per language) as JSONL."""
    from .dataset import LANGUAGES

    for value in lang:
        if value not in LANGUAGES:
            raise typer.BadParameter(f"unknown language {value!r}; use one of {', '.join(LANGUAGES)}")
    n = write_dataset(langs=lang, output=output, errata=not as_printed)
    typer.echo(f"{n} arguments -> {output}", err=True)


def build_judges(
    *,
    judge: str,
    model: str = "default",
    device: str = "auto",
    threshold: Optional[float] = None,
    pipeline: Optional[str] = None,
    label_map: Optional[Dict[str, bool]] = None,
    judge_config: Optional[Path] = None,
) -> List[Any]:
    """The judges named on the command line.

    judge (str): "nli", "pipeline" or "config" (a spaCy config file with a
        [judge] block resolved through the registry, e.g. an LLM judge).
    RETURNS (List[Any]): The judges.
    """
    from .judges import NLIValidityJudge, make_pipeline_validity_judge

    if judge == "nli":
        return [NLIValidityJudge(model=model, device=device, threshold=threshold)]
    if judge == "pipeline":
        if not pipeline or not label_map:
            raise typer.BadParameter("--judge pipeline needs --pipeline and --label-map")
        return [make_pipeline_validity_judge(pipeline, label_map)]
    if judge == "config":
        from spacy.util import load_config, registry

        from ..errors import Errors

        if judge_config is None:
            raise typer.BadParameter("--judge config needs --judge-config")
        config = load_config(judge_config, interpolate=True)
        if "judge" not in config:
            raise ValueError(Errors.E172.format(path=judge_config))
        return [registry.resolve({"judge": config["judge"]})["judge"]]
    raise typer.BadParameter(f"unknown judge {judge!r}; use nli, pipeline or config")


@app.command("bias-audit")
def bias_audit_cli(
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Folder for predictions, report.json and report.md."),
    lang: List[str] = typer.Option(["en", "de"], "--lang", help=LANG_HELP),
    dataset: Optional[Path] = typer.Option(None, help="Arguments JSONL (from bias-dataset); generated when not given."),
    judge: str = typer.Option("nli", help="nli (NLI backend), pipeline (spaCy pipeline setting doc.cats) or config (--judge-config)."),
    model: str = typer.Option("default", help="NLI model for --judge nli: 'default' (embedded), a local directory or a hub id."),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N."),
    threshold: Optional[float] = typer.Option(None, help="NLI: valid when P(entailment) >= this (default: entailment is the top label)."),
    pipeline: Optional[str] = typer.Option(None, help="--judge pipeline: path or name for spacy.load."),
    label_map: Optional[str] = typer.Option(None, help='--judge pipeline: JSON category -> valid, e.g. \'{"ENTAIL": true, "OTHER": false}\'.'),
    judge_config: Optional[Path] = typer.Option(None, help="--judge config: spaCy config with a [judge] block."),
    as_printed: bool = typer.Option(False, "--as-printed", help="Generate from the tables exactly as printed (no errata)."),
    batch_size: int = typer.Option(256, help="Arguments per judge call."),
    alpha: float = typer.Option(0.05, help="Significance level of the Z test."),
    progress: bool = typer.Option(True, help="Progress bar on stderr."),
) -> None:
    """Judge the partisan-inference arguments; write bias, Z test and accuracy tables."""
    from .audit import audit, markdown
    from .dataset import generate, read_jsonl

    if dataset is not None:
        arguments = [a for a in read_jsonl(dataset) if a.language in lang]
    else:
        arguments = [a for value in lang for a in generate(value, errata=not as_printed)]
    judges = build_judges(
        judge=judge, model=model, device=device, threshold=threshold, pipeline=pipeline,
        label_map=json.loads(label_map) if label_map else None, judge_config=judge_config,
    )
    reports = audit(judges, arguments, output_dir=output_dir, batch_size=batch_size, alpha=alpha, progress=progress)
    typer.echo(markdown(reports))
