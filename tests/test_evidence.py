"""`evidence_extractor`: the strategies' control flow, storage on Docs, and the offline NLI judge.

The control flow is tested with `RuleClient`, a deterministic judge that
applies a real rule (a sentence contradicts the same sentence with "not"
inserted) to the document inside the paper's prompts: it quotes the first
such pair it finds, as an LLM quotes one pair per answer.
"""
import json
import re
from typing import Dict, List, Optional

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.util import registry

from spacy_inconsistency.backends.llm import LLMClient
from spacy_inconsistency.backends.llm_parse import MARK_DOCUMENT, MARK_PREVIOUS, MARK_SENTENCES
from spacy_inconsistency.components.evidence import EvidenceExtractor, evidence_spans, score_evidence
from spacy_inconsistency.extensions import EVIDENCE, EVIDENCE_ERROR, EVIDENCE_TRACE

TEXT = ("The door is open. The cat is black. The sky is clear. "
        "The door is not open. The road is wet. The cat is not black.")
PAIR_1 = ["The door is open.", "The door is not open."]
PAIR_2 = ["The cat is black.", "The cat is not black."]


def split(text: str) -> List[str]:
    return [s for s in re.split(r"(?<=\.)\s+", text.strip()) if s]


def negation_pairs(sentences: List[str]):
    for i, s in enumerate(sentences):
        for t in sentences[i + 1:]:
            if t.replace(" not ", " ") == s or s.replace(" not ", " ") == t:
                yield s, t


class RuleClient(LLMClient):
    """Answers the paper's prompts with the negation rule; `mode` breaks it on purpose."""

    def __init__(self, mode: str = "rule", script: Optional[List[str]] = None) -> None:
        self.name = f"rule-{mode}"
        self.mode = mode
        self.script = list(script or [])
        self.prompts: List[str] = []

    def chat(self, messages: List[Dict[str, str]], *, temperature: float = 0.0, max_tokens: int = 512,
             n: int = 1, seed: Optional[int] = None) -> List[str]:
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        if self.mode == "garbage":
            return ["I am not sure what you mean."] * n
        if self.mode == "script":
            return [self.script.pop(0) for _ in range(n)]
        if MARK_SENTENCES + "\n" in prompt:
            listed = json.loads(prompt.split(MARK_SENTENCES + "\n", 1)[1])
            if self.mode == "filter_empty":
                return ['{"evidence": []}'] * n
            kept = [s for s in listed if any(s in p for p in negation_pairs(listed))]
            return [json.dumps({"evidence": kept})] * n
        document = prompt.split(MARK_DOCUMENT + "\n", 1)[1]
        if MARK_PREVIOUS + "\n" in prompt and self.mode == "flip_on_review":
            return ['{"judgement": "no", "evidence": []}'] * n
        sentences = split(document)
        if self.mode == "hallucinate":
            return ['{"judgement": "yes", "evidence": ["Purple elephants sing opera loudly."]}'] * n
        if self.mode == "always_yes":
            return [json.dumps({"judgement": "yes", "evidence": sentences[:1]})] * n
        pair = next(negation_pairs(sentences), None)
        answer = {"judgement": "yes", "evidence": list(pair)} if pair else {"judgement": "no", "evidence": []}
        # Wrapped in a code fence, as chat models often do.
        return ["```json\n" + json.dumps(answer) + "\n```"] * n


@registry.misc("test-evidence.RuleClient.v1")
def make_rule_client(mode: str = "rule") -> RuleClient:
    return RuleClient(mode)


def extractor(client: LLMClient, **cfg) -> EvidenceExtractor:
    return EvidenceExtractor(spacy.blank("en"), client=client, **cfg)


def run(client: LLMClient, text: str = TEXT, **cfg):
    nlp = spacy.blank("en")
    doc = EvidenceExtractor(nlp, client=client, **cfg)(nlp.make_doc(text))
    return doc, doc.user_data[EVIDENCE_TRACE]


def quotes(doc) -> List[str]:
    return [e["quote"] for e in getattr(doc._, EVIDENCE)]


def test_direct_quotes_one_pair_with_char_offsets():
    doc, trace = run(RuleClient(), strategy="direct")
    assert doc._.has_inconsistency is True
    assert quotes(doc) == PAIR_1
    for item in getattr(doc._, EVIDENCE):
        assert doc.text[item["start_char"]:item["end_char"]] == item["quote"]
        assert item["similarity"] == pytest.approx(1.0)
    assert [s.text for s in evidence_spans(doc)] == PAIR_1
    assert trace["n_calls"] == 1 and trace["n_parse_errors"] == 0
    assert trace["calls"][0]["parsed"][0]["method"] == "json"
    assert trace["calls"][0]["prompt"].endswith("### document\n" + TEXT)


