import json

import numpy
import pytest
import spacy

from conftest import write_min_pair_scorer
from spacy_inconsistency.alignment import FEATURE_NAMES
from spacy_inconsistency.backends.nli import NLIBackend
from spacy_inconsistency.pair_score import (
    INTERACTIONS,
    DocumentThreshold,
    LogisticModel,
    PairScoreModel,
    design_matrix,
    feature_names,
    find_pair_scorer,
)

RNG = numpy.random.default_rng(0)


def random_probs(k):
    p = RNG.random((k, 3)) + 0.01
    return (p / p.sum(1, keepdims=True)).astype(numpy.float32)


def random_model(with_alignment, seed=1):
    names = feature_names(with_alignment)
    rng = numpy.random.default_rng(seed)
    return LogisticModel(names, rng.normal(size=len(names)).tolist(), (rng.random(len(names)) + 0.5).tolist(),
                         rng.normal(size=len(names)).tolist(), 0.3)


def test_design_matrix_is_order_free_and_complete():
    forward, backward = random_probs(5), random_probs(5)
    align = RNG.integers(0, 2, size=(5, len(FEATURE_NAMES))).astype(numpy.float32)
    a = design_matrix(forward, backward, align)
    b = design_matrix(backward, forward, align)
    numpy.testing.assert_array_equal(a, b)
    assert a.shape == (5, len(feature_names(True))) == (5, 6 + len(FEATURE_NAMES) + len(INTERACTIONS))
    # The interaction columns are the alignment feature times the larger P(contradiction).
    c_max = numpy.maximum(forward[:, 2], backward[:, 2])
    k = feature_names(True).index("c_max*subject_different")
    numpy.testing.assert_allclose(a[:, k], align[:, FEATURE_NAMES.index("subject_different")] * c_max, rtol=1e-6)
    # c_max is a logit.
    numpy.testing.assert_allclose(a[:, 0], numpy.log(c_max / (1 - c_max)), rtol=1e-5)
    assert design_matrix(forward, backward, None).shape == (5, 6)


def test_logistic_model_is_the_standardised_sigmoid():
    model = LogisticModel(["a", "b"], [1.0, -1.0], [2.0, 0.5], [0.5, -2.0], 0.25)
    x = numpy.array([[3.0, 0.0], [1.0, -1.0]])
    z = numpy.array([0.5 * (3 - 1) / 2 - 2.0 * (0 + 1) / 0.5 + 0.25, 0.25])
    numpy.testing.assert_allclose(model(x), 1 / (1 + numpy.exp(-z)), rtol=1e-6)


def test_pair_score_model_round_trip_and_choice_of_model(tmp_path):
    scorer = PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.37, info={"x": 1})
    scorer.to_disk(tmp_path / "ps.json")
    loaded = PairScoreModel.from_disk(tmp_path / "ps.json")
    forward, backward = random_probs(4), random_probs(4)
    align = RNG.integers(0, 2, size=(4, len(FEATURE_NAMES))).astype(numpy.float32)
    numpy.testing.assert_array_equal(loaded(forward, backward, align), scorer(forward, backward, align))
    assert loaded.threshold == 0.37 and loaded.info == {"x": 1}
    # Without alignment features, the NLI-only model scores.
    expected = scorer.nli_only(design_matrix(forward, backward, None))
    numpy.testing.assert_array_equal(loaded(forward, backward, None), expected)
    assert len(loaded(forward[:0], backward[:0], None)) == 0


