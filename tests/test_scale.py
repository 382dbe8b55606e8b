"""SCALE: entailment backends, the plain functions (parity with `scale-score`), `scale_scorer`."""
import json

import numpy
import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example

import spacy_inconsistency.chunk  # noqa: F401  (registers the factory)
import spacy_inconsistency.components.scale  # noqa: F401
import spacy_inconsistency.segment  # noqa: F401
from spacy_inconsistency.backends.entailment import EntailmentBackend, SCALE_PROMPT
from spacy_inconsistency.components.scale import evidence_span, make_claims_doc
from spacy_inconsistency.scale import retrieve, score, tree_groups, window_bounds

from scale_fixtures import PARAGRAPH, build_tiny_causal

SENTENCES = [s.strip() + "." for s in PARAGRAPH.split(".") if s.strip() and "?" not in s]
CLAIMS = [
    "The budget was approved.",
    "Nobody is playing music on the street tonight.",
    "It is raining.",
    "Dogs live in the garden.",
    "Alice was at the station.",
]


@pytest.fixture(scope="session")
def tiny_causal(tmp_path_factory) -> str:
    return str(build_tiny_causal(tmp_path_factory.mktemp("tiny-causal")))


@pytest.fixture(scope="session")
def reference(tiny_t5):
    pytest.importorskip("scale_score")
    from transformers import T5ForConditionalGeneration, T5Tokenizer

    return T5ForConditionalGeneration.from_pretrained(tiny_t5).eval(), T5Tokenizer.from_pretrained(tiny_t5)


# -- backends ---------------------------------------------------------------


def test_seq2seq_one_decoder_step_equals_generate(t5_backend, reference):
    import torch

    model, tokenizer = reference
    text = SCALE_PROMPT.replace("{hypothesis}", CLAIMS[0]).replace("{premise}", PARAGRAPH)
    ids = tokenizer(text, return_tensors="pt").input_ids
    out = model.generate(ids, output_scores=True, return_dict_in_generate=True, max_new_tokens=1)
    yes, no = tokenizer("Yes").input_ids[0], tokenizer("No").input_ids[0]
    expected = torch.softmax(out["scores"][0][0][[yes, no]], dim=0)[0].item()
    ours = t5_backend.score_pairs([(PARAGRAPH, CLAIMS[0])])[0]
    assert ours == pytest.approx(expected, abs=1e-6)
    assert t5_backend.yes_id == yes and t5_backend.no_id == no


def test_yes_no_must_be_single_tokens(tiny_t5):
    with pytest.raises(ValueError, match=r"\[E101\].*'Maybe'"):
        EntailmentBackend(tiny_t5, device="cpu", yes_token="Maybe")


def test_prompt_is_configurable_and_checked(tiny_t5, t5_backend):
    paper = EntailmentBackend(tiny_t5, device="cpu", prompt='{premise} Question: does this imply "{hypothesis}"? Yes or no?')
    a = paper.score_pairs([(PARAGRAPH, CLAIMS[0])])[0]
    b = t5_backend.score_pairs([(PARAGRAPH, CLAIMS[0])])[0]
    assert a != pytest.approx(b, abs=1e-6)
    with pytest.raises(ValueError, match=r"\[E103\]"):
        EntailmentBackend(tiny_t5, device="cpu", prompt="{hypothesis} then {premise}")


def test_nli_backend_reads_entailment_like_nli_backend(tiny_nli):
    from spacy_inconsistency.backends.nli import NLIBackend

    pairs = [(PARAGRAPH[:200], "The budget was approved."), ("It rains.", "The sky is blue.")]
    backend = EntailmentBackend(tiny_nli, device="cpu")
    assert backend.kind == "nli"
    expected = NLIBackend(tiny_nli, device="cpu").predict(pairs)["entailment"]
    numpy.testing.assert_allclose(backend.score_pairs(pairs), expected, atol=1e-5)