def test_redact_and_retry_finds_the_second_pair():
    client = RuleClient()
    doc, trace = run(client, strategy="rnr")
    assert doc._.has_inconsistency is True
    assert quotes(doc) == PAIR_1 + PAIR_2
    assert trace["n_calls"] == trace["n_retries"] == 3
    assert trace["stop_reason"] == "no"
    assert [c["step"] for c in trace["calls"]] == ["judge", "retry", "retry"]
    # The second prompt is the document with the first pair redacted, order kept.
    assert client.prompts[1].endswith("The cat is black. The sky is clear. The road is wet. The cat is not black.")
    assert client.prompts[2].endswith("The sky is clear. The road is wet.")


def test_first_rnr_call_is_the_direct_prompt():
    text = "The door is open.\n\nThe cat is black.   The door is not open."
    direct, rnr = RuleClient(), RuleClient()
    run(direct, text, strategy="direct")
    run(rnr, text, strategy="rnr")
    assert rnr.prompts[0] == direct.prompts[0] and rnr.prompts[0].endswith(text)
    assert rnr.prompts[1].endswith("### document\nThe cat is black.")


def test_no_contradiction_is_one_call():
    doc, trace = run(RuleClient(), "The door is open. The cat is black.", strategy="rnr_cf")
    assert doc._.has_inconsistency is False and getattr(doc._, EVIDENCE) == []
    assert trace["n_calls"] == 1 and trace["stop_reason"] == "no"


@pytest.mark.parametrize("strategy", ["rnr_uf", "rnr_cf"])
def test_filters_keep_what_the_filter_answers(strategy):
    doc, trace = run(RuleClient(), strategy=strategy)
    assert quotes(doc) == PAIR_1 + PAIR_2
    assert trace["n_calls"] == 4 and trace["calls"][-1]["step"] == "filter"
    assert ("at least 1 sentence" in trace["calls"][-1]["prompt"]) == (strategy == "rnr_cf")
    assert json.loads(trace["calls"][-1]["prompt"].split("sentences\n", 1)[1]) == PAIR_1 + PAIR_2


def test_empty_filter_answer_flips_unconstrained_and_is_ignored_by_constrained():
    doc, trace = run(RuleClient("filter_empty"), strategy="rnr_uf")
    assert doc._.has_inconsistency is False and getattr(doc._, EVIDENCE) == []
    doc, trace = run(RuleClient("filter_empty"), strategy="rnr_cf")
    assert doc._.has_inconsistency is True and quotes(doc) == PAIR_1 + PAIR_2


@pytest.mark.parametrize("strategy", ["direct", "self_consistency", "self_criticism", "rnr", "rnr_uf", "rnr_cf"])
def test_unparseable_answers_are_counted_not_raised(strategy):
    doc, trace = run(RuleClient("garbage"), strategy=strategy, n_samples=3)
    assert doc._.has_inconsistency is False and getattr(doc._, EVIDENCE) == []
    expected = {"direct": 1, "self_consistency": 3, "self_criticism": 2}.get(strategy, 1)
    assert trace["n_parse_errors"] == expected
    assert trace["calls"][0]["answers"][0] == "I am not sure what you mean."
    assert trace["calls"][0]["parsed"][0]["ok"] is False


def test_retry_loop_stops_when_nothing_is_redacted():
    doc, trace = run(RuleClient("hallucinate"), strategy="rnr")
    assert trace["n_calls"] == 1 and trace["stop_reason"] == "nothing_redacted"
    (item,) = getattr(doc._, EVIDENCE)
    assert item["quote"] == "Purple elephants sing opera loudly." and item["start_char"] is None
    assert evidence_spans(doc) == []


def test_retry_loop_is_bounded():
    doc, trace = run(RuleClient("always_yes"), strategy="rnr", max_retries=3)
    assert trace["n_calls"] == 3 and trace["stop_reason"] == "max_retries"
    assert quotes(doc) == ["The door is open.", "The cat is black.", "The sky is clear."]
    four = "The door is open. The cat is black. The sky is clear. The road is wet."
    doc, trace = run(RuleClient("always_yes"), four, strategy="rnr", max_retries=50)
    assert trace["n_calls"] == 4 and trace["stop_reason"] == "all_redacted"
    assert quotes(doc) == split(four)


