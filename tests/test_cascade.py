"""The cascade: a second NLI model (`rescorer`) re-scores each Doc's top pairs of the first."""
import math
import warnings

import numpy
import pytest
import spacy

from conftest import PARAGRAPH, build_tiny_nli, write_min_pair_scorer
from spacy_inconsistency import defaults

BACKEND = "spacy-inconsistency.NLIBackend.v1"
RESCORER_THRESHOLD = 0.42


@pytest.fixture(scope="module")
def rescorer_dir(tmp_path_factory) -> str:
    # Another random model than `tiny_nli` (another seed), with the `min` pair score.
    path = build_tiny_nli(tmp_path_factory.mktemp("tiny-rescorer"), {0: "entailment", 1: "neutral", 2: "contradiction"},
                          seed=1)
    # A threshold of its own, so that a test can tell whose threshold the cascade uses.
    write_min_pair_scorer(path / "pair_scorer.json", threshold=RESCORER_THRESHOLD)
    return str(path)


def detector(model: str, rescorer=None, **settings):
    nlp = spacy.blank("en")
    # float32 on every machine ("auto" is bf16 on CPUs with native bf16): these tests are about the cascade.
    config = {"model": {"@misc": BACKEND, "model": model, "dtype": "float32"}, "alignment": False, **settings}
    if rescorer is not None:
        config["rescorer"] = {"@misc": BACKEND, "model": rescorer, "dtype": "float32"}
        # These tests are about the first model's top pairs; the similar pairs and the share of a
        # long Doc's pairs have their own.
        config.setdefault("rescore_similar_k", 0)
        config.setdefault("rescore_top_share", 0.0)
    return nlp, nlp.add_pipe("inconsistency_detector", config=config)


def scores(nlp, pipe, text):
    doc = nlp.make_doc(text)
    pipe.segment([doc])
    return pipe.predict([doc])[0]


@pytest.mark.parametrize("k", [1, 3, 100])
def test_rescorer_scores_the_first_models_top_pairs(tiny_nli, rescorer_dir, k):
    first = scores(*detector(tiny_nli), PARAGRAPH)
    alone = scores(*detector(rescorer_dir), PARAGRAPH)
    # Both orders of every pair, as `first` reads them (`reverse_top_k` below).
    cascade = scores(*detector(tiny_nli, rescorer_dir, rescore_top_k=k, reverse_top_k=None, rescore_reverse_top_k=None),
                     PARAGRAPH)
    assert numpy.array_equal(first.pairs, cascade.pairs) and len(first.pairs) > 3
    top = numpy.argsort(-first.score, kind="stable")[:k]
    want = numpy.zeros_like(alone.score)
    want[top] = alone.score[top]
    assert numpy.allclose(cascade.score, want, atol=1e-5)
    assert numpy.allclose(cascade.forward[top], alone.forward[top], atol=1e-5)
    if k >= len(first.pairs):  # every pair re-scored: the rescorer alone
        assert numpy.allclose(cascade.score, alone.score, atol=1e-5)


def test_the_rescorer_reads_a_share_of_a_long_docs_pairs(tiny_nli, rescorer_dir):
    first = scores(*detector(tiny_nli), PARAGRAPH)
    alone = scores(*detector(rescorer_dir), PARAGRAPH)
    n = len(first.pairs)
    assert n > 40
    order = numpy.argsort(-first.score, kind="stable")
    # (top k, share, pairs read of this Doc's n, of a Doc of 8 pairs); at most 32 unless k is more
    for k, share, reads, of_8 in ((1, 0.125, math.ceil(n / 8), 1), (20, 0.125, 20, 20), (1, 1.0, 32, 8),
                                  (40, 1.0, 40, 40), (3, 0.0, 3, 3)):
        nlp, pipe = detector(tiny_nli, rescorer_dir, rescore_top_k=k, rescore_top_share=share, reverse_top_k=None,
                             rescore_reverse_top_k=None)
        assert pipe.pairwise.rescore_k(n) == reads
        assert pipe.pairwise.rescore_k(8) == of_8
        cascade = scores(nlp, pipe, PARAGRAPH)
        want = numpy.zeros_like(alone.score)
        want[order[:reads]] = alone.score[order[:reads]]
        assert numpy.allclose(cascade.score, want, atol=1e-5), (k, share)
    with pytest.raises(ValueError, match="rescore_top_share"):
        detector(tiny_nli, rescorer_dir, rescore_top_share=1.5)