def test_cascade_settings_round_trip_and_old_files_keep_them_in_info(tmp_path):
    uniform = numpy.linspace(0, 1, 1001).tolist()
    every, cascade = DocumentThreshold(uniform, alpha=0.3, floor=0.0), DocumentThreshold(uniform, alpha=0.3, floor=0.0, max_pairs=2)
    settings = {"rescore_top_k": 8, "rescore_top_share": 0.125, "rescore_similar_k": 4}
    scorer = PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.5, cascade_settings=settings,
                            document_thresholds={"full": every, "nli_only": every, "cascade": cascade})
    scorer.to_disk(tmp_path / "ps.json")
    data = json.loads((tmp_path / "ps.json").read_text(encoding="utf8"))
    assert data["cascade_settings"] == settings
    loaded = PairScoreModel.from_disk(tmp_path / "ps.json")
    assert loaded.cascade_settings == settings
    assert loaded.document_threshold(6, cascade=settings) == cascade(6) < every(6) == loaded.document_threshold(6)
    # written before the field: the settings were in info["cascade_threshold"]["cascade"]; and before
    # the share of a long Doc's pairs: a fixed top k, share 0
    del data["cascade_settings"]
    fixed_k = {"rescore_top_k": 8, "rescore_similar_k": 4}
    data["info"] = {"cascade_threshold": {"cascade": fixed_k}}
    old = PairScoreModel.from_dict(data)
    assert old.cascade_settings == {**fixed_k, "rescore_top_share": 0.0}
    assert old.document_threshold(6, cascade=old.cascade_settings) == cascade(6)
    assert old.document_threshold(6, cascade=settings) == every(6)
    # a "cascade" rule without the settings it was fitted for never applies
    del data["info"]
    assert PairScoreModel.from_dict(data).document_threshold(6, cascade=settings) == every(6)


def test_mismatched_features_are_refused():
    bad = LogisticModel(["c_max"], [0.0], [1.0], [1.0], 0.0)
    with pytest.raises(ValueError, match="E191"):
        PairScoreModel(bad, random_model(False), threshold=0.5)


def test_a_scorer_fitted_before_a_feature_was_added_reads_its_own_columns():
    """A pair scorer names its columns: one fitted without some alignment features (an
    older version's) scores with the columns it knows, whatever else the design matrix has."""
    names = feature_names(True)
    dropped = {FEATURE_NAMES[-1], f"c_max*{FEATURE_NAMES[-1]}", FEATURE_NAMES[2], f"c_max*{FEATURE_NAMES[2]}"}
    kept = [name for name in names if name not in dropped]
    rng = numpy.random.default_rng(3)
    old = LogisticModel(kept, rng.normal(size=len(kept)).tolist(), (rng.random(len(kept)) + 0.5).tolist(),
                        rng.normal(size=len(kept)).tolist(), -0.2)
    scorer = PairScoreModel(old, random_model(False), threshold=0.5)
    forward, backward = random_probs(6), random_probs(6)
    align = RNG.integers(0, 2, size=(6, len(FEATURE_NAMES))).astype(numpy.float32)
    full = design_matrix(forward, backward, align)
    own = full[:, [names.index(name) for name in kept]]
    z = ((own - old.mean) / old.scale) @ old.coef + old.intercept
    numpy.testing.assert_allclose(scorer(forward, backward, align), 1 / (1 + numpy.exp(-z)), rtol=1e-5)
    numpy.testing.assert_array_equal(old(own), old(full))
    # the dropped features do not move its score
    changed = align.copy()
    changed[:, [-1, 2]] = 1 - changed[:, [-1, 2]]
    numpy.testing.assert_array_equal(scorer(forward, backward, changed), scorer(forward, backward, align))
    with pytest.raises(ValueError, match="E251"):
        old(full[:, :-1])
    unknown = LogisticModel(kept + ["made_up"], [0.0] * (len(kept) + 1), [1.0] * (len(kept) + 1), [0.0] * (len(kept) + 1), 0.0)
    with pytest.raises(ValueError, match="E191"):
        PairScoreModel(unknown, random_model(False), threshold=0.5)
    no_nli = LogisticModel(kept[1:], [0.0] * (len(kept) - 1), [1.0] * (len(kept) - 1), [0.0] * (len(kept) - 1), 0.0)
    with pytest.raises(ValueError, match="E191"):
        PairScoreModel(no_nli, random_model(False), threshold=0.5)


def test_missing_pair_scorer_names_the_way_out(tmp_path):
    with pytest.raises(ValueError, match="E192.*fit_pair_scorer"):
        find_pair_scorer(tmp_path, model_name="my-model")
    with pytest.raises(ValueError, match="E192"):
        find_pair_scorer(None, model_name="org/hub-model")


TEXT = "The committee approved the budget on Monday. The budget was rejected by the committee. A man is playing a guitar."
SWAPPED = "The budget was rejected by the committee. The committee approved the budget on Monday. A man is playing a guitar."


def detector_nlp(tiny_nli, **config):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_detector", config={"model": {"model": tiny_nli, "device": "cpu"}, **config})
    return nlp


