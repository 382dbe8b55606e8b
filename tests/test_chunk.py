"""`inconsistency_chunker`: chunks in the scoring model's tokens, aligned to units."""
import json
import tracemalloc

import numpy
import pytest
import spacy
from spacy.attrs import SENT_START
from spacy.tokens import DocBin

import spacy_inconsistency.chunk  # noqa: F401  (registers the factory)
import spacy_inconsistency.segment  # noqa: F401
from spacy_inconsistency.backends.entailment import EntailmentBackend
from spacy_inconsistency.chunk import plan_chunks, statement_units
from spacy_inconsistency.components.scale import set_claims

from scale_fixtures import PARAGRAPH

DIALOGUE = "\n".join(
    f"{name}: {line}"
    for name, line in [
        ("Alice", "I was at home all evening."), ("Bob", "You were seen at the station."),
        ("Alice", "The committee approved the budget on Monday."), ("Bob", "The budget was rejected by the committee."),
        ("Alice", "It is raining heavily in the city tonight."), ("Bob", "The sky is blue and the sun is shining."),
    ] * 3
)


@pytest.fixture(scope="module")
def backend(t5_backend) -> EntailmentBackend:
    return t5_backend


@pytest.fixture(scope="module")
def nlp(tiny_t5):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    nlp.add_pipe("inconsistency_chunker", config={"model": {"model": tiny_t5, "device": "cpu"}, "chunk_size": 120})
    return nlp


def _check_fit(doc, backend, claims, chunk_size):
    overhead = max(backend.template(c).overhead for c in claims)
    for span, n in zip(doc.spans["inconsistency_chunks"], doc.spans["inconsistency_chunks"].attrs["n_tokens"]):
        assert n == len(backend.premise_ids(span.text))
        assert overhead + n <= chunk_size


def test_chunks_fit_budget_with_prompt_and_longest_claim(nlp, backend):
    claims = ["The budget was approved.", "Nobody is playing music on the street tonight at all."]
    doc = nlp(set_claims(nlp.make_doc(DIALOGUE), claims))
    chunks = doc.spans["inconsistency_chunks"]
    assert len(chunks) > 2
    _check_fit(doc, backend, claims, 120)
    # Every input really built from a chunk and a claim stays within chunk_size.
    for span in chunks:
        for claim in claims:
            ids, _ = backend.template(claim).build(backend.premise_ids(span.text))
            assert len(ids) <= 120
    # Chunks end at unit ends and keep the speaker names between units.
    unit_ends = {e for _, e in statement_units(doc)}
    assert all(span.end_char in unit_ends for span in chunks)
    assert chunks[0].text.startswith("Alice: I was at home")
    # Together they cover every unit.
    for start, end in statement_units(doc):
        assert any(s.start_char <= start and end <= s.end_char for s in chunks)


def test_overlap_repeats_units(tiny_t5, backend):
    text = " ".join(["The sky is blue.", "It is raining.", "Dogs live here.", "Cats live here."] * 6)
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    doc = nlp(text)
    claims = ["It rains."]
    none = plan_chunks(doc, backend=backend, claims=claims, chunk_size=90, overlap=0.0).bounds
    half = plan_chunks(doc, backend=backend, claims=claims, chunk_size=90, overlap=0.5).bounds
    assert all(a[1] <= b[0] for a, b in zip(none, none[1:]))
    assert all(b[0] < a[1] for a, b in zip(half, half[1:]))
    assert len(half) > len(none)
    shared = [(a[1] - b[0]) / (a[1] - a[0]) for a, b in zip(half, half[1:])]
    assert 0.2 < sum(shared) / len(shared) < 0.7