def test_self_consistency_majority_and_union():
    yes_a = '{"judgement": "yes", "evidence": ["The door is open.", "The door is not open."]}'
    yes_b = '{"judgement": "yes", "evidence": ["the door is open", "The cat is not black."]}'
    no = '{"judgement": "no", "evidence": []}'
    client = RuleClient("script", [yes_a, no, yes_b, "???", yes_a])
    doc, trace = run(client, strategy="self_consistency", n_samples=5, temperature=0.7)
    assert doc._.has_inconsistency is True
    # "the door is open" matches "The door is open." (TF-IDF cosine 1), so it is not added twice.
    assert quotes(doc) == ["The door is open.", "The door is not open.", "The cat is not black."]
    assert trace["calls"][0]["temperature"] == 0.7 and trace["calls"][0]["n"] == 5
    assert trace["n_parse_errors"] == 1
    client = RuleClient("script", [yes_a, no, yes_b, "???", no])
    doc, _ = run(client, strategy="self_consistency", n_samples=5)
    assert doc._.has_inconsistency is False and getattr(doc._, EVIDENCE) == []


def test_repeated_quotes_are_stored_once():
    answer = '{"judgement": "yes", "evidence": ["The door is open.", "the door is open", "The door is not open."]}'
    doc, trace = run(RuleClient("script", [answer]), strategy="direct")
    assert quotes(doc) == PAIR_1
    assert trace["calls"][0]["parsed"][0]["evidence"][1] == "the door is open"


def test_self_criticism_takes_the_reviewed_answer():
    doc, trace = run(RuleClient("flip_on_review"), strategy="self_criticism")
    assert doc._.has_inconsistency is False
    assert [c["step"] for c in trace["calls"]] == ["direct", "review"]
    review = trace["calls"][1]["prompt"]
    assert "### Previous answer\n```json" in review and review.endswith("### document\n" + TEXT)
    doc, trace = run(RuleClient(), strategy="self_criticism")
    assert doc._.has_inconsistency is True and quotes(doc) == PAIR_1


def test_units_from_spans_or_sentences_are_used():
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    ext = EvidenceExtractor(nlp, client=RuleClient(), strategy="direct")
    doc = nlp("Intro.\nThe door is open. The door is not open.")
    units = ext.units(doc)
    assert [u["text"] for u in units] == ["Intro.", "The door is open.", "The door is not open."]
    ext(doc)
    assert [doc.text[e["start_char"]:e["end_char"]] for e in getattr(doc._, EVIDENCE)] == PAIR_1


def test_pipe_equals_call_and_empty_docs():
    nlp = spacy.blank("en")
    nlp.add_pipe("evidence_extractor", config={"client": {"@misc": "test-evidence.RuleClient.v1"}, "strategy": "rnr"})
    texts = [TEXT, "", "Hi", "The sky is clear. The sky is not clear."]
    piped = list(nlp.pipe(texts, batch_size=2))
    called = [nlp(t) for t in texts]
    for a, b in zip(piped, called):
        assert a._.has_inconsistency == b._.has_inconsistency
        assert getattr(a._, EVIDENCE) == getattr(b._, EVIDENCE)
    assert piped[1]._.has_inconsistency is False and piped[1].user_data[EVIDENCE_TRACE]["n_calls"] == 0
    assert piped[2]._.has_inconsistency is False
    assert quotes(piped[3]) == ["The sky is clear.", "The sky is not clear."]


class FilterFailsClient(RuleClient):
    """The rule, except that a filter call over a list with a cat raises (as a client that gave up)."""

    def chat(self, messages, **kwargs):
        if MARK_SENTENCES + "\n" in messages[-1]["content"] and "cat" in messages[-1]["content"]:
            raise RuntimeError("server said: 503, Authorization: Bearer xyz-secret-123")
        return super().chat(messages, **kwargs)


def test_client_error_gives_error_record_and_keeps_the_other_docs():
    nlp = spacy.blank("en")
    nlp.add_pipe("evidence_extractor", name="ev", config={"client": {"@misc": "test-evidence.RuleClient.v1"}})
    nlp.get_pipe("ev").client = FilterFailsClient()
    texts = [TEXT, "The sky is clear. The sky is not clear.", "The door is open."]
    with pytest.warns(UserWarning, match=r"W200.*1 of 3"):
        docs = list(nlp.pipe(texts))
    assert [d.text for d in docs] == texts
    error = getattr(docs[0]._, EVIDENCE_ERROR)
    # The run stopped at the filter, after the judge and two retries.
    assert error == {"component": "ev", "client": "rule-rule", "step": "filter", "n_calls": 3,
                     "type": "RuntimeError", "code": None,
                     "message": "server said: 503, Authorization: [REDACTED]"}
    assert docs[0]._.has_inconsistency is None and getattr(docs[0]._, EVIDENCE) is None
    trace = docs[0].user_data[EVIDENCE_TRACE]
    assert trace["error"] == error and trace["stop_reason"] == "error" and len(trace["calls"]) == 3
    assert quotes(docs[1]) == ["The sky is clear.", "The sky is not clear."]
    assert docs[2]._.has_inconsistency is False
    assert getattr(docs[1]._, EVIDENCE_ERROR) is None and getattr(docs[2]._, EVIDENCE_ERROR) is None
    restored = list(DocBin(docs=docs, store_user_data=True).get_docs(nlp.vocab))
    assert dict(getattr(restored[0]._, EVIDENCE_ERROR)) == error


