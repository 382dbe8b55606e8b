"""Is the logistic form of the pair score what holds the ranking back?

The second stage's pair score is a gated logistic regression (`fit_pair_scorer.py`). This
probe refits other forms on the same data (dev suite documents, held-out NLI rows, news
negatives; the same seed, sampling, weights and grouped folds) from a cache of the second
stage's NLI probabilities, and prints for each the out-of-fold dev matched AUC (a
contradiction document's highest pair over its control's), the suite pair AUC, the AUC of
dev contradiction documents against the news articles (highest pair each) and the news
articles' highest pair (median, 90th percentile):

* the shipped form (gated logistic regression);
* gradient-boosted trees (scikit-learn's HistGradientBoostingClassifier) on the same gated
  features, and on the NLI features with the alignment features free (not gated);
* the logistic form with the controls' near-miss pairs, or the suite, weighted more.

    python scripts/nli/pair_score_form_probe.py --cache MPNET_FITCACHE

The cache is a `fit_pair_scorer.py --cache` file (the second stage's from `lora_mpnet.py
scores-to-cache`); every pair of the fit must be in it.
"""
import sys
from pathlib import Path

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "nli"))


def main(
    cache: Path = typer.Option(..., help="NLI probabilities of the second stage for the fit's pairs."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour"),
    nli_dir: Path = typer.Option(ROOT / "assets" / "nli"),
    true_dir: Path = typer.Option(ROOT.parent / "shared" / "data" / "true"),
) -> None:
    import fit_pair_scorer as fit
    from first_stage_probe import _parts
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold

    from spacy_inconsistency.alignment import FEATURE_NAMES
    from spacy_inconsistency.metrics.behaviour import matched_auc
    from spacy_inconsistency.pair_score import design_matrix, feature_names, nli_features

    parts = _parts(cache, suite, nli_dir, true_dir)

    data = fit.fit_inputs(parts)
    source, y, groups, w = data["source"], data["label"], data["group"], data["weight"]
    in_suite, near = data["suite"], data["near_miss"]
    gated = numpy.array([name in FEATURE_NAMES for name in feature_names(True)])
    X = design_matrix(data["forward"], data["backward"], data["align"])
    X[:, gated] = 0.0
    free = numpy.concatenate([nli_features(data["forward"], data["backward"]), data["align"]], 1)
    doc = parts["suite"]["doc"]
    ids = numpy.unique(doc)
    news = source == list(parts).index("news")
    news_ids = numpy.unique(groups[news])
    folds = list(GroupKFold(n_splits=5).split(X, y, groups))

    def report(label, oof):
        s = oof[in_suite]
        top = numpy.array([s[doc == d].max() for d in ids])
        news_top = numpy.array([oof[news][groups[news] == g].max() for g in news_ids])
        contra = top[0::2]  # docs 2r, 2r+1: record r's two sides
        typer.echo(f"{label}: out-of-fold dev matched AUC {matched_auc(contra.tolist(), top[1::2].tolist()):.3f}, "
                   f"suite pair AUC {roc_auc_score(y[in_suite], s):.4f}, contradiction documents against news "
                   f"{roc_auc_score([1] * len(contra) + [0] * len(news_top), numpy.r_[contra, news_top]):.3f}, "
                   f"news highest pair median {numpy.median(news_top):.3f} / p90 {numpy.quantile(news_top, 0.9):.3f}")

    def trees(M, **params):
        oof = numpy.zeros(len(y))
        for tr, te in folds:
            model = HistGradientBoostingClassifier(l2_regularization=1.0, early_stopping=False, random_state=0, **params)
            model.fit(M[tr], y[tr], sample_weight=w[tr])
            oof[te] = model.predict_proba(M[te])[:, 1]
        return oof

    report("shipped form (gated logistic)", fit.fit_logistic(X, y, w, groups)[1])
    for lr, it, leaf in ((0.05, 200, 100), (0.05, 400, 200), (0.1, 200, 50)):
        report(f"trees, gated features (lr {lr}, {it} trees, leaves >= {leaf})",
               trees(X[:, ~gated], learning_rate=lr, max_iter=it, min_samples_leaf=leaf))
    report("trees, alignment features free", trees(free, learning_rate=0.05, max_iter=300, min_samples_leaf=100))
    for factor in (3.0, 10.0):
        weights = w.copy()
        weights[near] *= factor
        report(f"logistic, near-miss pairs x{factor:g}", fit.fit_logistic(X, y, weights, groups, C_grid=(0.1,))[1])
    for factor in (0.5, 3.0):
        weights = w.copy()
        weights[in_suite] *= factor
        report(f"logistic, suite x{factor:g}", fit.fit_logistic(X, y, weights, groups, C_grid=(0.1,))[1])


if __name__ == "__main__":
    typer.run(main)
