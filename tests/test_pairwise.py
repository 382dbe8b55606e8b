import json

import numpy
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_inconsistency.backends.nli import NLIBackend
from spacy_inconsistency.components.pairwise import candidate_pairs

TEXT = (
    "The committee approved the budget on Monday. The budget was rejected by the committee. "
    "A man is playing a guitar on the street. Nobody is playing music.\n..."
)


def make_nlp(model_path, **config):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    # float32 on every machine ("auto" is bf16 on CPUs with native bf16, where scores of the
    # same pair move by ~1e-3 with the shapes of its batch): these tests compare across batchings.
    nlp.add_pipe("contradiction_detector",
                 config={"model": {"model": model_path, "device": "cpu", "dtype": "float32"}, **config})
    return nlp


def test_candidate_pairs_all_or_window():
    assert candidate_pairs(5, window=2, max_all_pairs=10).tolist() == [
        [0, 1], [0, 2], [0, 3], [0, 4], [1, 2], [1, 3], [1, 4], [2, 3], [2, 4], [3, 4]
    ]
    pairs = candidate_pairs(20, window=3, max_all_pairs=10)
    assert len(pairs) == 3 * 17 + 2 + 1
    assert set(map(tuple, pairs.tolist())) == {(i, j) for i in range(20) for j in range(i + 1, min(i + 4, 20))}
    assert candidate_pairs(1, window=3, max_all_pairs=10).shape == (0, 2)
    assert candidate_pairs(0, window=3, max_all_pairs=10).shape == (0, 2)


def test_scores_are_both_directions_aggregated(tiny_nli):
    nlp = make_nlp(tiny_nli, threshold=0.0, aggregation="mean")
    doc = nlp(TEXT)
    units = [u.text for u in doc.spans["inconsistency_units"]]
    assert units[-1] == "..."  # has no letters: never paired
    found = doc._.contradictions
    assert len(found) == 6  # all pairs of the 4 units with content
    backend = NLIBackend(tiny_nli, device="cpu", dtype="float32")
    for item in found:
        a, b = item["units"]
        assert doc.text[a["start_char"]:a["end_char"]] == a["text"]
        assert doc.text[b["start_char"]:b["end_char"]] == b["text"]
        forward, backward = backend.predict([(a["text"], b["text"]), (b["text"], a["text"])])["contradiction"]
        assert item["directions"] == pytest.approx([forward, backward], abs=1e-5)
        assert item["score"] == pytest.approx((forward + backward) / 2, abs=1e-5)
        assert item["label"] == "contradiction"
    assert [f["score"] for f in found] == sorted((f["score"] for f in found), reverse=True)


def test_threshold_and_aggregation(tiny_nli):
    assert make_nlp(tiny_nli, threshold=1.0)(TEXT)._.contradictions == []
    mean = {tuple(u["start_char"] for u in f["units"]): f["score"] for f in make_nlp(tiny_nli, threshold=0.0, aggregation="mean")(TEXT)._.contradictions}
    low = {tuple(u["start_char"] for u in f["units"]): f for f in make_nlp(tiny_nli, threshold=0.0)(TEXT)._.contradictions}
    for key, f in low.items():  # the default: both directions must say contradiction
        assert f["score"] == pytest.approx(min(f["directions"]))
        assert f["score"] <= mean[key] + 1e-7
    high = {tuple(u["start_char"] for u in f["units"]): f for f in make_nlp(tiny_nli, threshold=0.0, aggregation="max")(TEXT)._.contradictions}
    assert mean.keys() == high.keys()
    for key, f in high.items():
        assert f["score"] == pytest.approx(max(f["directions"]))
        assert f["score"] >= mean[key] - 1e-7
    with pytest.raises(ValueError, match="E008"):
        make_nlp(tiny_nli, aggregation="median")
    with pytest.raises(ValueError, match="threshold"):
        make_nlp(tiny_nli, threshold=1.5)


def unit_distances(doc):
    starts = [u.start_char for u in doc.spans["inconsistency_units"]]
    return sorted(starts.index(b["start_char"]) - starts.index(a["start_char"]) for a, b in (f["units"] for f in doc._.contradictions))


