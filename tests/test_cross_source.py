import json
import shutil

import pytest
import spacy

from spacy_inconsistency.backends.nli import NLIBackend
from spacy_inconsistency.candidates import make_hub_strategy, run_strategy
from spacy_inconsistency.components.pairwise import ProbeScores
from spacy_inconsistency.compare import compare_docs, find_contradictions, get_detector

MANIFESTO = "Taxes will fall next year. We will build the harbour tunnel."
POSTS = "Taxes will rise next year. The tunnel is cancelled. We love our city."


def make_nlp(model_path, **config):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    # float32 on every machine ("auto" is bf16 on CPUs with native bf16, where scores of the
    # same pair move by ~1e-3 with the shapes of its batch): these tests compare across batchings.
    nlp.add_pipe("contradiction_detector",
                 config={"model": {"model": model_path, "device": "cpu", "dtype": "float32"}, **config})
    return nlp


def test_compare_docs_pairs_across_and_keeps_sources(tiny_nli):
    nlp = make_nlp(tiny_nli, threshold=0.0)
    found = compare_docs(nlp, MANIFESTO, POSTS, sources=("manifesto", "posts"))
    assert len(found) == 2 * 3  # every unit of A with every unit of B, none within a Doc
    backend = NLIBackend(tiny_nli, device="cpu", dtype="float32")
    texts = {0: MANIFESTO, 1: POSTS}
    for f in found:
        a, b = f["units"]
        assert (a["source"], a["doc"], b["source"], b["doc"]) == ("manifesto", 0, "posts", 1)
        assert texts[0][a["start_char"]:a["end_char"]] == a["text"]
        assert texts[1][b["start_char"]:b["end_char"]] == b["text"]
        forward, backward = backend.predict([(a["text"], b["text"]), (b["text"], a["text"])])["contradiction"]
        assert f["directions"] == pytest.approx([forward, backward], abs=1e-5)
        assert f["score"] == pytest.approx(min(forward, backward), abs=1e-5)
        # The learned score (the tiny model's weighs min P(contradiction) only) says why.
        assert f["evidence"]["nli"]["contradiction"] == pytest.approx([forward, backward], abs=1e-5)
        assert f["evidence"]["without_alignment"] == pytest.approx(f["score"], abs=1e-5)
    assert [f["score"] for f in found] == sorted((f["score"] for f in found), reverse=True)
    assert json.loads(json.dumps(found)) == found


def test_one_actors_statements(tiny_nli):
    nlp = make_nlp(tiny_nli, threshold=0.0)
    docs = [nlp.make_doc(t) for t in ("Taxes will fall.", "Taxes will rise.", "The tunnel is built.")]
    docs[1].user_data["source"] = "2021 manifesto"
    found = find_contradictions(nlp, docs)
    assert len(found) == 3  # a Doc without sentences is one statement
    sources = {u["source"] for f in found for u in f["units"]}
    assert sources == {"doc0", "2021 manifesto", "doc2"}
    labelled = find_contradictions(nlp, docs, sources=["2019", "2021", "2023"])
    assert {tuple(u["source"] for u in f["units"]) for f in labelled} == {
        ("2019", "2021"), ("2019", "2023"), ("2021", "2023")
    }
    # Units of one Doc: compared only when within_docs is on.
    two = [MANIFESTO, POSTS]
    assert len(find_contradictions(nlp, two)) == 10  # 5 units, all pairs
    assert len(find_contradictions(nlp, two, within_docs=False)) == 6
    assert len(find_contradictions(nlp, two, across_docs=False)) == 1 + 3
    with pytest.raises(ValueError, match="E183"):
        find_contradictions(nlp, docs, sources=["only one"])
    with pytest.raises(TypeError, match="E184"):
        find_contradictions(nlp, ["fine", 3])


def test_candidate_strategy_applies_across_docs(tiny_nli):
    nlp = make_nlp(
        tiny_nli, threshold=0.0,
        candidates={"@misc": "spacy-inconsistency.candidates.window.v1", "window": 1},
    )
    statements = [f"Statement {i} holds." for i in range(6)]
    found = find_contradictions(nlp, statements, sources=[str(i) for i in range(6)])
    assert sorted(tuple(int(u["source"]) for u in f["units"]) for f in found) == [(i, i + 1) for i in range(5)]