def test_cascade_flags_with_the_rescorers_threshold(tiny_nli, rescorer_dir):
    nlp, pipe = detector(tiny_nli, rescorer_dir, rescore_top_k=4)
    _, alone = detector(rescorer_dir)
    _, first = detector(tiny_nli)
    doc = nlp(PARAGRAPH)
    cascade = scores(nlp, pipe, PARAGRAPH)
    threshold = alone.pairwise.threshold_for(len(cascade.pairs))
    assert threshold == pytest.approx(RESCORER_THRESHOLD)
    assert first.pairwise.threshold_for(len(cascade.pairs)) != pytest.approx(threshold)
    assert pipe.pairwise.threshold_for(len(cascade.pairs)) == threshold
    assert len(doc._.contradictions) == int((cascade.score >= threshold).sum()) <= 4
    # The Doc's score: the noisy-OR of the three highest (the unread pairs score 0).
    top3 = numpy.sort(cascade.score)[::-1][:3].astype(float)
    assert top3[1] > 0 and doc._.inconsistency_score == pytest.approx(1 - numpy.prod(1 - top3), abs=1e-6)


def test_cascade_uses_the_rescorers_cascade_threshold_fitted_for_its_top_k(tiny_nli, tmp_path):
    from spacy_inconsistency.pair_score import DocumentThreshold, PairScoreModel

    path = tmp_path / "rescorer"
    build_tiny_nli(path, {0: "entailment", 1: "neutral", 2: "contradiction"}, seed=1)
    uniform = numpy.linspace(0, 1, 1001).tolist()
    every_pair = DocumentThreshold(uniform, alpha=0.3, floor=0.0)
    cascade = DocumentThreshold(uniform, alpha=0.3, floor=0.0, max_pairs=2)
    base = PairScoreModel.from_disk(write_min_pair_scorer(tmp_path / "min.json"))
    PairScoreModel(base.full, base.nli_only, threshold=0.5,
                   document_thresholds={"full": every_pair, "nli_only": every_pair, "cascade": cascade},
                   cascade_settings={"rescore_top_k": 4, "rescore_similar_k": 0},
                   ).to_disk(path / "pair_scorer.json")
    n = 6
    assert cascade(n) == every_pair(2) < every_pair(n)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, fitted_for = detector(tiny_nli, str(path), rescore_top_k=4, alignment=True, cascade_threshold=True)
    assert not [w for w in caught if "W145" in str(w.message)]  # the settings it was fitted for: no warning
    assert fitted_for.pairwise.threshold_for(n) == cascade(n)
    # not asked for (the default): the rule for every pair
    _, default = detector(tiny_nli, str(path), rescore_top_k=4, alignment=True)
    assert default.pairwise.threshold_for(n) == every_pair(n)
    # Another top k, similar k or share of long Docs' pairs (said: W145), no alignment (the NLI-only
    # score), or no rescorer: the rule for every pair.
    for other in ({"rescore_top_k": 3}, {"rescore_similar_k": 2}, {"rescore_top_share": 0.125}):
        with pytest.warns(UserWarning, match="W145"):
            _, other_settings = detector(tiny_nli, str(path), **{"rescore_top_k": 4, "alignment": True,
                                                                "cascade_threshold": True, **other})
        assert other_settings.pairwise.threshold_for(n) == every_pair(n)
    _, nli_only = detector(tiny_nli, str(path), rescore_top_k=4, cascade_threshold=True)
    assert nli_only.pairwise.threshold_for(n) == every_pair(n)
    _, alone = detector(str(path), alignment=True, cascade_threshold=True)
    assert alone.pairwise.threshold_for(n) == every_pair(n)