@pytest.mark.parametrize("native", [False, True])
def test_nli_kind_takes_the_dtype_it_is_given(tiny_nli, monkeypatch, native):
    # The NLI kind runs an NLIBackend: an explicit dtype reaches it, and "auto" follows its rule.
    import torch

    import spacy_inconsistency.backends.nli as nli

    monkeypatch.setattr(nli, "cpu_has_native_bf16", lambda: native)
    auto = EntailmentBackend(tiny_nli, device="cpu")
    assert auto.dtype == auto.model.dtype == (torch.bfloat16 if native else torch.float32)
    pinned = EntailmentBackend(tiny_nli, device="cpu", dtype="float32")
    assert pinned.dtype == pinned.model.dtype == torch.float32


def test_causal_backend_batched_equals_unpadded(tiny_causal):
    import torch

    backend = EntailmentBackend(tiny_causal, device="cpu")
    assert backend.kind == "causal"
    pairs = [(PARAGRAPH, CLAIMS[0]), ("The sky is blue.", CLAIMS[2]), (PARAGRAPH[:120], CLAIMS[3])]
    batched = backend.score_pairs(pairs)
    for (premise, claim), value in zip(pairs, batched):
        ids, _ = backend.joint_input(premise, claim)
        with torch.no_grad():
            logits = backend.model(torch.tensor([ids])).logits[0, -1]
        expected = torch.softmax(logits[[backend.yes_id, backend.no_id]], dim=0)[0].item()
        assert value == pytest.approx(expected, abs=1e-5)
    assert len(set(numpy.round(batched, 5))) == 3


# -- parity with scale-score 0.1.0 -------------------------------------------


@pytest.mark.parametrize("chunk_size,window_size", [(60, 0.25), (70, 0.5), (1000, 0.25)])
def test_score_matches_reference(tiny_t5, reference, chunk_size, window_size):
    from scale_score.score import score as reference_score

    model, tokenizer = reference
    premises = [PARAGRAPH * 2, "The sky is blue.", PARAGRAPH]
    claims = [CLAIMS[:3], [CLAIMS[2]], CLAIMS[3:]]
    expected = reference_score(premises, claims, chunk_size=chunk_size, window_size=window_size,
                               model=model, tokenizer=tokenizer, device="cpu")
    ours = score(premises, claims, model=tiny_t5, chunk_size=chunk_size, window_size=window_size, device="cpu")
    assert len(ours) == len(expected) == 6
    assert max(abs(a - b) for a, b in zip(ours, expected)) < 1e-4
    assert max(ours) - min(ours) > 0.01  # the scores differ, so order matters


def test_windows_are_the_reference_token_windows(t5_backend, reference):
    from scale_score.utils import get_chunks

    _, tokenizer = reference
    premise = PARAGRAPH * 2
    prompt = '{{premise}} Question: Does this imply that "{{hypothesis}}"? Yes or No?'
    for claim, chunk_size, window in [(CLAIMS[0], 60, 0.25), (CLAIMS[1], 50, 0.4)]:
        expected = get_chunks(tokenizer, premise, prompt.replace("{{hypothesis}}", claim), chunk_size, window)
        template = t5_backend.template(claim)
        ids = t5_backend.premise_ids(premise)
        bounds = window_bounds(len(ids), room=chunk_size - template.overhead, window_size=window)
        ours = [template.build(ids[a:b])[0] for a, b in bounds]
        assert [e[0].tolist() for e in expected] == ours


@pytest.mark.parametrize("branches", [2, 3])
def test_retrieve_matches_reference(tiny_t5, reference, branches):
    from scale_score.score import retrieve as reference_retrieve

    model, tokenizer = reference
    premises = [SENTENCES, SENTENCES[:5], SENTENCES[3:4]]
    claims = [CLAIMS[:3], [CLAIMS[3]], [CLAIMS[4]]]
    expected = reference_retrieve(premises, claims, branches=branches, model=model, tokenizer=tokenizer, device="cpu")
    ours = retrieve(premises, claims, model=tiny_t5, branches=branches, device="cpu")
    assert [u for u, _ in ours] == [u for u, _ in expected]
    assert max(abs(a - b) for (_, a), (_, b) in zip(ours, expected)) < 1e-4