def test_learned_score_is_symmetric_and_computed_as_fitted(tiny_nli, tmp_path):
    path = tmp_path / "ps.json"
    scorer = PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.0)
    scorer.to_disk(path)
    nlp = detector_nlp(tiny_nli, pair_scorer=str(path))
    a, b = nlp(TEXT), nlp(SWAPPED)
    by_text = lambda doc: {frozenset(u["text"] for u in f["units"]): f["score"] for f in doc._.contradictions}  # noqa: E731
    assert by_text(a) == pytest.approx(by_text(b), abs=1e-6)
    assert len(by_text(a)) == 3
    # The score is the fitted model on the backend's probabilities and the alignment features.
    from spacy_inconsistency.alignment import facts_of_texts, pair_features

    backend = NLIBackend(tiny_nli, device="cpu")
    s1, s2 = "The committee approved the budget on Monday.", "The budget was rejected by the committee."
    probs = backend.predict([(s1, s2), (s2, s1)])
    forward = numpy.array([[probs[k][0] for k in ("entailment", "neutral", "contradiction")]])
    backward = numpy.array([[probs[k][1] for k in ("entailment", "neutral", "contradiction")]])
    f1, f2 = facts_of_texts([s1, s2])
    expected = scorer(forward, backward, pair_features(f1, f2)[None, :])[0]
    assert by_text(a)[frozenset((s1, s2))] == pytest.approx(float(expected), abs=1e-5)
    # The Doc's score: the noisy-OR of its three highest pair scores (here all three pairs).
    assert a._.inconsistency_score == pytest.approx(1 - numpy.prod([1 - v for v in by_text(a).values()]), abs=1e-6)


def test_the_doc_score_is_the_noisy_or_of_its_top_k_pairs(tiny_nli, tmp_path):
    path = tmp_path / "ps.json"
    PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.0).to_disk(path)
    pair_scores = sorted((f["score"] for f in detector_nlp(tiny_nli, pair_scorer=str(path))(TEXT)._.contradictions),
                         reverse=True)
    assert len(pair_scores) == 3 and pair_scores[1] > 1e-3
    for k, want in ((1, pair_scores[0]), (2, 1 - (1 - pair_scores[0]) * (1 - pair_scores[1]))):
        doc = detector_nlp(tiny_nli, pair_scorer=str(path), doc_score_top_k=k)(TEXT)
        assert doc._.inconsistency_score == pytest.approx(want, abs=1e-7)
    # More pairs never lower it, and it stays a probability.
    scores = [detector_nlp(tiny_nli, pair_scorer=str(path), doc_score_top_k=k)(TEXT)._.inconsistency_score
              for k in (1, 2, 3, 10)]
    assert scores == sorted(scores) and scores[-1] == pytest.approx(scores[2]) and scores[-1] <= 1.0
    with pytest.raises(ValueError, match="doc_score_top_k"):
        detector_nlp(tiny_nli, doc_score_top_k=0)


def test_explain_splits_the_log_odds_by_alignment_feature():
    scorer = PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.5)
    forward, backward = random_probs(4), random_probs(4)
    align = numpy.zeros((4, len(FEATURE_NAMES)), dtype=numpy.float32)
    align[0, FEATURE_NAMES.index("negation_mismatch")] = 1.0
    align[0, FEATURE_NAMES.index("overlap")] = 0.5
    align[1, FEATURE_NAMES.index("subject_different")] = 1.0
    explained = scorer.explain(forward, backward, align)
    scores = scorer(forward, backward, align)
    without = scorer(forward, backward, numpy.zeros_like(align))
    full = scorer.full
    c_max = numpy.maximum(forward[:, 2], backward[:, 2])
    for k, row in enumerate(explained):
        assert row["nli"]["contradiction"] == pytest.approx([forward[k, 2], backward[k, 2]], abs=1e-7)
        assert row["nli"]["entailment"] == pytest.approx([forward[k, 0], backward[k, 0]], abs=1e-7)
        # The shares and the score without any feature add up to the score itself.
        logit = numpy.log(scores[k] / (1 - scores[k]))
        assert logit - sum(row["alignment"].values()) == pytest.approx(
            numpy.log(row["without_alignment"] / (1 - row["without_alignment"])), abs=1e-4)
        assert row["without_alignment"] == pytest.approx(float(without[k]), abs=1e-6)
    # A feature's share is its own weight plus its interaction's, each times its value over its scale.
    names = full.features
    own, inter = names.index("negation_mismatch"), names.index("c_max*negation_mismatch")
    want = full.coef[own] / full.scale[own] + full.coef[inter] * c_max[0] / full.scale[inter]
    assert explained[0]["alignment"]["negation_mismatch"] == pytest.approx(want, rel=1e-5)
    assert set(explained[0]["alignment"]) == {"negation_mismatch", "overlap"}
    assert list(explained[0]["alignment"].values()) == sorted(explained[0]["alignment"].values(), key=lambda v: -abs(v))
    assert set(explained[1]["alignment"]) == {"subject_different"}
    # No feature fired: nothing to split, and the score is the one without alignment.
    assert explained[2]["alignment"] == {} and explained[2]["without_alignment"] == pytest.approx(float(scores[2]), abs=1e-6)
    # The NLI-only model explains nothing but the probabilities.
    assert set(scorer.explain(forward, backward, None)[0]) == {"nli"}


