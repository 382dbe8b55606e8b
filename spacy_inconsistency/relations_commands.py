"""CLI commands of the claim-relation work: convert-*, evaluate-* (the paper reproductions are in reproductions/)."""
import json
from pathlib import Path
from typing import Optional

import typer

from .cli_app import app


def _load_docs(nlp, path: Path):
    from spacy.tokens import DocBin

    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def predict_pairs(model: Path, corpus: Path, *, batch_size: int = 32, merge_gap: Optional[int] = None) -> list:
    """Run a trained claim-relation pipeline over a DocBin of pair Docs.

    model (Path): The trained pipeline (e.g. training/model-best).
    corpus (Path): A .spacy file written by convert-political / convert-claimdiff.
    batch_size (int): Docs per batch.
    merge_gap (Optional[int]): Override the component's `rationale_merge_gap`.
    RETURNS (list): (gold Doc, predicted Doc) tuples, in order.
    """
    import spacy

    from .components import claim_relation  # noqa: F401  (registers the factory)
    from .components.claim_relation import RATIONALE_KEY

    nlp = spacy.load(model)
    if merge_gap is not None:
        nlp.get_pipe("claim_relation_classifier").cfg["rationale_merge_gap"] = merge_gap
    gold = _load_docs(nlp, corpus)
    inputs = []
    for doc in gold:
        bare = doc.copy()
        bare.cats = {}
        if RATIONALE_KEY in bare.spans:
            del bare.spans[RATIONALE_KEY]
        inputs.append(bare)
    return list(zip(gold, nlp.pipe(inputs, batch_size=batch_size)))


def evaluate_claimdiff(model: Path, corpus: Path, *, positive: Optional[str] = None,
                       merge_gap: Optional[int] = None) -> dict:
    """ClaimDiff Table 2 (AUROC, F1, P, R) and Table 3 (token F1, IOU F1 @0.5) on a test DocBin.

    model (Path): The trained pipeline.
    corpus (Path): test.spacy from convert-claimdiff.
    positive (Optional[str]): The positive label (STRENGTHEN / WEAKEN; found from the data).
    merge_gap (Optional[int]): Override the component's `rationale_merge_gap`.
    RETURNS (dict): `relation` and `rationale` scores (percent).
    """
    from .components.claim_relation import RATIONALE_KEY
    from .metrics.classification import binary_scores
    from .metrics.rationale import iou_f1, token_prf

    pairs = predict_pairs(model, corpus, merge_gap=merge_gap)
    if positive is None:
        positive = next(label for label in pairs[0][0].cats if label != "OTHER")
    y = [int(g.cats[positive] >= 0.5) for g, _ in pairs]
    s = [p.cats[positive] for _, p in pairs]
    gold_r, pred_r = [], []
    for g, p in pairs:
        spans = g.spans.get(RATIONALE_KEY, [])
        if len(spans):
            gold_r.append([(x.start, x.end) for x in spans])
            pred_r.append([(x.start, x.end) for x in p.spans.get(RATIONALE_KEY, [])])
    tok = token_prf(gold_r, pred_r)
    iou = iou_f1(gold_r, pred_r, threshold=0.5)
    return {
        "positive": positive, "relation": binary_scores(y, s),
        "rationale": {"n_pairs_with_gold_rationale": len(gold_r), "token_f1": 100 * tok["f1"],
                      "token_p": 100 * tok["p"], "token_r": 100 * tok["r"],
                      "iou_f1_0.5": 100 * iou["micro_f1"], "iou_f1_0.5_macro": 100 * iou["macro_f1"]},
    }


@app.command("convert-political")
def convert_political_cli(
    data: Path = typer.Option(..., "--data", help="df_gold.csv or its folder."),
    output: Path = typer.Option(..., "--output", "-o", help="Output folder."),
    classes: int = typer.Option(5, help="5 or 3 classes."),
    folds: int = typer.Option(5, help="Cross-validation folds."),
    seed: int = typer.Option(0, help="Fold seed."),
) -> None:
    """Political benchmark -> pair DocBins: all.spacy and fold{k}/train|dev.spacy."""
    from .corpora.political import convert_political

    written = convert_political(data, output, n_classes=classes, n_folds=folds, seed=seed)
    typer.echo(", ".join(f"{k}: {v}" for k, v in written.items()))