def test_tree_groups_split_as_reference():
    assert tree_groups(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert tree_groups(list(range(6)), 3) == [[0, 1], [2, 3], [4, 5]]
    assert tree_groups([7], 2) == [[7]]


# -- bad input ---------------------------------------------------------------


def test_claim_longer_than_chunk_budget_is_an_error(tiny_t5):
    long_claim = " ".join(SENTENCES)
    with pytest.raises(ValueError, match=r"\[E100\]"):
        score([PARAGRAPH * 3], [[long_claim]], model=tiny_t5, chunk_size=60, device="cpu")


@pytest.mark.parametrize(
    "premises,claims,code",
    [(["", "x"], [["a"], ["b"]], "E106"), ([PARAGRAPH], [["ok", " "]], "E105"), ([PARAGRAPH], [], "E104")],
)
def test_bad_inputs(t5_backend, premises, claims, code):
    with pytest.raises(ValueError, match=rf"\[{code}\]"):
        score(premises, claims, model=t5_backend)


def test_unknown_script_warns(t5_backend):
    with pytest.warns(UserWarning, match=r"\[W102\]"):
        values = score(["这是一个很长的中文句子，没有英文。" * 3], [["天空是蓝色的。"]], model=t5_backend)
    assert 0.0 <= values[0] <= 1.0


# -- scale_scorer ------------------------------------------------------------


@pytest.fixture(scope="module")
def nlp(tiny_t5):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    nlp.add_pipe("scale_scorer", config={"model": {"model": tiny_t5, "device": "cpu"}, "chunk_size": 70})
    return nlp


def test_scorer_claims_mode(nlp, t5_backend):
    doc = nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS[:3]))
    result = doc._.inconsistency_scale
    assert result["mode"] == "claims" and len(result["claims"]) == 3
    assert len(result["chunks"]) > 2
    for claim in result["claims"]:
        assert claim["score"] == max(claim["chunk_scores"])
        assert claim["chunk_scores"][claim["best_chunk"]] == claim["score"]
        chunk = result["chunks"][claim["best_chunk"]]
        evidence = claim["evidence"]
        # The evidence unit overlaps the best chunk (a unit longer than a chunk is cut).
        assert evidence["start_char"] < chunk["end_char"] and evidence["end_char"] > chunk["start_char"]
        assert doc.text[evidence["start_char"] : evidence["end_char"]] == evidence["text"]
        assert evidence_span(doc, claim).text == evidence["text"]
        # Each chunk score is the model's P(Yes) for that chunk's text.
        for k, value in enumerate(claim["chunk_scores"]):
            text = doc.text[result["chunks"][k]["start_char"] : result["chunks"][k]["end_char"]]
            assert value == pytest.approx(t5_backend.score_pairs([(text, claim["text"])])[0], abs=1e-4)
    assert result["score"] == min(c["score"] for c in result["claims"])


def test_scorer_self_mode_leaves_the_claim_out(nlp):
    doc = nlp(PARAGRAPH)
    result = doc._.inconsistency_scale
    assert result["mode"] == "self"
    units = list(doc.spans["inconsistency_units"])
    assert len(result["claims"]) == len(units)
    for claim in result["claims"]:
        assert claim["evidence"] is None or claim["evidence"]["start_char"] != claim["start_char"]
    # A chunk that holds only the claim has no premise left: no score.
    assert any(s is None for c in result["claims"] for s in c["chunk_scores"])


def test_scorer_pipe_equals_call_and_empty_doc(nlp):
    docs = [make_claims_doc(nlp, PARAGRAPH, CLAIMS[:2]), make_claims_doc(nlp, "The sky is blue.", [CLAIMS[2]]),
            nlp.make_doc("")]
    piped = [d._.inconsistency_scale for d in nlp.pipe(docs)]
    single = [nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS[:2]))._.inconsistency_scale,
              nlp(make_claims_doc(nlp, "The sky is blue.", [CLAIMS[2]]))._.inconsistency_scale,
              nlp("")._.inconsistency_scale]
    for a, b in zip(piped, single):
        assert [c["evidence"]["text"] for c in a["claims"]] == [c["evidence"]["text"] for c in b["claims"]]
        assert [c["score"] for c in a["claims"]] == pytest.approx([c["score"] for c in b["claims"]], abs=1e-5)
        assert [c["best_chunk"] for c in a["claims"]] == [c["best_chunk"] for c in b["claims"]]
    assert single[2] == {"mode": "self", "model": single[2]["model"], "calibrated": False, "chunks": [], "claims": [],
                         "score": None}


