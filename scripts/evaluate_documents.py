"""Document-level behaviour of the pairwise detector on real documents.

Two sets from ../shared/data:
- ContraDoc (`contradiction/contradoc_50.json`): the contradictory documents
  whose evidence survived the 2,000-character cut, and all the others;
  ROC-AUC of `doc._.inconsistency_score` and the share flagged in each class.
- News (`true/qags_xsum.csv` source articles, taken to be consistent): the
  share of articles the detector flags, i.e. its false-alarm rate per document.

Each pair is scored once in both directions; every aggregation (the learned
pair score of the detector, and min / mean / max of P(contradiction)) and
threshold is then computed from the same scores.

    python scripts/evaluate_documents.py --model default --output metrics/documents.json
"""
import csv
import json
import sys
from pathlib import Path
from typing import List

import numpy
import typer

from spacy_inconsistency import defaults

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
AGGREGATION_NAMES = ("learned", "min", "mean", "max")
THRESHOLDS = (0.5, 0.7, 0.9)
CONTRADOC = Path("contradiction") / "contradoc_50.json"
NEWS = Path("true") / "qags_xsum.csv"


def find_data(name: Path, folders: List[Path]) -> Path:
    """The first `folder / name` that exists; exit with a message saying where it was looked for."""
    for folder in folders:
        if (folder / name).is_file():
            return folder / name
    where = ", ".join(str(f) for f in folders)
    typer.echo(
        f"error: {name} not found in {where}. Fetch it with `spacy project assets` (into assets/), "
        f"or point at the folder that holds it: `spacy project run evaluate . --vars.data_dir PATH` "
        f"(or --data-dir PATH for this script).",
        err=True,
    )
    raise typer.Exit(1)