def test_similar_pairs_are_the_most_alike_outside_the_top_and_share_a_word():
    from spacy_inconsistency.candidates import all_pairs
    from spacy_inconsistency.components.pairwise import similar_pairs
    from spacy_inconsistency.segment import Segmenter

    text = ("The orchard holds 1,200 apple trees. The harvest starts in September. Rain fell in spring. "
            "The village hall was repainted. Pickers come from three villages. "
            "Her priority is the orchard's 850 apple trees. Apple prices rose sharply.")
    doc = Segmenter()(spacy.blank("en").make_doc(text))
    units = list(doc.spans["inconsistency_units"])
    pairs = all_pairs(len(units))
    assert len(units) == 7 and len(pairs) == 21

    def at(i, j):
        return int(numpy.flatnonzero((pairs[:, 0] == i) & (pairs[:, 1] == j))[0])

    none = numpy.zeros(0, dtype=numpy.int64)
    # Units 0 and 5 share "orchard", "apple", "trees" (cosine 1); unit 6 shares only "apple" with
    # each (0.43; the tie keeps the earlier pair). "village(s)" differ without lemmas: never chosen.
    assert similar_pairs(units, pairs, none, 3).tolist() == [at(0, 5), at(0, 6), at(5, 6)]
    assert similar_pairs(units, pairs, none, 2).tolist() == [at(0, 5), at(0, 6)]
    assert similar_pairs(units, pairs, numpy.array([at(0, 5)]), 3).tolist() == [at(0, 6), at(5, 6)]
    assert similar_pairs(units, pairs, none, 21).tolist() == [at(0, 5), at(0, 6), at(5, 6)]
    assert similar_pairs(units, pairs, none, 0).tolist() == []


def test_cascade_also_reads_the_similar_pairs(tiny_nli, rescorer_dir):
    from spacy_inconsistency.components.pairwise import similar_pairs

    first = scores(*detector(tiny_nli), PARAGRAPH)
    alone = scores(*detector(rescorer_dir), PARAGRAPH)
    cascade = scores(*detector(tiny_nli, rescorer_dir, rescore_top_k=2, rescore_similar_k=3, reverse_top_k=None,
                               rescore_reverse_top_k=None), PARAGRAPH)
    top = numpy.argsort(-first.score, kind="stable")[:2]
    extra = similar_pairs(first.units, first.pairs, top, 3)
    # The paragraph's alike pairs ("committee"/"budget", "minister"/"taxes", "playing") lie outside the top 2.
    assert len(extra) == 3 and not set(extra.tolist()) & set(top.tolist())
    assert sorted(cascade.rescored.tolist()) == sorted(top.tolist() + extra.tolist())
    want = numpy.zeros_like(alone.score)
    want[cascade.rescored] = alone.score[cascade.rescored]
    assert numpy.allclose(cascade.score, want, atol=1e-5)
    with pytest.raises(ValueError, match="rescore_similar_k"):
        detector(tiny_nli, rescorer_dir, rescore_similar_k=-1)


@pytest.mark.parametrize("rule", ["min", "max"])
def test_cascade_with_a_fixed_rule_applies_it_to_the_rescorers_probabilities(tiny_nli, rescorer_dir, rule):
    first = scores(*detector(tiny_nli, aggregation=rule), PARAGRAPH)
    nlp, pipe = detector(tiny_nli, rescorer_dir, aggregation=rule, rescore_top_k=3, reverse_top_k=None)
    cascade = scores(nlp, pipe, PARAGRAPH)
    alone = scores(*detector(rescorer_dir, aggregation=rule), PARAGRAPH)
    top = numpy.argsort(-first.score, kind="stable")[:3]
    both = numpy.stack([alone.forward[top], alone.backward[top]])
    want = numpy.zeros_like(cascade.score)
    want[top] = both.min(axis=0) if rule == "min" else both.max(axis=0)
    assert numpy.allclose(cascade.score, want, atol=1e-5)
    assert pipe.pairwise.threshold_for(len(cascade.pairs)) == 0.5  # the rule's threshold, not the rescorer's