def test_scorer_claims_against_empty_source_warn(nlp):
    with pytest.warns(UserWarning, match=r"\[W100\]"):
        doc = nlp(make_claims_doc(nlp, "", [CLAIMS[0]]))
    assert doc._.inconsistency_scale["claims"][0]["score"] is None


def test_scorer_bad_claims(nlp):
    with pytest.raises(ValueError, match=r"\[E105\]"):
        make_claims_doc(nlp, PARAGRAPH, ["fine", ""])
    doc = nlp.make_doc(PARAGRAPH)
    doc.user_data["inconsistency_claims"] = "not a list"
    with pytest.raises(ValueError, match=r"\[E107\]"):
        nlp(doc)


def test_scorer_results_survive_docbin_and_disk(nlp, tmp_path):
    doc = nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS[:2]))
    restored = list(DocBin(docs=[doc], store_user_data=True).get_docs(nlp.vocab))[0]
    # msgpack gives lists back as tuples; the values are the same.
    assert json.loads(json.dumps(restored._.inconsistency_scale)) == doc._.inconsistency_scale
    nlp.get_pipe("scale_scorer").cfg["branches"] = 3
    nlp.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")
    assert loaded.get_pipe("scale_scorer").cfg["branches"] == 3
    nlp.get_pipe("scale_scorer").cfg["branches"] = 2
    again = loaded(make_claims_doc(loaded, PARAGRAPH, CLAIMS[:2]))._.inconsistency_scale
    assert [c["score"] for c in again["claims"]] == pytest.approx([c["score"] for c in doc._.inconsistency_scale["claims"]], abs=1e-6)
    assert "doc._.inconsistency_scale" in nlp.get_pipe_meta("scale_scorer").assigns


def test_scorer_uses_chunker_spans(tiny_t5):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    nlp.add_pipe("inconsistency_chunker", config={"model": {"model": tiny_t5, "device": "cpu"}, "chunk_size": 90})
    nlp.add_pipe("scale_scorer", config={"model": {"model": tiny_t5, "device": "cpu"}, "chunk_size": 70})
    doc = nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS[:2]))
    chunks = [(s.start_char, s.end_char) for s in doc.spans["inconsistency_chunks"]]
    assert [(c["start_char"], c["end_char"]) for c in doc._.inconsistency_scale["chunks"]] == chunks


def test_scorer_n_process_2(nlp):
    docs = [make_claims_doc(nlp, PARAGRAPH, CLAIMS[:2]), make_claims_doc(nlp, "The sky is blue.", [CLAIMS[2]])]
    expected = [nlp(make_claims_doc(nlp, d.text, d.user_data["inconsistency_claims"]))._.inconsistency_scale for d in docs]
    got = [d._.inconsistency_scale for d in nlp.pipe(docs, n_process=2, batch_size=1)]
    assert [c["score"] for r in got for c in r["claims"]] == pytest.approx(
        [c["score"] for r in expected for c in r["claims"]], abs=1e-5
    )


def _scored_example(nlp, scores, labels, mode="claims"):
    predicted = nlp.make_doc("A source text.")
    predicted._.inconsistency_scale = {
        "mode": mode, "claims": [{"text": f"claim {i}", "score": s} for i, s in enumerate(scores)],
    }
    reference = nlp.make_doc("A source text.")
    if labels is not None:
        reference.user_data["inconsistency_claim_labels"] = labels
    return Example(predicted, reference)