def test_gated_features_without_weight_are_left_out_of_the_explanation(tmp_path):
    path = write_min_pair_scorer(tmp_path / "ps.json")
    scorer = PairScoreModel.from_disk(path)
    forward, backward = random_probs(1), random_probs(1)
    (row,) = scorer.explain(forward, backward, numpy.ones((1, len(FEATURE_NAMES)), dtype=numpy.float32))
    assert row["alignment"] == {}
    assert row["without_alignment"] == pytest.approx(float(min(forward[0, 2], backward[0, 2])), abs=1e-5)


def test_findings_carry_the_evidence_of_their_score(tiny_nli, tmp_path):
    path = tmp_path / "ps.json"
    PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.0).to_disk(path)
    doc = detector_nlp(tiny_nli, pair_scorer=str(path))(TEXT)
    assert doc._.contradictions
    for finding in doc._.contradictions:
        evidence = finding["evidence"]
        assert evidence["nli"]["contradiction"] == pytest.approx(finding["directions"], abs=1e-6)
        assert sum(sum(p) for p in zip(*evidence["nli"].values())) == pytest.approx(2.0, abs=1e-4)
        logit = numpy.log(finding["score"] / (1 - finding["score"]))
        without = evidence["without_alignment"]
        assert logit - sum(evidence["alignment"].values()) == pytest.approx(numpy.log(without / (1 - without)), abs=1e-3)
    # The one result format carries it too; a fixed rule has none to give.
    assert [f["evidence"] for f in doc._.inconsistencies] == [f["evidence"] for f in doc._.contradictions]
    fixed = detector_nlp(tiny_nli, aggregation="max", threshold=0.0)(TEXT)
    assert fixed._.contradictions and all("evidence" not in f for f in fixed._.contradictions)
    assert all("evidence" not in f for f in fixed._.inconsistencies)
    # Without alignment (or in another language) the NLI-only score explains the probabilities only.
    off = detector_nlp(tiny_nli, pair_scorer=str(path), alignment=False)(TEXT)
    assert off._.contradictions and all(set(f["evidence"]) == {"nli"} for f in off._.contradictions)


def test_threshold_comes_from_the_scorer_unless_set(tiny_nli, tmp_path):
    path = write_min_pair_scorer(tmp_path / "ps.json", threshold=0.99)
    nlp = detector_nlp(tiny_nli, pair_scorer=str(path))
    detector = nlp.get_pipe("inconsistency_detector").pairwise
    assert detector.threshold == 0.99
    assert detector_nlp(tiny_nli, pair_scorer=str(path), threshold=0.2).get_pipe("inconsistency_detector").pairwise.threshold == 0.2
    assert detector_nlp(tiny_nli, aggregation="max").get_pipe("inconsistency_detector").pairwise.threshold == 0.5


def test_learned_score_with_the_min_scorer_equals_the_min_rule(tiny_nli):
    # The tiny model's pair_scorer.json (conftest) weighs logit(min P(c)) only.
    learned = detector_nlp(tiny_nli, threshold=0.0)(TEXT)._.contradictions
    rule = detector_nlp(tiny_nli, threshold=0.0, aggregation="min")(TEXT)._.contradictions
    assert [f["units"] for f in learned] == [f["units"] for f in rule]
    assert [f["score"] for f in learned] == pytest.approx([f["score"] for f in rule], abs=1e-5)