def test_the_default_rescorer_goes_with_the_embedded_model_only(tiny_nli, monkeypatch):
    from spacy_inconsistency.components.pairwise import DEFAULT_RESCORER, PairedRescorer

    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("inconsistency_detector", config={"model": {"@misc": BACKEND, "model": tiny_nli}})
    assert pipe.pairwise.rescorer is None  # another first model runs alone
    assert nlp.config["components"]["inconsistency_detector"]["rescorer"] == DEFAULT_RESCORER
    paired = PairedRescorer(model=tiny_nli, first=tiny_nli)
    first = spacy.registry.resolve({"m": {"@misc": BACKEND, "model": tiny_nli, "device": "cpu", "dtype": "bfloat16",
                                          "max_batch_size": 7}})["m"]
    second = paired.resolve(first)
    assert second.name == tiny_nli and second.dtype_name == "bfloat16" and second.max_batch_size == 7
    # On CPU the second stage's batches are small (its few pairs vary in length); others as the first's.
    first = spacy.registry.resolve({"m": {"@misc": BACKEND, "model": tiny_nli, "device": "cpu", "max_batch_size": 64,
                                          "max_batch_tokens": 1000}})["m"]
    second = paired.resolve(first)
    assert second.max_batch_size == 16 and second.max_batch_tokens == 1000
    assert PairedRescorer(model=tiny_nli, first=tiny_nli, cpu_max_batch_size=4).resolve(first).max_batch_size == 4
    # "auto" may give the first model bf16; the second stage, which decides, keeps float32
    # weights and its residual stream ("mixed": only the matrix products in bf16).
    import spacy_inconsistency.backends.nli as nli

    monkeypatch.setattr(nli, "cpu_has_native_bf16", lambda: True)
    first = spacy.registry.resolve({"m": {"@misc": BACKEND, "model": tiny_nli, "device": "cpu"}})["m"]
    second = paired.resolve(first)
    assert first.dtype_name == "bfloat16" and second.dtype_name == "mixed"
    # The same rule for a rescorer named on the command line.
    from spacy_inconsistency.cli import rescorer_config

    assert rescorer_config(tiny_nli)["dtype"] == "mixed"
    assert rescorer_config(tiny_nli, dtype="bfloat16")["dtype"] == "bfloat16"
    # Without native bf16 both stages run in float32.
    monkeypatch.setattr(nli, "cpu_has_native_bf16", lambda: False)
    first = spacy.registry.resolve({"m": {"@misc": BACKEND, "model": tiny_nli, "device": "cpu"}})["m"]
    assert first.dtype_name == "float32" and paired.resolve(first).dtype_name == "float32"
    assert rescorer_config(tiny_nli)["dtype"] == "float32"


def test_rescorer_settings_are_checked(tiny_nli, rescorer_dir, tmp_path):
    with pytest.raises(ValueError, match="E006"):
        detector(tiny_nli, rescorer_dir, rescore_top_k=0)
    with pytest.raises(ValueError, match=r"E220.*as its rescorer"):
        spacy.blank("en").add_pipe("inconsistency_detector", config={"rescorer": rescorer_dir})
    no_scorer = build_tiny_nli(tmp_path / "bare", {0: "entailment", 1: "neutral", 2: "contradiction"}, seed=2)
    (no_scorer / "pair_scorer.json").unlink()
    with pytest.raises(ValueError, match="E193"):
        detector(tiny_nli, str(no_scorer))