def test_scale_scorer_hand_worked():
    from spacy_inconsistency.extensions import install_extensions
    from spacy_inconsistency.scoring import score_scale

    install_extensions()
    nlp = spacy.blank("en")
    examples = [
        _scored_example(nlp, [0.9, 0.2], [True, False]),
        _scored_example(nlp, [0.6, 0.7], [True, False]),
        _scored_example(nlp, [0.1], None),  # no gold labels: skipped
    ]
    result = score_scale(examples)
    # supported {0.9, 0.6} vs unsupported {0.2, 0.7}: 3 of 4 pairs ranked right
    assert result["scale_auc"] == pytest.approx(0.75)
    # flagged (< 0.5): only 0.2; unsupported: 0.2 and 0.7 -> P 1, R 0.5
    assert result["scale_f"] == pytest.approx(2 / 3)
    assert result["scale_acc"] == pytest.approx(0.75)
    # one claim per 15-bin bucket: mean |label - score| = (0.1 + 0.2 + 0.4 + 0.7) / 4
    assert result["scale_ece"] == pytest.approx(0.35)
    # an empty source (score None) supports nothing: counted as score 0
    assert score_scale([_scored_example(nlp, [None, 0.8], [False, True])])["scale_auc"] == 1.0
    assert score_scale([examples[2]]) == {k: None for k in ("scale_auc", "scale_ece", "scale_f", "scale_acc")}
    with pytest.raises(ValueError, match=r"\[E113\]"):
        score_scale([_scored_example(nlp, [0.5], [True, False])])
    # self-mode results have no claims to compare with gold labels
    with pytest.raises(ValueError, match=r"\[E113\]"):
        score_scale([_scored_example(nlp, [0.5], [True], mode="self")])


def test_scale_scorer_through_nlp_evaluate(nlp):
    from spacy_inconsistency.scoring import score_scale

    examples = []
    for claims, labels in ((CLAIMS[:3], [True, False, True]), (CLAIMS[2:], [False, True, False])):
        reference = make_claims_doc(nlp, PARAGRAPH, claims, labels=labels)
        examples.append(Example(make_claims_doc(nlp, PARAGRAPH, claims), reference))
    scores = nlp.evaluate(examples)
    assert set(scores) >= {"scale_auc", "scale_ece", "scale_f", "scale_acc"}
    # the same numbers as the scorer on the predicted Docs (nlp.evaluate works on copies),
    # computed by hand from their claims
    docs = [nlp(eg.predicted.copy()) for eg in examples]
    predicted = [c["score"] for doc in docs for c in doc._.inconsistency_scale["claims"]]
    gold = [1, 0, 1, 0, 1, 0]
    from sklearn.metrics import roc_auc_score

    assert scores["scale_auc"] == pytest.approx(roc_auc_score(gold, predicted))
    assert scores["scale_acc"] == pytest.approx(
        sum((p < 0.5) == (g == 0) for p, g in zip(predicted, gold)) / 6)
    processed = [Example(doc, eg.reference) for doc, eg in zip(docs, examples)]
    assert score_scale(processed)["scale_ece"] == pytest.approx(scores["scale_ece"])


def test_claim_labels_are_checked(nlp):
    with pytest.raises(ValueError, match=r"\[E112\]"):
        make_claims_doc(nlp, PARAGRAPH, CLAIMS[:2], labels=[True])
    with pytest.raises(ValueError, match=r"\[E112\]"):
        make_claims_doc(nlp, PARAGRAPH, CLAIMS[:1], labels=[1])
    doc = make_claims_doc(nlp, PARAGRAPH, CLAIMS[:1], labels=[False])
    assert doc.user_data["inconsistency_claim_labels"] == [False]


@pytest.mark.parametrize("factory", ["scale_scorer", "inconsistency_chunker"])
@pytest.mark.parametrize("config,name", [({"chunk_size": 1}, "chunk_size"), ({"overlap": 1.0}, "overlap"),
                                         ({"overlap": -0.1}, "overlap")])
def test_chunk_settings_are_checked(tiny_t5, factory, config, name):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match=rf"\[E006\].*{name}"):
        nlp.add_pipe(factory, config={"model": {"model": tiny_t5, "device": "cpu"}, **config})


def test_score_checks_window_size(tiny_t5):
    with pytest.raises(ValueError, match=r"\[E006\].*window_size"):
        score([PARAGRAPH], [["It is raining."]], model=tiny_t5, window_size=1.0, device="cpu")
