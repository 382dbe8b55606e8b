"""The cascade's document threshold, measured on what the cascade reads.

The second stage's pair score comes with a document threshold fitted as if the larger
model read every compared pair (`fit_pair_scorer.py`): a Doc of k pairs is flagged at
F^-1((1 - alpha) ** (1 / k)), F the distribution of its pair scores in consistent news.
The cascade reads only the first model's `rescore_top_k` highest pairs (and the
`rescore_similar_k` most alike of the others), so that rule asks a 45-pair paragraph
for a score that the highest of 45 consistent pairs reaches with chance alpha, where
the cascade compares 12.

This script runs the detector as it ships (`collect`) on the behavioural suite's DEV
documents and on news articles that the pair score was not fitted on (TRUE's FRANK and
SummEval sources other than `fit_pair_scorer.py`'s news negatives; never a source article
of `qags_xsum.csv`, the news check of `evaluate_documents.py`), and keeps every
document's number of compared pairs and the scores of the pairs the second stage read.
`fit` then measures F on those read pairs of news (F_read) and chooses the rule

    threshold(k) = F_read^-1((1 - alpha) ** (1 / min(k, cap)))

(alpha and cap on a grid: of the rules that flag at most `--max-dev-false-alarms` of the
dev controls and `--max-news-alarms` of the news, the one that flags the most dev
contradiction documents for their gold pair, then the most of them, then the smaller cap) and
writes it into the second stage's `pair_scorer.json` as the `"cascade"` document
threshold, which the detector uses with `cascade_threshold = true` when its second stage
runs with the settings it was fitted for (`rescore_top_k`, `rescore_similar_k`; other
settings fall back to the rule for every pair). The pair score was fitted on the dev
documents' pairs, so their shipped scores are in-fold and the false alarms capped on them
optimistic (9.5% on dev became 16% on the suite's first test split, docs/detection.md):
`collect` therefore also scores each dev document's read pairs with the model of
`fit_pair_scorer.py`'s fold that held its record out (stored in `pair_scorer.json` as
`info["out_of_fold"]`), and `fit` caps and counts on those scores (`--in-fold`: on the
shipped ones). The TEST splits of the suite are never read.

    python scripts/nli/calibrate_cascade.py collect --output metrics/cascade_calibration_docs.jsonl
    python scripts/nli/calibrate_cascade.py fit --details metrics/cascade_calibration_docs.jsonl \
        --pair-scorer spacy_inconsistency/models/nli-mpnet-lora/pair_scorer.json
"""
import json
import sys
from pathlib import Path
from typing import List, Optional

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "nli"))

app = typer.Typer(add_completion=False)