def test_other_languages_use_the_nli_only_model(tiny_nli, tmp_path):
    path = tmp_path / "ps.json"
    PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.0).to_disk(path)
    nlp = spacy.blank("de")
    nlp.add_pipe("inconsistency_detector", config={"model": {"model": tiny_nli, "device": "cpu"}, "pair_scorer": str(path)})
    doc = nlp("Der Ausschuss hat das Budget angenommen. Das Budget wurde abgelehnt.")
    (finding,) = doc._.contradictions
    scorer = PairScoreModel.from_disk(path)
    backend = NLIBackend(tiny_nli, device="cpu")
    s1, s2 = (u["text"] for u in finding["units"])
    probs = backend.predict([(s1, s2), (s2, s1)])
    forward = numpy.array([[probs[k][0] for k in ("entailment", "neutral", "contradiction")]])
    backward = numpy.array([[probs[k][1] for k in ("entailment", "neutral", "contradiction")]])
    assert finding["score"] == pytest.approx(float(scorer(forward, backward, None)[0]), abs=1e-5)


def test_learned_settings_survive_serialization(tiny_nli, tmp_path):
    path = write_min_pair_scorer(tmp_path / "ps.json", threshold=0.42)
    nlp = detector_nlp(tiny_nli, pair_scorer=str(path))
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    detector = loaded.get_pipe("inconsistency_detector").pairwise
    assert detector.cfg["pair_scorer"] == str(path) and detector.threshold == 0.42
    assert json.loads((tmp_path / "pipe" / "inconsistency_detector" / "cfg").read_text())["aggregation"] == "learned"


def test_alignment_off_uses_the_nli_only_model(tiny_nli, tmp_path):
    path = tmp_path / "ps.json"
    PairScoreModel(random_model(True), random_model(False, seed=2), threshold=0.0).to_disk(path)
    on = detector_nlp(tiny_nli, pair_scorer=str(path))(TEXT)._.contradictions
    off = detector_nlp(tiny_nli, pair_scorer=str(path), alignment=False)(TEXT)._.contradictions
    german = spacy.blank("de")
    german.add_pipe("inconsistency_detector", config={"model": {"model": tiny_nli, "device": "cpu"}, "pair_scorer": str(path)})
    by_pair = lambda found: {frozenset(u["text"] for u in f["units"]): f["score"] for f in found}  # noqa: E731
    # Same pairs, other scores: off is what the NLI-only model gives (as for a language without alignment).
    assert by_pair(on).keys() == by_pair(off).keys()
    assert by_pair(on) != pytest.approx(by_pair(off))
    assert by_pair(off) == pytest.approx(by_pair(german(TEXT)._.contradictions), abs=1e-6)


def test_document_threshold_grows_with_the_number_of_pairs():
    # Null pair scores uniform on [0, 1]: F(s) = s, so the threshold is (1 - alpha) ** (1 / k).
    rule = DocumentThreshold(numpy.linspace(0, 1, 1001).tolist(), alpha=0.1, floor=0.0)
    for k in (1, 10, 100):
        assert rule(k) == pytest.approx(0.9 ** (1 / k), abs=1e-3)
    assert rule(1) < rule(10) < rule(100) < rule(10_000) <= 1.0
    # No consistent pair measured above 0.9: no Doc, however long, needs more than that.
    capped = DocumentThreshold(numpy.minimum(numpy.linspace(0, 1, 1001) / 0.9, 0.999).tolist(), alpha=0.1, floor=0.0)
    assert capped(10**6) == pytest.approx(0.9, abs=2e-3)
    assert DocumentThreshold(numpy.linspace(0, 1, 1001).tolist(), alpha=0.1, floor=0.95)(1) == 0.95
    # The smallest grid score at which a consistent document of k pairs stays under it with chance 1 - alpha.
    assert rule(30) ** 30 >= 0.9 > (rule(30) - 0.001) ** 30
    # A cap on the pairs counted: from max_pairs on, the threshold stays; round trip keeps it.
    capped_k = DocumentThreshold(numpy.linspace(0, 1, 1001).tolist(), alpha=0.1, floor=0.0, max_pairs=8)
    assert capped_k(3) == rule(3) and capped_k(8) == capped_k(100) == rule(8) < rule(100)
    assert DocumentThreshold.from_dict(capped_k.to_dict())(100) == rule(8)
    assert "max_pairs" not in rule.to_dict() and DocumentThreshold.from_dict(rule.to_dict())(100) == rule(100)
    with pytest.raises(ValueError, match="E006"):
        DocumentThreshold([0.0, 1.0], alpha=0.1, floor=0.0, max_pairs=0)
    with pytest.raises(ValueError, match="E006"):
        DocumentThreshold([0.5], alpha=0.1, floor=0.0)
    with pytest.raises(ValueError, match="E006"):
        DocumentThreshold([0.0, 1.0], alpha=1.5, floor=0.0)