def record_inputs(pipe):
    """The texts each stage's backend is called with, call by call."""
    inputs = {"first": [], "second": []}
    for key, backend in (("first", pipe.pairwise.model), ("second", pipe.pairwise.rescorer)):
        if backend is None:
            continue
        real = backend.predict
        backend.predict = lambda texts, real=real, key=key: inputs[key].append(list(texts)) or real(texts)
    return inputs


def test_one_direction_first_stage_ranks_by_the_text_order_direction(tiny_nli, rescorer_dir):
    """`first_stage_directions = 1`: the first model reads each pair once (the earlier unit
    as premise) and ranks by that direction; the rescorer still reads both."""
    first = scores(*detector(tiny_nli, aggregation="min"), PARAGRAPH)
    alone = scores(*detector(rescorer_dir, aggregation="min"), PARAGRAPH)
    nlp, pipe = detector(tiny_nli, rescorer_dir, aggregation="min", rescore_top_k=3, first_stage_directions=1)
    inputs = record_inputs(pipe)
    cascade = scores(nlp, pipe, PARAGRAPH)
    units = [u.text.strip() for u in cascade.units]
    assert inputs["first"] == [[(units[i], units[j]) for i, j in cascade.pairs.tolist()]]
    assert len(inputs["second"][0]) == 6  # 3 pairs, both ways
    top = numpy.argsort(-first.forward, kind="stable")[:3]
    want = numpy.zeros_like(cascade.score)
    want[top] = numpy.minimum(alone.forward[top], alone.backward[top])
    assert numpy.allclose(cascade.score, want, atol=1e-5)
    # Without a rescorer the first model decides, in both directions.
    single = scores(*detector(tiny_nli, aggregation="min", first_stage_directions=1), PARAGRAPH)
    assert numpy.allclose(single.score, first.score) and numpy.allclose(single.backward, first.backward)
    with pytest.raises(ValueError, match="E006.*first_stage_directions"):
        detector(tiny_nli, rescorer_dir, first_stage_directions=3)


def test_first_stage_reads_the_reverse_order_of_its_top_pairs_only(tiny_nli, rescorer_dir):
    """`reverse_top_k`: the first model reads every pair in text order, then the reverse
    order of the pairs that reading ranks highest; the cascade re-scores the top of that."""
    first = scores(*detector(tiny_nli, aggregation="min"), PARAGRAPH)
    alone = scores(*detector(rescorer_dir, aggregation="min"), PARAGRAPH)
    nlp, pipe = detector(tiny_nli, rescorer_dir, aggregation="min", rescore_top_k=2, reverse_top_k=5)
    inputs = record_inputs(pipe)
    cascade = scores(nlp, pipe, PARAGRAPH)
    units = [u.text.strip() for u in cascade.units]
    pairs = cascade.pairs.tolist()
    assert len(pairs) > 10
    # `min` of a direction with itself: the text-order ranking is P(c | earlier, later).
    reversed_ = numpy.argsort(-first.forward, kind="stable")[:5]
    assert inputs["first"] == [[(units[i], units[j]) for i, j in pairs],
                               [(units[pairs[k][1]], units[pairs[k][0]]) for k in reversed_]]
    backward = first.forward.copy()
    backward[reversed_] = first.backward[reversed_]
    top = numpy.argsort(-numpy.minimum(first.forward, backward), kind="stable")[:2]
    assert inputs["second"] == [[t for i, j in cascade.pairs[top].tolist() for t in
                                 ((units[i], units[j]), (units[j], units[i]))]]
    want = numpy.zeros_like(cascade.score)
    want[top] = numpy.minimum(alone.forward[top], alone.backward[top])
    assert numpy.allclose(cascade.score, want, atol=1e-5)
    # Never fewer reverse readings than pairs re-scored.
    nlp, pipe = detector(tiny_nli, rescorer_dir, aggregation="min", rescore_top_k=4, reverse_top_k=1)
    inputs = record_inputs(pipe)
    scores(nlp, pipe, PARAGRAPH)
    assert [len(call) for call in inputs["first"]] == [len(pairs), 4]
    # null: both orders of every pair in one call; without a rescorer the setting does nothing.
    for rescorer, k in ((rescorer_dir, None), (None, 5)):
        nlp, pipe = detector(tiny_nli, rescorer, aggregation="min", reverse_top_k=k)
        inputs = record_inputs(pipe)
        got = scores(nlp, pipe, PARAGRAPH)
        assert [len(call) for call in inputs["first"]] == [2 * len(pairs)]
        if rescorer is None:
            assert numpy.allclose(got.score, first.score) and numpy.allclose(got.backward, first.backward)
    for bad in (0, -3, 2.5, "8", True):  # the config's type check or the component's
        with pytest.raises(ValueError, match="reverse_top_k"):
            detector(tiny_nli, rescorer_dir, reverse_top_k=bad)