@app.callback()
def main() -> None:
    """Calibrate the cascade's document threshold (collect, then fit)."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def calibration_news(true_dir: Path, fit_skip: int, fit_n: int) -> List[str]:
    """The news articles the pair score was not fitted on: all of `news_articles` but
    the `fit_n` from `fit_skip` on (`fit_pair_scorer.py --news-negatives`)."""
    from fit_pair_scorer import news_articles

    articles = news_articles(true_dir, 100_000)
    return articles[:fit_skip] + articles[fit_skip + fit_n:]


@app.command()
def collect(
    output: Path = typer.Option(..., help="One JSON line per document: set, label, pairs compared, pairs read by the second stage, their scores."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour", help="Behavioural suite folder."),
    suite_pattern: Optional[str] = typer.Option(None, help="Its files to read; by default those the second stage's pair "
                                                "score was fitted on (its info's suite_pattern, else dev_*.jsonl)."),
    true_dir: Path = typer.Option(ROOT.parent / "shared" / "data" / "true", help="TRUE CSVs (the news)."),
    fit_skip: int = typer.Option(60, help="fit_pair_scorer.py's --calibration-news (its negatives start there)."),
    fit_n: int = typer.Option(80, help="fit_pair_scorer.py's --news-negatives."),
    set_: List[str] = typer.Option([], "--set", help="Detector setting, as evaluate_behaviour.py's --set."),
    batch_size: int = typer.Option(8),
    in_fold: bool = typer.Option(False, "--in-fold", help="Do not add the dev documents' out-of-fold scores."),
) -> None:
    from dataclasses import replace

    from tqdm import tqdm

    from evaluate_behaviour import build_pipeline, gold_pair_score, parse_settings
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    settings = parse_settings(set_)
    nlp = build_pipeline("default", settings)
    detector = nlp.get_pipe("inconsistency_detector")
    if detector.pairwise.rescorer is None:
        raise typer.BadParameter("the detector has no second stage (rescorer) to calibrate")
    cascade = detector.pairwise.cascade_settings()
    folds = None if in_fold else fold_scorers(detector.pairwise.rescorer_pair_scorer)
    recorder = _Recorder(detector.pairwise.rescorer_pair_scorer)
    detector.pairwise._rescorer_pair_scorer = recorder
    if suite_pattern is None:
        suite_pattern = detector.pairwise.rescorer_pair_scorer.info.get("suite_pattern", "dev_*.jsonl")
    records = read_behaviour_suite(suite, suite_pattern)
    jobs = [("dev", r["id"], side, r[side]["text"], r["gold"] if side == "contradiction" else r["control_gold"])
            for r in records for side in ("contradiction", "control")]
    news = calibration_news(true_dir, fit_skip, fit_n)
    jobs += [("news", f"news-{i}", "consistent", text, None) for i, text in enumerate(news)]
    log(f"{len(records)} dev records, {len(news)} news articles")
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf8") as f, tqdm(total=len(jobs), desc="documents", file=sys.stderr) as bar:
        for start in range(0, len(jobs), batch_size):
            batch = jobs[start:start + batch_size]
            docs = [nlp.make_doc(text) for _, _, _, text, _ in batch]
            detector.segment(docs)
            recorder.calls.clear()
            predicted = detector.predict(docs)
            # The cascade's last call of the pair score per Doc gives the scores it keeps.
            calls = recorder.calls[-len(docs):]
            for (part, doc_id, side, _, gold), s, call in zip(batch, predicted, calls):
                read_scores = numpy.sort(s.score[s.rescored])[::-1]
                row = {
                    "set": part, "id": doc_id, "side": side, "pairs": int(len(s.pairs)), "cascade": cascade,
                    "read_scores": [round(float(x), 6) for x in read_scores],
                    "gold_pair_score": gold_pair_score(s, gold) if gold is not None else None,
                }
                if part == "dev" and folds is not None:
                    if doc_id not in folds:
                        raise typer.BadParameter(f"dev record {doc_id} is in no fold of the pair score: the suite "
                                                 "changed since fit_pair_scorer.py ran; refit it, or pass --in-fold")
                    oof = replace(s, score=out_of_fold_scores(s, call, folds[doc_id]))
                    row["read_scores_oof"] = [round(float(x), 6) for x in numpy.sort(oof.score[s.rescored])[::-1]]
                    row["gold_pair_score_oof"] = gold_pair_score(oof, gold)
                f.write(json.dumps(row) + "\n")
            bar.update(len(batch))
    log(f"wrote {output}")


class _Recorder:
    """Stands in for the second stage's pair score and keeps what each call read, so that
    the dev documents' read pairs can be scored again by the fold model that did not see them."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def __call__(self, forward, backward, alignment=None):
        out = self.inner(forward, backward, alignment)
        self.calls.append((forward.copy(), backward.copy(), None if alignment is None else alignment.copy(), out))
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


def fold_scorers(scorer) -> dict:
    """{dev record id: (full, nli_only)}: the models of `fit_pair_scorer.py`'s fold that held it out."""
    from spacy_inconsistency.pair_score import LogisticModel

    folds = scorer.info.get("out_of_fold")
    if not folds:
        raise typer.BadParameter(
            "the second stage's pair_scorer.json has no out-of-fold models (refit it with fit_pair_scorer.py), "
            "or pass --in-fold")
    out = {}
    for full, nli_only in zip(folds["full"], folds["nli_only"]):
        models = (LogisticModel.from_dict(full["model"]), LogisticModel.from_dict(nli_only["model"]))
        out.update({rid: models for rid in full["dev_records"]})
    return out


def out_of_fold_scores(s, call, models) -> numpy.ndarray:
    """The Doc's pair scores with its read pairs scored by its fold's model."""
    from spacy_inconsistency.pair_score import design_matrix

    forward, backward, alignment, shipped = call
    if not numpy.array_equal(shipped, s.score[s.rescored]):
        raise RuntimeError("the recorded pair-score call is not this Doc's (the cascade's call order changed)")
    score = numpy.zeros_like(s.score)
    if len(forward):
        model = models[0] if alignment is not None else models[1]
        score[s.rescored] = model(design_matrix(forward, backward, alignment))
    return score