def test_detector_uses_the_document_threshold_unless_one_is_set(tiny_nli, tmp_path):
    path = tmp_path / "ps.json"
    base = PairScoreModel.from_disk(write_min_pair_scorer(tmp_path / "min.json", threshold=0.5))
    rule = DocumentThreshold(numpy.linspace(0, 1, 1001).tolist(), alpha=0.5, floor=0.0)
    PairScoreModel(base.full, base.nli_only, threshold=0.5, document_thresholds={"full": rule, "nli_only": rule}).to_disk(path)
    loaded = PairScoreModel.from_disk(path)
    assert loaded.document_threshold(6) == pytest.approx(rule(6)) and loaded.document_threshold(6, alignment=False) == pytest.approx(rule(6))
    assert base.document_threshold(6) == 0.5  # none fitted: the pair threshold
    nlp = detector_nlp(tiny_nli, pair_scorer=str(path))
    detector = nlp.get_pipe("inconsistency_detector").pairwise
    all_scores = detector_nlp(tiny_nli, pair_scorer=str(path), threshold=0.0)(TEXT)._.contradictions
    assert len(all_scores) == 3  # three units with content: three pairs
    cut = detector.threshold_for(3)
    assert cut == pytest.approx(0.5 ** (1 / 3), abs=1e-3)
    assert [f["score"] for f in nlp(TEXT)._.contradictions] == [f["score"] for f in all_scores if f["score"] >= cut]
    assert detector_nlp(tiny_nli, pair_scorer=str(path), threshold=0.2).get_pipe("inconsistency_detector").pairwise.threshold_for(3) == 0.2


def test_shipped_second_stage_pair_score_keeps_its_fold_models_and_an_out_of_fold_cascade_rule():
    """`calibrate_cascade.py` scores each dev record with the fold model that did not see it:
    the five folds hold every dev record of the suite out exactly once, and each fold model is
    the shipped model's form (same features, standardisation, gated columns at zero)."""
    from conftest import ROOT
    from spacy_inconsistency import defaults
    from spacy_inconsistency.corpora.behaviour import read_behaviour_suite

    scorer = PairScoreModel.from_disk(ROOT / "spacy_inconsistency" / "models" / "nli-mpnet-lora" / "pair_scorer.json")
    folds = scorer.info["out_of_fold"]
    pattern = scorer.info.get("suite_pattern", "dev_*.jsonl")
    dev = sorted(r["id"] for r in read_behaviour_suite(ROOT / "tests" / "behaviour", pattern))
    for key, shipped in (("full", scorer.full), ("nli_only", scorer.nli_only)):
        assert len(folds[key]) == 5
        assert sorted(rid for fold in folds[key] for rid in fold["dev_records"]) == dev
        for fold in folds[key]:
            model = LogisticModel.from_dict(fold["model"])
            assert model.features == shipped.features and numpy.array_equal(model.mean, shipped.mean)
            assert numpy.all(model.coef[shipped.coef == 0.0] == 0.0)
            assert not numpy.allclose(model.coef, shipped.coef)
    assert scorer.info["cascade_threshold"]["dev_scores"] == "out of fold"
    # fitted for the default cascade (written before `rescore_top_share`, so for its 0)
    assert scorer.cascade_settings == {"rescore_top_k": defaults.RESCORE_TOP_K,
                                       "rescore_top_share": defaults.RESCORE_TOP_SHARE,
                                       "rescore_similar_k": defaults.RESCORE_SIMILAR_K}