@pytest.mark.parametrize("threshold", [1.0, 0.0])
def test_rescorer_reads_the_reverse_order_of_its_top_pairs_and_of_findings(tiny_nli, rescorer_dir, threshold):
    """`rescore_reverse_top_k`: the rescorer reads its pairs in text order, the reverse order
    of the ones that reading ranks highest, then of any pair it would flag without it."""
    first = scores(*detector(tiny_nli, aggregation="min", reverse_top_k=None), PARAGRAPH)
    alone = scores(*detector(rescorer_dir, aggregation="min"), PARAGRAPH)
    nlp, pipe = detector(tiny_nli, rescorer_dir, aggregation="min", threshold=threshold, reverse_top_k=None,
                         rescore_top_k=6, rescore_reverse_top_k=2)
    inputs = record_inputs(pipe)
    cascade = scores(nlp, pipe, PARAGRAPH)
    units = [u.text.strip() for u in cascade.units]
    top = numpy.argsort(-first.score, kind="stable")[:6]
    pairs = cascade.pairs.tolist()
    reversed_ = top[numpy.argsort(-alone.forward[top], kind="stable")[:2]]  # `min` of a direction with itself
    calls = [[(units[pairs[k][0]], units[pairs[k][1]]) for k in top],
             [(units[pairs[k][1]], units[pairs[k][0]]) for k in reversed_]]
    want = numpy.zeros_like(cascade.score)
    want[top] = alone.forward[top]
    want[reversed_] = numpy.minimum(alone.forward[reversed_], alone.backward[reversed_])
    if threshold == 0.0:  # every pair would be flagged: the other 4 are read in reverse too
        rest = [k for k in top if k not in set(reversed_.tolist())]
        calls.append([(units[pairs[k][1]], units[pairs[k][0]]) for k in rest])
        want[top] = numpy.minimum(alone.forward[top], alone.backward[top])
    assert inputs["second"] == calls
    assert numpy.allclose(cascade.score, want, atol=1e-5)
    assert numpy.allclose(cascade.backward[reversed_], alone.backward[reversed_], atol=1e-5)
    found = [pairs.index([units.index(u["text"].strip()) for u in f["units"]]) for f in nlp(PARAGRAPH)._.contradictions]
    rescored = [k for k in found if k in set(top.tolist())]  # at threshold 0 the pairs scored 0 are found too
    assert len(rescored) == (6 if threshold == 0.0 else 0)
    for k in rescored:  # both directions read, not one taken for both
        assert cascade.forward[k] == pytest.approx(alone.forward[k], abs=1e-5)
        assert cascade.backward[k] == pytest.approx(alone.backward[k], abs=1e-5)
    # At least as many as it rescores: both orders of every pair in one call.
    nlp, pipe = detector(tiny_nli, rescorer_dir, aggregation="min", reverse_top_k=None, rescore_top_k=3,
                         rescore_reverse_top_k=3)
    inputs = record_inputs(pipe)
    scores(nlp, pipe, PARAGRAPH)
    assert [len(call) for call in inputs["second"]] == [6]
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="rescore_reverse_top_k"):
            detector(tiny_nli, rescorer_dir, rescore_reverse_top_k=bad)