@app.command("convert-claimdiff")
def convert_claimdiff_cli(
    data: Path = typer.Option(..., "--data", help="Folder of the ClaimDiff JSON files."),
    output: Path = typer.Option(..., "--output", "-o", help="Output folder."),
    task: str = typer.Option(..., help="S (strengthen) or W (weaken)."),
    seed: int = typer.Option(0, help="Seed of the dev-topic draw."),
) -> None:
    """ClaimDiff -> pair DocBins with rationale spans: train/dev/test.spacy."""
    from .corpora.claimdiff import convert_claimdiff

    written = convert_claimdiff(data, output, task=task, seed=seed)
    typer.echo(", ".join(f"{k}: {v}" for k, v in written.items()))


@app.command("evaluate-claimdiff")
def evaluate_claimdiff_cli(
    model: Path = typer.Option(..., help="Trained pipeline (model-best)."),
    corpus: Path = typer.Option(..., help="test.spacy from convert-claimdiff."),
    output: Path = typer.Option(..., "--output", "-o", help="JSON file to write."),
    merge_gap: Optional[int] = typer.Option(None, help="Join rationale runs at most this many tokens apart."),
) -> None:
    """ClaimDiff test AUROC/F1/P/R and rationale token F1 / IOU F1 at 0.5."""
    result = evaluate_claimdiff(model, corpus, merge_gap=merge_gap)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2), encoding="utf-8")
    rel, rat = result["relation"], result["rationale"]
    auroc = "n/a" if rel["auroc"] is None else f"{rel['auroc']:.2f}"
    typer.echo(f"{result['positive']}: AUROC {auroc}, F1 {rel['f1']:.2f}, P {rel['precision']:.2f}, "
               f"R {rel['recall']:.2f} (n={rel['n']}); rationale token F1 {rat['token_f1']:.2f}, "
               f"IOU F1@0.5 {rat['iou_f1_0.5']:.2f} (n={rat['n_pairs_with_gold_rationale']})")


@app.command("evaluate-political")
def evaluate_political_cli(
    data: Path = typer.Option(..., "--data", help="df_gold.csv or its folder."),
    corpus: Path = typer.Option(..., help="Folder from convert-political (fold{k}/dev.spacy)."),
    models: Path = typer.Option(..., help="Folder with fold{k}/model-best (a missing fold is left out)."),
    output: Path = typer.Option(..., "--output", "-o", help="JSON file to write."),
    name: str = typer.Option("claim_relation_classifier", help="Row name of our classifier."),
    seeds: int = typer.Option(10, help="Protocol runs (seeds 0..N-1)."),
) -> None:
    """Cross-validated classifier under the paper's protocol, beside the published rows.

    Each sample is predicted by the model of the fold that held it out. When
    not every fold has a model, all rows (humans and LLMs included) are scored
    on the covered samples only, so the comparison stays like for like.
    """
    from .political import protocol_tables, read_political

    records = read_political(data)
    predicted = {}
    folds = sorted(p for p in corpus.glob("fold*") if (p / "dev.spacy").is_file())
    used = []
    for fold in folds:
        model = models / fold.name / "model-best"
        if not model.is_dir():
            typer.echo(f"warning: no model at {model}; fold {fold.name} left out", err=True)
            continue
        used.append(fold.name)
        for gold, pred in predict_pairs(model, fold / "dev.spacy"):
            predicted[gold.user_data["sample"]] = max(pred.cats, key=pred.cats.get)
    if not predicted:
        raise typer.BadParameter(f"no fold{{k}}/model-best under {models}")
    keep = sorted(predicted)
    subset = [records[i] for i in keep]
    result = protocol_tables(subset, seeds=list(range(seeds)),
                                 extra_predictions={name: [predicted[i] for i in keep]})
    result["folds"] = used
    result["samples"] = len(keep)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2), encoding="utf-8")
    for key in ("table_3", "table_4"):
        rows = result[key]["over_seeds"]
        typer.echo(f"{key} on {len(keep)} samples ({', '.join(used)}), mean over {seeds} seeds:")
        for row, cells in rows.items():
            typer.echo(f"  {row}: " + ", ".join(f"{c}: {v['mean']:.3f}" for c, v in cells.items()))