def test_pair_budget_beyond_all_pairs(tiny_nli):
    # 12 units have 66 pairs: over the budget, adjacent units come first, then the window.
    text = " ".join(f"Statement number {i} is here." for i in range(12))
    doc = make_nlp(tiny_nli, threshold=0.0, window=2, max_all_pairs=30)(text)
    assert unit_distances(doc) == [1] * 11 + [2] * 10
    doc = make_nlp(tiny_nli, threshold=0.0, window=2, max_all_pairs=10)(text)
    assert unit_distances(doc) == [1] * 10
    doc = make_nlp(tiny_nli, threshold=0.0, window=2, max_all_pairs=66)(text)
    assert len(doc._.contradictions) == 66


def test_far_apart_units_sharing_rare_words_are_paired_beyond_the_budget(tiny_nli):
    filler = [f"Filler sentence {w} number {i} follows." for i, w in enumerate("abcdefghijklmnopqrstuvwxyz")]
    units = ["The harbour crane collapsed on Tuesday."] + filler + ["No harbour crane collapsed this week."]
    doc = make_nlp(tiny_nli, threshold=0.0, window=2, max_all_pairs=100)(" ".join(units))
    assert len(doc.spans["inconsistency_units"]) == 28
    assert 27 in unit_distances(doc)  # first and last: 27 units apart, found by their shared rare words
    assert len(doc._.contradictions) <= 100


def test_needs_units_or_sentences(tiny_nli):
    nlp = spacy.blank("en")
    nlp.add_pipe("contradiction_detector", config={"model": {"model": tiny_nli, "device": "cpu"}, "threshold": 0.0})
    with pytest.raises(ValueError, match="E007"):
        nlp("One thing. Another thing.")
    nlp.add_pipe("sentencizer", first=True)
    assert len(nlp("One thing. Another thing.")._.contradictions) == 1


def test_two_label_model_is_refused(tiny_binary_nli):
    with pytest.raises(ValueError, match=r"E003.*contradiction"):
        make_nlp(tiny_binary_nli)


@pytest.mark.parametrize("text", ["", "word", "Only one sentence here."])
def test_empty_and_short_docs(tiny_nli, text):
    assert make_nlp(tiny_nli, threshold=0.0)(text)._.contradictions == []


TEXTS = [TEXT, "", "Alice: I was home.\nBob: You were out.", "It rains. It does not rain. The sun shines."]


def test_pipe_equals_call_and_n_process(tiny_nli):
    nlp = make_nlp(tiny_nli, threshold=0.0)
    expected = [nlp(t)._.contradictions for t in TEXTS]
    # Batches pad shorter pairs, which moves float32 results by about 1e-7.
    for got in (
        [d._.contradictions for d in nlp.pipe(TEXTS, batch_size=3)],
        [d._.contradictions for d in nlp.pipe(TEXTS, batch_size=1, n_process=2)],
    ):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert [x["units"] for x in g] == [x["units"] for x in e]
            numpy.testing.assert_allclose([x["score"] for x in g], [x["score"] for x in e], atol=1e-5)


def test_to_disk_from_disk_and_docbin(tiny_nli, tmp_path):
    nlp = make_nlp(tiny_nli, threshold=0.3, window=2)
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    assert loaded.get_pipe("contradiction_detector").cfg == nlp.get_pipe("contradiction_detector").cfg
    assert loaded(TEXT)._.contradictions == nlp(TEXT)._.contradictions
    doc = nlp(TEXT)
    (back,) = DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab)
    # DocBin's msgpack gives sequences back as tuples; the values are the same.
    assert json.loads(json.dumps(back._.contradictions)) == doc._.contradictions
    assert nlp.get_pipe("contradiction_detector").from_bytes(
        loaded.get_pipe("contradiction_detector").to_bytes()
    ).cfg["threshold"] == 0.3


def test_candidates_strategy_decides_the_pairs(tiny_nli):
    text = " ".join(f"Statement number {i} is here." for i in range(8))
    window1 = {"@misc": "spacy-inconsistency.candidates.window.v1", "window": 1}
    doc = make_nlp(tiny_nli, threshold=0.0, candidates=window1)(text)
    starts = sorted(tuple(u["start_char"] for u in f["units"]) for f in doc._.contradictions)
    units = [u.start_char for u in doc.spans["inconsistency_units"]]
    assert starts == [(units[i], units[i + 1]) for i in range(7)]
    # The default (no strategy) keeps the built-in rule: all 28 pairs of 8 units.
    assert len(make_nlp(tiny_nli, threshold=0.0)(text)._.contradictions) == 28