def test_docbin_and_n_process_2():
    nlp = spacy.blank("en")
    nlp.add_pipe("evidence_extractor", config={"client": {"@misc": "test-evidence.RuleClient.v1"}})
    texts = [TEXT, "The door is open."]
    docs = list(nlp.pipe(texts, n_process=2, batch_size=1))
    assert quotes(docs[0]) == PAIR_1 + PAIR_2 and docs[1]._.has_inconsistency is False
    restored = list(DocBin(docs=docs, store_user_data=True).get_docs(nlp.vocab))
    # msgpack gives lists back as tuples.
    assert list(getattr(restored[0]._, EVIDENCE)) == getattr(docs[0]._, EVIDENCE)
    assert restored[0].user_data[EVIDENCE_TRACE]["n_calls"] == 4


def test_to_disk_round_trip(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("evidence_extractor", config={
        "client": {"@misc": "test-evidence.RuleClient.v1"}, "strategy": "rnr_uf", "max_retries": 4,
        "prompts": {"filter_unconstrained": "Flag them. ### potentially inconsistent list of sentences\n{sentences}"},
    })
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    ext = loaded.get_pipe("evidence_extractor")
    assert ext.cfg["strategy"] == "rnr_uf" and ext.cfg["max_retries"] == 4
    assert ext.prompts["filter_unconstrained"].startswith("Flag them.")
    assert quotes(loaded(TEXT)) == PAIR_1 + PAIR_2


def test_bad_settings():
    with pytest.raises(ValueError, match="E127"):
        extractor(RuleClient(), strategy="tree_of_thought")
    with pytest.raises(ValueError, match="E129"):
        extractor(RuleClient(), prompts={"direct": "No placeholder here."})
    with pytest.raises(ValueError, match="E129"):
        extractor(RuleClient(), prompts={"judge": "{document}"})
    with pytest.raises(ValueError, match="E006"):
        extractor(RuleClient(), max_retries=0)
    with pytest.raises(ValueError, match="E006"):
        extractor(RuleClient(), match_threshold=0.0)


def test_scorer_reads_reference_evidence():
    nlp = spacy.blank("en")
    ext = EvidenceExtractor(nlp, client=RuleClient(), strategy="direct")
    examples = []
    for text, label, gold in ((TEXT, True, PAIR_2), ("The door is open.", False, [])):
        pred = ext(nlp.make_doc(text))
        ref = nlp.make_doc(text)
        ref._.has_inconsistency = label
        setattr(ref._, EVIDENCE, [{"quote": g} for g in gold])
        examples.append(Example(pred, ref))
    scores = score_evidence(examples)
    # One positive, predicted yes with PAIR_1 against gold PAIR_2: no evidence found.
    assert scores["evidence_accuracy"] == 1.0 and scores["evidence_ehrc"] == 0.0 and scores["evidence_eprc"] == 0.0


@pytest.fixture(scope="module")
def nli_pipeline():
    nlp = spacy.blank("en")
    nlp.add_pipe("evidence_extractor", config={"strategy": "rnr_cf", "client": {"device": "cpu"}})
    return nlp


def test_offline_nli_judge_runs_the_method(nli_pipeline):
    """Default config: the offline judge. Its answers must agree with its own pair scores."""
    ext = nli_pipeline.get_pipe("evidence_extractor")
    judge = ext.client
    text = ("The committee approved the budget on Monday. A man is playing a guitar on the street. "
            "The budget was rejected by the committee. Dogs, cats and birds live in the garden.")
    doc = nli_pipeline(text)
    trace = doc.user_data[EVIDENCE_TRACE]
    sentences = judge.sentences(text)
    pairs, scores = judge.pair_scores(sentences)
    assert doc._.has_inconsistency == bool(scores.max() >= judge.threshold_for(len(pairs)))
    first = json.loads(trace["calls"][0]["answers"][0])
    if first["judgement"] == "yes":
        assert first["evidence"] == [sentences[i] for i in pairs[int(scores.argmax())]]
        assert trace["calls"][-1]["step"] == "filter"
        for item in getattr(doc._, EVIDENCE):
            assert item["start_char"] is not None
            assert doc.text[item["start_char"]:item["end_char"]] == item["quote"]
    assert trace["n_parse_errors"] == 0