def _project_path(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if ROOT in path.parents else str(path)


@app.command()
def fit(
    details: Path = typer.Option(..., help="`collect`'s output."),
    pair_scorer: Path = typer.Option(ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora" / "pair_scorer.json",
                                     help="The second stage's pair score: its \"cascade\" document threshold is (re)written."),
    max_news_alarms: float = typer.Option(0.03, help="Largest share of the news articles the threshold may flag."),
    max_dev_false_alarms: float = typer.Option(0.10, help="Largest share of the dev controls it may flag."),
    floor: float = typer.Option(0.3, help="The lowest threshold (documents of very few pairs)."),
    caps: List[int] = typer.Option([8, 16, 32, 64, 128, 256, 512, 2000], "--cap", help="Candidate caps on k."),
    dry_run: bool = typer.Option(False, help="Print the table, write nothing."),
    in_fold: bool = typer.Option(False, "--in-fold", help="Cap the dev false alarms on the shipped pair score's "
                                 "scores (fitted on these documents) instead of the out-of-fold ones."),
) -> None:
    from fit_pair_scorer import flagged, null_cdf

    from spacy_inconsistency.pair_score import DocumentThreshold, PairScoreModel

    rows = [json.loads(line) for line in details.open(encoding="utf8") if line.strip()]
    cascade = rows[0]["cascade"]
    if any(r["cascade"] != cascade for r in rows):
        raise typer.BadParameter("the documents were read by cascades of different settings")
    news = [r for r in rows if r["set"] == "news"]
    dev = [r for r in rows if r["set"] == "dev"]
    scores_key, gold_key = ("read_scores", "gold_pair_score") if in_fold else ("read_scores_oof", "gold_pair_score_oof")
    if any(scores_key not in r for r in dev):
        raise typer.BadParameter(f"{details} has no {scores_key} (collect it again, or pass --in-fold)")
    cdf = null_cdf(numpy.concatenate([r["read_scores"] for r in news]))
    news_max = numpy.array([max(r["read_scores"], default=0.0) for r in news])
    news_k = numpy.array([r["pairs"] for r in news])
    dev_max = numpy.array([max(r[scores_key], default=0.0) for r in dev])
    dev_k = numpy.array([r["pairs"] for r in dev])
    positive = numpy.array([r["side"] == "contradiction" for r in dev])
    # The gold pair is the Doc's highest (scores were written to 6 decimals).
    dev_hit = numpy.array([r[gold_key] is not None and r[gold_key] > 0
                           and round(r[gold_key], 6) >= max(r[scores_key], default=0.0) for r in dev])
    log(f"{len(news)} news articles ({int(sum(len(r['read_scores']) for r in news))} read pairs, median "
        f"{numpy.median(news_k):.0f} compared), {int(positive.sum())} dev contradiction documents, "
        f"{int((~positive).sum())} controls")
    table, chosen = [], None
    for cap in caps:
        for alpha in numpy.round(numpy.arange(0.01, 0.301, 0.01), 2):
            rule = DocumentThreshold(cdf, alpha=float(alpha), floor=floor, max_pairs=cap)
            dev_flag = flagged(dev_max, dev_k, rule)
            row = {"cap": cap, "alpha": float(alpha), "dev_recall": float(dev_flag[positive].mean()),
                   "dev_pair_hits": float((dev_flag & dev_hit)[positive].mean()),
                   "dev_false_alarms": float(dev_flag[~positive].mean()),
                   "news_flagged": float(flagged(news_max, news_k, rule).mean()),
                   "threshold_by_pairs": {k: rule(k) for k in (3, 10, 30, 100, 1000)}}
            table.append(row)
            if row["dev_false_alarms"] <= max_dev_false_alarms and row["news_flagged"] <= max_news_alarms:
                if chosen is None or ((row["dev_pair_hits"], row["dev_recall"], -row["cap"])
                                      > (chosen["dev_pair_hits"], chosen["dev_recall"], -chosen["cap"])):
                    chosen = row
    for row in table:
        if row["alpha"] in (0.01, 0.02, 0.05, 0.1, 0.2, 0.3) or row is chosen:
            log(json.dumps(row))
    if chosen is None:
        log(f"no rule flags at most {max_dev_false_alarms} of the dev controls and {max_news_alarms} of the news")
        raise typer.Exit(1)
    log(f"chosen: {json.dumps(chosen)}")
    if dry_run:
        return
    scorer = PairScoreModel.from_disk(pair_scorer)
    scorer.document_thresholds["cascade"] = DocumentThreshold(cdf, alpha=chosen["alpha"], floor=floor, max_pairs=chosen["cap"])
    scorer.cascade_settings = dict(cascade)
    scorer.info["cascade_threshold"] = {
        "details": _project_path(details), "cascade": cascade, "news_articles": len(news), "null_pairs": int(sum(len(r["read_scores"]) for r in news)),
        "dev_documents": len(dev), "dev_scores": "in fold" if in_fold else "out of fold", "max_news_alarms": max_news_alarms, "max_dev_false_alarms": max_dev_false_alarms,
        "floor": floor, "chosen": chosen,
    }
    scorer.to_disk(pair_scorer)
    log(f"wrote {pair_scorer}")


if __name__ == "__main__":
    app()