def test_candidates_config_survives_to_disk(tiny_nli, tmp_path):
    window1 = {"@misc": "spacy-inconsistency.candidates.window.v1", "window": 1}
    nlp = make_nlp(tiny_nli, threshold=0.0, candidates=window1)
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    text = "One is here. Two is here. Three is here. Four is here."
    assert loaded(text)._.contradictions == nlp(text)._.contradictions
    assert len(loaded(text)._.contradictions) == 3


@pytest.mark.parametrize("aggregation", ["min", "mean", "max"])
def test_score_pairs_lazy_reverse_keeps_the_same_findings(tiny_nli, aggregation):
    from spacy_inconsistency.components.pairwise import score_pairs

    texts = ["The budget was approved.", "The budget was rejected.", "A man plays guitar.",
             "Nobody plays music.", "The sky is blue.", "It is raining."]
    backend = NLIBackend(tiny_nli, device="cpu", dtype="float32")
    pairs = candidate_pairs(len(texts), window=1, max_all_pairs=100)
    full = score_pairs(backend, texts, pairs, aggregation=aggregation, lazy_reverse=False)
    for threshold in (0.2, 0.4, 0.6):
        lazy = score_pairs(backend, texts, pairs, aggregation=aggregation, threshold=threshold, chunk_size=4)
        assert ((lazy.score >= threshold) == (full.score >= threshold)).all()
        kept = full.score >= threshold
        numpy.testing.assert_allclose(lazy.score[kept], full.score[kept], atol=1e-5)
        if aggregation == "min":
            # Only pairs whose forward score could pass were scored backwards.
            assert numpy.isnan(lazy.backward).sum() == (full.forward < threshold).sum()
    expected = backend.predict([(texts[0], texts[1]), (texts[1], texts[0])])["contradiction"]
    numpy.testing.assert_allclose([full.forward[0], full.backward[0]], expected, atol=1e-5)


def test_hub_strategy_in_the_detector_scores_each_pair_once(tiny_nli):
    from spacy_inconsistency.candidates import make_hub_strategy, run_strategy
    from spacy_inconsistency.components.pairwise import ProbeScores

    text = " ".join(f"Statement number {i} says the {w} is here." for i, w in enumerate(
        "tax budget road school tunnel harbour bridge river park tower".split()))
    hubs = {"@misc": "spacy-inconsistency.candidates.contradiction_hubs.v1", "probes": 2, "hub_share": 0.1}
    nlp = make_nlp(tiny_nli, threshold=0.0, candidates=hubs)
    detector = nlp.get_pipe("contradiction_detector")
    calls = []
    predict = detector.model.predict
    detector.model.predict = lambda pairs: (calls.append(list(pairs)), predict(pairs))[1]
    doc = nlp(text)
    asked = [pair for call in calls for pair in call]
    units = list(doc.spans["inconsistency_units"])
    texts = [u.text.strip() for u in units]
    expected = run_strategy(make_hub_strategy(probes=2, hub_share=0.1), units, scorer=ProbeScores(
        NLIBackend(tiny_nli, device="cpu", dtype="float32"), texts))
    assert 10 < len(expected) < 45  # probes and one hub's row, not all 45 pairs
    found = {tuple(units.index(doc.char_span(u["start_char"], u["end_char"])) for u in f["units"]): f
             for f in doc._.contradictions}
    assert set(found) == set(map(tuple, expected.tolist()))
    # Probe scores are reused, not recomputed: each candidate pair costs its two directions once.
    assert len(asked) == 2 * len(expected)
    assert len(set(asked)) == len(asked)
    # Each finding carries the model's scores of its own two directions. The reference
    # scores each call's pairs together, as the detector did: the tiny model's scores
    # differ by ~1e-4 between pairs, and batch padding moves them by up to ~5e-5.
    reference = NLIBackend(tiny_nli, device="cpu", dtype="float32")
    score_of = {}
    for call in calls:
        score_of.update(zip(call, reference.predict(call)["contradiction"]))
    for (i, j), f in found.items():
        forward, backward = score_of[(texts[i], texts[j])], score_of[(texts[j], texts[i])]
        assert f["directions"] == pytest.approx([forward, backward], abs=1e-6)
        assert f["score"] == pytest.approx(min(forward, backward), abs=1e-6)