def test_unit_longer_than_a_chunk_is_cut_between_tokens(backend):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter", config={"max_unit_tokens": 0})
    long_unit = " and ".join(["the committee approved the budget on monday"] * 12) + "."
    doc = nlp(long_unit)
    plan = plan_chunks(doc, backend=backend, claims=["It rains."], chunk_size=80, overlap=0.25)
    overhead = backend.template("It rains.").overhead
    assert len(plan.bounds) > 3
    assert all(n + overhead <= 80 for n in plan.n_tokens)
    assert plan.bounds[0][0] == 0 and plan.bounds[-1][1] == len(doc.text)
    # Nothing but whitespace falls between consecutive chunks.
    assert all(not doc.text[a[1] : b[0]].strip() for a, b in zip(plan.bounds, plan.bounds[1:]))


def test_claim_longer_than_budget_is_an_error(nlp):
    doc = set_claims(nlp.make_doc(PARAGRAPH), [PARAGRAPH])
    with pytest.raises(ValueError, match=r"\[E100\]"):
        nlp(doc)


def test_self_mode_budget_uses_longest_unit(nlp, backend):
    doc = nlp(DIALOGUE)
    units = [doc.text[a:b] for a, b in statement_units(doc)]
    _check_fit(doc, backend, units, 120)


def test_empty_doc_pipe_and_serialization(nlp, tmp_path):
    assert len(nlp("").spans["inconsistency_chunks"]) == 0
    texts = [DIALOGUE, PARAGRAPH, ""]
    piped = [[(s.start_char, s.end_char) for s in d.spans["inconsistency_chunks"]] for d in nlp.pipe(texts)]
    docs = [nlp(t) for t in texts]
    single = [[(s.start_char, s.end_char) for s in d.spans["inconsistency_chunks"]] for d in docs]
    assert piped == single
    doc = nlp(DIALOGUE)
    restored = list(DocBin(docs=[doc]).get_docs(nlp.vocab))[0]
    assert [s.text for s in restored.spans["inconsistency_chunks"]] == [s.text for s in doc.spans["inconsistency_chunks"]]
    assert list(restored.spans["inconsistency_chunks"].attrs["n_tokens"]) == doc.spans["inconsistency_chunks"].attrs["n_tokens"]
    nlp.get_pipe("inconsistency_chunker").cfg["overlap"] = 0.5
    nlp.to_disk(tmp_path / "pipe")
    nlp.get_pipe("inconsistency_chunker").cfg["overlap"] = 0.25
    loaded = spacy.load(tmp_path / "pipe")
    assert loaded.get_pipe("inconsistency_chunker").cfg["overlap"] == 0.5
    assert json.loads((tmp_path / "pipe" / "inconsistency_chunker" / "cfg").read_text())["chunk_size"] == 120


def test_memory_bounded_on_200k_token_document(tiny_nli):
    # The tiny WordPiece NLI model of conftest: a fast tokenizer, 64-token inputs.
    backend = EntailmentBackend(tiny_nli, device="cpu")
    nlp = spacy.blank("en")
    nlp.max_length = 5_000_000
    sentences = [s.strip() + "." for s in PARAGRAPH.split(".") if s.strip() and "?" not in s]
    text = " ".join(sentences * 1800)
    doc = nlp.make_doc(text)
    # Sentence starts as units (the segmenter's job, done here in one array write for speed).
    starts = numpy.full((len(doc), 1), -1, dtype=numpy.int64)
    starts[0, 0] = 1
    starts[1:, 0] = [1 if t.text == "." else -1 for t in doc[:-1]]
    doc.from_array([SENT_START], starts.view(numpy.uint64))
    n_model_tokens = sum(backend.count_tokens(sentences)) * 1800
    assert n_model_tokens >= 200_000
    tracemalloc.start()
    plan = plan_chunks(doc, backend=backend, claims=["It rains."], chunk_size=64, overlap=0.25)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(plan.bounds) >= n_model_tokens / plan.budget
    assert all(n <= plan.budget for n in plan.n_tokens)
    # Per unit only a token count is kept and chunks are tokenized one at a
    # time: measured 11.6 MB peak for 205,200 tokens in 4,500 chunks.
    assert peak < 32 * 2**20, peak