def main(
    model: str = typer.Option("default", help="NLI model: 'default', a path or a hub id."),
    dtype: str = typer.Option("auto", help="The first model's forward passes (auto, float32, bfloat16, mixed, int8); the rescorer follows an explicit one and is mixed (native bf16) or float32 under auto."),
    data_dir: List[Path] = typer.Option([DEFAULT_DATA], help="Data folders, searched in order (repeatable)."),
    n_news: int = typer.Option(40, help="Number of news articles."),
    rescorer: str = typer.Option("auto", help="The larger NLI model re-scoring each document's top pairs (the cascade; the 'learned' row is then the cascade's): auto (mpnet-lora with the embedded first model), none, or a model with its pair_scorer.json."),
    rescore_top_k: int = typer.Option(defaults.RESCORE_TOP_K, help="Pairs per document the --rescorer sees."),
    rescore_top_share: float = typer.Option(defaults.RESCORE_TOP_SHARE, help="In a long document the --rescorer can see more: this share of its compared pairs, at most 32 (0: always --rescore-top-k)."),
    rescore_similar_k: int = typer.Option(defaults.RESCORE_SIMILAR_K, help="Further pairs per document the --rescorer sees: the most alike of the others (the detector's `rescore_similar_k`)."),
    first_stage_directions: int = typer.Option(2, help="Directions the first model reads each pair in before the --rescorer (1 or 2)."),
    reverse_top_k: str = typer.Option("32", help="With two directions, the pairs per document whose reverse order the first model reads (those its text order ranks highest); 'all': every pair."),
    rescore_reverse_top_k: str = typer.Option("4", help="Of the --rescore-top-k pairs, those whose reverse order the --rescorer reads (those its text order ranks highest, and any it would flag); 'all': every one."),
    output: Path = typer.Option(None, help="Write the figures as JSON here."),
    details: Path = typer.Option(None, help="Write one JSON line per document here: its set, label, number of pairs, threshold and every pair score."),
    set_: List[str] = typer.Option([], "--set", help="Further detector setting, as evaluate_behaviour.py's --set (e.g. --set alignment=false); it overrides the options above."),
    progress: bool = typer.Option(True, help="Progress bar on stderr."),
) -> None:
    import spacy
    from sklearn.metrics import roc_auc_score
    from tqdm import tqdm

    from evaluate_behaviour import apply_settings, parse_settings
    from spacy_inconsistency.cli import rescorer_config
    from spacy_inconsistency.pair_scoring import AGGREGATIONS, noisy_or_top

    settings = parse_settings(set_)

    contradoc_path, news_path = find_data(CONTRADOC, data_dir), find_data(NEWS, data_dir)
    records = json.loads(contradoc_path.read_text(encoding="utf-8"))
    contradoc = [r for r in records if r["label"] == "non_contradictory" or r["evidence"] in r["text"]]
    gold = numpy.array([r["label"] == "contradictory" for r in contradoc])
    news = []
    with news_path.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["grounding"] not in news:
                news.append(row["grounding"])
    news = news[:n_news]
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    config = {"model": {"model": model, "dtype": dtype}, "rescorer": rescorer_config(rescorer),
              "rescore_top_k": rescore_top_k, "rescore_top_share": rescore_top_share,
              "rescore_similar_k": rescore_similar_k, "first_stage_directions": first_stage_directions,
              "reverse_top_k": None if reverse_top_k == "all" else int(reverse_top_k),
              "rescore_reverse_top_k": None if rescore_reverse_top_k == "all" else int(rescore_reverse_top_k)}
    detector = nlp.add_pipe("contradiction_detector", config=apply_settings(config, settings))
    rescorer = detector.rescorer.name if detector.rescorer is not None else None
    docs = list(nlp.pipe([r["text"] for r in contradoc] + news))
    scores = []
    with tqdm(total=len(docs), unit="doc", desc="documents", file=sys.stderr, disable=not progress) as bar:
        for start in range(0, len(docs), 4):
            scores.extend(detector.predict(docs[start:start + 4]))
            bar.update(len(docs[start:start + 4]))
    # `config` holds the --set overrides too (apply_settings writes into it).
    results = {"model": model, "dtype": dtype, "rescorer": rescorer,
               "rescore_top_k": config["rescore_top_k"] if rescorer else None,
               "rescore_top_share": config["rescore_top_share"] if rescorer else None,
               "rescore_similar_k": config["rescore_similar_k"] if rescorer else None,
               "first_stage_directions": config["first_stage_directions"] if rescorer else 2,
               "reverse_top_k": config["reverse_top_k"] if rescorer and config["first_stage_directions"] == 2 else None,
               "rescore_reverse_top_k": config["rescore_reverse_top_k"] if rescorer else None,
               "doc_score_top_k": detector.cfg["doc_score_top_k"],
               "contradoc": str(contradoc_path), "news": str(news_path), "contradoc_docs": len(contradoc), "contradoc_positive": int(gold.sum()),
               "news_docs": len(news), "set": settings, "by_aggregation": {}}
    learned_threshold = detector.threshold
    results["learned_threshold"] = learned_threshold
    for name in AGGREGATION_NAMES:
        # A document's score as the detector gives it (`doc_score_top_k`), over each rule's pair scores.
        if name == "learned":
            doc_scores = numpy.array([detector.document_score(s) for s in scores])
        else:
            fn = AGGREGATIONS[name]
            doc_scores = numpy.array([noisy_or_top(fn(s.forward, s.backward), detector.cfg["doc_score_top_k"]) for s in scores])
        c, n = doc_scores[: len(contradoc)], doc_scores[len(contradoc):]
        entry = {"contradoc_auc": float(roc_auc_score(gold, c)), "thresholds": {}}
        for t in THRESHOLDS + ((learned_threshold,) if name == "learned" else ()):
            entry["thresholds"][str(t)] = {
                "contradoc_flagged_positive": float((c[gold] >= t).mean()),
                "contradoc_flagged_negative": float((c[~gold] >= t).mean()),
                "news_flagged": float((n >= t).mean()),
            }
        if name == "learned":
            # The detector's own decision: a pair at or over its threshold, which grows with the number of pairs.
            cuts = numpy.array([detector.threshold_for(len(s.pairs)) for s in scores])
            hit = numpy.array([s.max_score for s in scores]) >= cuts
            hc, hn = hit[: len(contradoc)], hit[len(contradoc):]
            entry["thresholds"]["document"] = {
                "contradoc_flagged_positive": float(hc[gold].mean()),
                "contradoc_flagged_negative": float(hc[~gold].mean()),
                "news_flagged": float(hn.mean()),
            }
        results["by_aggregation"][name] = entry
        cut = "document" if name == "learned" else 0.5
        at = entry["thresholds"][str(cut)]
        typer.echo(f"{name:7s}: ContraDoc ROC-AUC {entry['contradoc_auc']:.3f}; at {cut} flagged "
                   f"{at['contradoc_flagged_positive']:.0%} of contradictory, "
                   f"{at['contradoc_flagged_negative']:.0%} of consistent ContraDoc docs, "
                   f"{at['news_flagged']:.0%} of news articles")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2))
    if details:
        details.parent.mkdir(parents=True, exist_ok=True)
        with details.open("w", encoding="utf8") as f:
            for i, s in enumerate(scores):
                in_contradoc = i < len(contradoc)
                f.write(json.dumps({
                    "set": "contradoc" if in_contradoc else "news",
                    "label": contradoc[i]["label"] if in_contradoc else "news",
                    "n_pairs": int(len(s.pairs)), "threshold": float(detector.threshold_for(len(s.pairs))),
                    "pair_scores": [round(float(x), 6) for x in s.score],
                }) + "\n")


if __name__ == "__main__":
    typer.run(main)
