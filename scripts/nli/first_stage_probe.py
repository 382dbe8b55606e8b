"""Does the first model's NLI evidence add to the second stage's pair score?

The cascade's second stage decides with its own pair score (both directions of mpnet-lora plus
alignment evidence, `fit_pair_scorer.py`). The first model has read the same pairs, both ways, so
its probabilities would cost nothing at inference. This probe refits the pair score on the same
data as `fit_pair_scorer.py` (dev suite documents, held-out NLI rows, news negatives; the same
seed and sampling) from two caches of NLI probabilities of the same pairs, and prints the
out-of-fold dev matched AUC (a contradiction document's highest pair over its control's) and the
suite pair AUC of: the shipped form, the shipped form plus the first model's six order-free NLI
features, and the first model alone with alignment.

    python scripts/nli/first_stage_probe.py --second-cache MPNET_FITCACHE --first-cache MINILM_FITCACHE

The caches are `fit_pair_scorer.py --cache` files (the second stage's from `lora_mpnet.py
scores-to-cache`); every pair of the fit must be in both.
"""
import random
import sys
from pathlib import Path

import numpy
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "nli"))


class _CacheOnly:
    label_index = {"entailment": 0, "neutral": 1, "contradiction": 2}

    def predict(self, pairs):
        raise RuntimeError(f"{len(pairs)} pairs are not in the cache")


def _parts(cache: Path, suite: Path, nli_dir: Path, true_dir: Path):
    import fit_pair_scorer as fit

    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    backend = fit.CachedNLI(_CacheOnly(), cache)
    rng = random.Random(0)
    parts = {"suite": fit.suite_pairs(read_behaviour_suite(suite, "dev_*.jsonl"), backend, max_all_pairs=2000)}
    offset = 10_000_000
    for name, sources in fit.NLI_HELDOUT.items():
        parts[name] = fit.row_pairs(fit.sample_rows(nli_dir / name, sources, 600, rng), backend, offset)
        offset += 10_000_000
    parts["news"] = fit.news_pairs(fit.news_articles(true_dir, 80, skip=60), backend, max_all_pairs=2000,
                                   group_offset=offset)
    return parts


def main(
    second_cache: Path = typer.Option(..., help="NLI probabilities of the second stage (mpnet-lora) for the fit's pairs."),
    first_cache: Path = typer.Option(..., help="The first model's for the same pairs."),
    suite: Path = typer.Option(ROOT / "tests" / "behaviour"),
    nli_dir: Path = typer.Option(ROOT / "assets" / "nli"),
    true_dir: Path = typer.Option(ROOT.parent / "shared" / "data" / "true"),
) -> None:
    import fit_pair_scorer as fit
    from sklearn.metrics import roc_auc_score

    from spacy_inconsistency.alignment import FEATURE_NAMES
    from spacy_inconsistency.metrics.behaviour import matched_auc
    from spacy_inconsistency.pair_score import design_matrix, feature_names, nli_features

    second = _parts(second_cache, suite, nli_dir, true_dir)
    first = _parts(first_cache, suite, nli_dir, true_dir)

    data, data_first = fit.fit_inputs(second), fit.fit_inputs(first)
    y, groups, w, in_suite = data["label"], data["group"], data["weight"], data["suite"]
    if not (numpy.array_equal(y, data_first["label"]) and numpy.array_equal(groups, data_first["group"])):
        raise typer.BadParameter("the two caches did not give the same pairs")
    gated = numpy.array([name in FEATURE_NAMES for name in feature_names(True)])
    X = design_matrix(data["forward"], data["backward"], data["align"])
    X[:, gated] = 0.0
    X_first = design_matrix(data_first["forward"], data_first["backward"], data_first["align"])
    X_first[:, gated] = 0.0
    doc = second["suite"]["doc"]
    ids = numpy.unique(doc)
    for label, M in (("second stage + alignment (shipped form)", X),
                     ("+ the first model's NLI features", numpy.concatenate([X, nli_features(data_first["forward"], data_first["backward"])], 1)),
                     ("first model + alignment", X_first)):
        fitted, oof = fit.fit_logistic(M, y, w, groups)
        s = oof[in_suite]
        top = numpy.array([s[doc == d].max() for d in ids])
        matched = matched_auc(top[0::2].tolist(), top[1::2].tolist())  # docs 2r, 2r+1: record r's two sides
        typer.echo(f"{label}: out-of-fold dev matched AUC {matched:.3f}, suite pair AUC "
                   f"{roc_auc_score(y[in_suite], s):.4f} (C {fitted['C']})")


if __name__ == "__main__":
    typer.run(main)