def test_detector_lookup(tiny_nli):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="E186"):
        get_detector(nlp)
    nlp.add_pipe("inconsistency_detector", config={"model": {"model": tiny_nli, "device": "cpu"}, "threshold": 0.0})
    assert get_detector(nlp) is nlp.get_pipe("inconsistency_detector").pairwise
    # Strings are segmented by the detector's own segmenter: 2 x 1 units.
    found = compare_docs(nlp, "A holds. B holds.", "C holds.")
    assert sorted(f["units"][0]["text"] for f in found) == ["A holds.", "B holds."]
    with pytest.raises(ValueError, match="E186"):
        get_detector(nlp, "missing")


def test_pair_settings_are_the_detectors_own(tiny_nli, tmp_path):
    # Cross-source comparison reads the detector through `pair_settings()`: what it gets must
    # be what the detector uses, including the fallback of a model without a learned score.
    window = {"@misc": "spacy-inconsistency.candidates.window.v1", "window": 1}
    detector = make_nlp(tiny_nli, candidates=window).get_pipe("contradiction_detector")
    settings = detector.pair_settings()
    assert settings.aggregation == "learned" and settings.uses_alignment
    assert settings.pair_scorer is detector.pair_scorer is not None
    assert settings.model is detector.model and settings.candidates is detector.candidates
    assert settings.units_key == detector.cfg["units_key"] and settings.name == "contradiction_detector"
    assert settings.threshold == detector.pair_scorer.threshold
    detector.cfg["threshold"] = 0.25
    assert detector.pair_settings().threshold == 0.25
    # The same model without its learned score: "learned" falls back to `min` at 0.5.
    bare = tmp_path / "bare"
    shutil.copytree(tiny_nli, bare)
    (bare / "pair_scorer.json").unlink()
    with pytest.warns(UserWarning, match="W003"):
        fallback = make_nlp(str(bare)).get_pipe("contradiction_detector").pair_settings()
    assert (fallback.aggregation, fallback.threshold, fallback.pair_scorer) == ("min", 0.5, None)
    assert not fallback.uses_alignment
    # A pipe without `pair_settings` is not taken for a detector.
    with pytest.raises(ValueError, match="E186"):
        get_detector(make_nlp(tiny_nli), "sentencizer")


def test_default_model_finds_the_contradiction_across_years():
    nlp = spacy.blank("en")
    nlp.add_pipe("contradiction_detector", config={"model": {"device": "cpu"}})
    statements = [
        "The budget was approved by the committee.",
        "The committee rejected the budget.",
        "We love dogs.",
        "The sky is blue.",
    ]
    found = find_contradictions(nlp, statements, sources=["2019", "2020", "2021", "2022"])
    pairs = [tuple(u["source"] for u in f["units"]) for f in found]
    assert ("2019", "2020") in pairs
    assert ("2021", "2022") not in pairs
    assert all(f["score"] >= 0.5 for f in found)


def test_hub_strategy_across_docs_reuses_probe_scores(tiny_nli):
    hubs = {"@misc": "spacy-inconsistency.candidates.contradiction_hubs.v1", "probes": 1, "hub_share": 0.2}
    statements = [f"Statement {i} is about the {w}." for i, w in enumerate(
        "tax budget road school tunnel harbour bridge river park tower".split())]
    full = {tuple(u["text"] for u in f["units"]): f for f in find_contradictions(
        make_nlp(tiny_nli, threshold=0.0), statements)}
    assert len(full) == 45
    nlp = make_nlp(tiny_nli, threshold=0.0, candidates=hubs)
    detector = get_detector(nlp)
    asked = []
    predict = detector.model.predict
    detector.model.predict = lambda pairs: (asked.extend(pairs), predict(pairs))[1]
    found = find_contradictions(nlp, statements)
    expected = run_strategy(make_hub_strategy(probes=1, hub_share=0.2), [nlp.make_doc(t)[:] for t in statements],
                            scorer=ProbeScores(NLIBackend(tiny_nli, device="cpu", dtype="float32"), statements))
    assert 10 < len(expected) < 45  # probes and two hubs' rows, not all pairs
    assert {tuple(sorted(statements.index(u["text"]) for u in f["units"])) for f in found} == set(
        map(tuple, expected.tolist()))
    for f in found:
        key = tuple(u["text"] for u in f["units"])
        assert f["score"] == pytest.approx(full[key]["score"], abs=1e-5)
        assert f["directions"] == pytest.approx(full[key]["directions"], abs=1e-5)
    # threshold 0: every pair is scored both ways, each direction once.
    assert len(asked) == 2 * len(found) and len(set(asked)) == len(asked)