def test_probe_scores_remember_pairs_and_score_only_new_ones(tiny_nli):
    from spacy_inconsistency.components.pairwise import ProbeScores

    texts = ["The budget was approved.", "The budget was rejected.", "A man plays guitar.", "Nobody plays music."]
    backend = NLIBackend(tiny_nli, device="cpu", dtype="float32")
    asked = []
    predict = backend.predict
    backend.predict = lambda pairs: (asked.extend(pairs), predict(pairs))[1]
    probed = ProbeScores(backend, texts, chunk_size=2)
    f1, b1 = probed(numpy.array([[0, 1], [2, 3], [0, 1]]))
    assert len(asked) == 4 and len(probed) == 2  # the repeated pair is scored once
    f2, b2 = probed(numpy.array([[2, 3], [1, 3], [0, 1]]))
    assert len(asked) == 6  # only (1, 3) is new
    assert f2[[0, 2]].tolist() == f1[[1, 0]].tolist() and b2[[0, 2]].tolist() == b1[[1, 0]].tolist()
    expected = NLIBackend(tiny_nli, device="cpu", dtype="float32").predict([(texts[1], texts[3]), (texts[3], texts[1])])["contradiction"]
    numpy.testing.assert_allclose([f2[1], b2[1]], expected, atol=1e-5)
    known, forward, backward = probed.lookup(numpy.array([[0, 2], [1, 3]]))
    # lookup gives every label's probability: P(entailment), P(neutral), P(contradiction).
    assert known.tolist() == [False, True] and numpy.isnan(forward[0]).all() and forward[1, 2] == f2[1]
    assert forward[1].sum() == pytest.approx(1.0, abs=1e-5) and backward[1, 2] == b2[1]


@pytest.mark.parametrize("text,expected", [
    ("4.", False), ("No.", False), ("(b)", False), ("...", False), ("Yes!", False),
    ("It rained.", True), ("I agree.", True), ("他说了很多话。", True), ("Stop", False), ("Beautiful", True),
])
def test_units_without_content_are_not_paired(text, expected):
    from spacy_inconsistency.pair_scoring import has_content

    lang = "zh" if text.startswith("他") else "en"
    doc = spacy.blank(lang)(text)
    assert has_content(doc[:]) is expected


def test_units_of_two_speakers_are_not_paired_by_default(tiny_nli):
    text = "ALICE: The bridge is finished.\nBOB: The bridge is not finished.\nALICE: The bridge is not finished."
    doc = make_nlp(tiny_nli, threshold=0.0)(text)
    pairs = {tuple(u["speaker"] for u in f["units"]) for f in doc._.contradictions}
    assert pairs == {("ALICE", "ALICE")}
    doc = make_nlp(tiny_nli, threshold=0.0, speakers="all")(text)
    assert len(doc._.contradictions) == 3
    with pytest.raises(ValueError, match="speakers"):
        make_nlp(tiny_nli, speakers="others")


def test_learned_without_a_pair_score_falls_back_to_min_with_a_warning(tiny_nli, tmp_path):
    import shutil

    bare = tmp_path / "bare-nli"
    shutil.copytree(tiny_nli, bare)
    (bare / "pair_scorer.json").unlink()
    with pytest.warns(UserWarning, match="W003"):
        nlp = make_nlp(str(bare), threshold=0.0)
    detector = nlp.get_pipe("contradiction_detector")
    assert detector.cfg["aggregation"] == "learned" and detector.aggregation == "min"
    assert detector.pair_scorer is None and detector.threshold == 0.0
    found = nlp(TEXT)._.contradictions
    assert len(found) == 6
    for f in found:
        assert f["score"] == pytest.approx(min(f["directions"]))
    # An explicit path that does not exist is an error, not a fallback.
    with pytest.raises(ValueError, match="E192"):
        make_nlp(str(bare), pair_scorer=str(tmp_path / "missing.json"))