def test_cascade_survives_to_disk(tiny_nli, rescorer_dir, tmp_path):
    nlp, _ = detector(tiny_nli, rescorer_dir, rescore_top_k=2, reverse_top_k=7)
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    pipe = loaded.get_pipe("inconsistency_detector")
    assert pipe.cfg["rescore_top_k"] == 2 and pipe.cfg["reverse_top_k"] == 7 and pipe.pairwise.rescorer is not None
    assert loaded(PARAGRAPH)._.inconsistency_score == pytest.approx(nlp(PARAGRAPH)._.inconsistency_score, abs=1e-6)


def test_cli_rescorer(tiny_nli, rescorer_dir, tmp_path):
    import json

    from typer.testing import CliRunner

    from spacy_inconsistency.cli import app

    data = tmp_path / "in.txt"
    data.write_text(PARAGRAPH, encoding="utf8")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["detect", str(data), "-o", str(out), "--model", tiny_nli, "--device", "cpu",
                                      "--dtype", "float32", "--rescorer", rescorer_dir, "--rescore-top-k", "3",
                                      "--rescore-top-share", "0", "--no-progress"])
    assert result.exit_code == 0, result.output
    row = json.loads(out.read_text(encoding="utf8"))
    nlp, _ = detector(tiny_nli, rescorer_dir, rescore_top_k=3, alignment=True, rescore_similar_k=defaults.RESCORE_SIMILAR_K)
    assert row["inconsistency_score"] == pytest.approx(nlp(PARAGRAPH)._.inconsistency_score, abs=1e-6)
    assert len(row["inconsistencies"]) <= 3 + defaults.RESCORE_SIMILAR_K
    # --doc-score-top-k 1: the highest pair's score, the same findings.
    result = CliRunner().invoke(app, ["detect", str(data), "-o", str(out), "--model", tiny_nli, "--device", "cpu",
                                      "--dtype", "float32", "--rescorer", rescorer_dir, "--rescore-top-k", "3",
                                      "--rescore-top-share", "0", "--doc-score-top-k", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    highest = json.loads(out.read_text(encoding="utf8"))
    pair_scores = numpy.sort(scores(nlp, nlp.get_pipe("inconsistency_detector"), PARAGRAPH).score)[::-1].astype(float)
    assert pair_scores[1] > 0 and highest["inconsistency_score"] == pytest.approx(pair_scores[0], abs=1e-6)
    assert row["inconsistency_score"] == pytest.approx(1 - numpy.prod(1 - pair_scores[:3]), abs=1e-6)
    assert highest["inconsistencies"] == row["inconsistencies"]
    # The similar pairs and the cascade's threshold from the command line: a rescorer whose
    # "cascade" rule (fitted for top 1, no similar pairs) is 0 flags every compared pair (those
    # it did not read score 0), its rule for every pair (0.42) at most the one pair it read.
    import shutil

    from spacy_inconsistency.pair_score import DocumentThreshold, PairScoreModel

    zero = tmp_path / "zero-cascade"
    shutil.copytree(rescorer_dir, zero)
    scorer = PairScoreModel.from_disk(zero / "pair_scorer.json")
    scorer.document_thresholds["cascade"] = DocumentThreshold([0.0] * 1001, alpha=0.3, floor=0.0)
    scorer.cascade_settings = {"rescore_top_k": 1, "rescore_similar_k": 0}
    scorer.to_disk(zero / "pair_scorer.json")
    found = {}
    for flag in ("--cascade-threshold", "--no-cascade-threshold"):
        result = CliRunner().invoke(app, ["detect", str(data), "-o", str(out), "--model", tiny_nli, "--device", "cpu",
                                          "--dtype", "float32", "--rescorer", str(zero), "--rescore-top-k", "1",
                                          "--rescore-similar-k", "0", "--rescore-top-share", "0", flag, "--no-progress"])
        assert result.exit_code == 0, result.output
        found[flag] = json.loads(out.read_text(encoding="utf8"))["inconsistencies"]
    nlp, _ = detector(tiny_nli, rescorer_dir, rescore_top_k=1, alignment=True, rescore_similar_k=0)
    n_pairs = len(scores(nlp, nlp.get_pipe("inconsistency_detector"), PARAGRAPH).pairs)
    assert len(found["--cascade-threshold"]) == n_pairs > 1
    assert len(found["--no-cascade-threshold"]) <= 1
    from spacy_inconsistency.cli import build_pipeline

    cfg = build_pipeline(model=tiny_nli, rescorer=rescorer_dir, rescore_similar_k=2, cascade_threshold=True).get_pipe(
        "inconsistency_detector").cfg
    assert (cfg["rescore_similar_k"], cfg["cascade_threshold"]) == (2, True)


def test_cascade_with_alignment_reuses_the_first_stage_facts(tiny_nli, tmp_path, monkeypatch):
    """With alignment evidence in the rescorer's pair score, the cascade's top-k scores are the
    rescorer-alone scores (so the reused facts are the right ones), and each Doc is parsed once."""
    from spacy_inconsistency.components import pairwise
    from spacy_inconsistency.pair_score import LogisticModel, PairScoreModel, feature_names

    path = build_tiny_nli(tmp_path / "aligned", {0: "entailment", 1: "neutral", 2: "contradiction"}, seed=3)
    models = []
    for with_alignment in (True, False):
        names = feature_names(with_alignment)
        # every feature weighs, so wrong facts (another pair's, or none) change the scores
        coef = [1.0 if name == "c_min" else 0.5 for name in names]
        models.append(LogisticModel(names, [0.0] * len(names), [1.0] * len(names), coef, 0.0))
    PairScoreModel(models[0], models[1], threshold=0.5, info={"test": "aligned"}).to_disk(path / "pair_scorer.json")
    write_min_pair_scorer(tmp_path / "first.json")
    first = {"pair_scorer": str(tmp_path / "first.json"), "alignment": True}
    plain = scores(*detector(tiny_nli, **first), PARAGRAPH)
    alone = scores(*detector(str(path), alignment=True), PARAGRAPH)
    calls = []
    real = pairwise.unit_alignment
    monkeypatch.setattr(pairwise, "unit_alignment", lambda *a, **k: calls.append(1) or real(*a, **k))
    cascade = scores(*detector(tiny_nli, str(path), rescore_top_k=3, **first), PARAGRAPH)
    assert len(calls) == 1
    top = numpy.argsort(-plain.score, kind="stable")[:3]
    assert numpy.allclose(cascade.score[top], alone.score[top], atol=1e-5)
    # and the alignment evidence matters here: without it the scores differ
    no_alignment = scores(*detector(str(path), alignment=False), PARAGRAPH)
    assert not numpy.allclose(no_alignment.score[top], alone.score[top], atol=1e-3)
    # A finding's evidence is the second stage's: its probabilities, its pair score's features;
    # the pairs it did not read have none.
    for k in top.tolist():
        got, want = cascade.evidence(k), alone.evidence(k)
        assert got["nli"]["contradiction"] == pytest.approx(want["nli"]["contradiction"], abs=1e-5)
        assert got["alignment"].keys() == want["alignment"].keys() and got["alignment"]
        assert list(got["alignment"].values()) == pytest.approx(list(want["alignment"].values()), abs=1e-4)
        assert got["without_alignment"] == pytest.approx(want["without_alignment"], abs=1e-5)
    unread = sorted(set(range(len(cascade.pairs))) - set(top.tolist()))
    assert unread and all(cascade.evidence(k) is None for k in unread)
