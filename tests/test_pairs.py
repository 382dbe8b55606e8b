import pytest
import spacy
from spacy.tokens import DocBin

from spacy_inconsistency.pairs import PAIR_KEY, make_pair_doc, make_pair_docs, pair_spans, pair_texts


@pytest.fixture
def nlp():
    return spacy.blank("en")


def test_pair_doc_marks_both_sides(nlp):
    doc = make_pair_doc(nlp, "Taxes must fall. ", "  Taxes must rise.", labels=("party", "post"))
    a, b = pair_spans(doc)
    assert (a.text, a.label_) == ("Taxes must fall.", "party")
    assert (b.text, b.label_) == ("Taxes must rise.", "post")
    assert a.end <= b.start
    assert pair_texts(doc) == ("Taxes must fall.", "Taxes must rise.")


def test_pair_docs_survive_docbin(nlp):
    docs = list(make_pair_docs(nlp, [("A cat sat.", "No cat sat."), ("Rain.", "Sun.")]))
    restored = list(DocBin(docs=docs).get_docs(nlp.vocab))
    assert [pair_texts(d) for d in restored] == [("A cat sat.", "No cat sat."), ("Rain.", "Sun.")]


@pytest.mark.parametrize("a,b,side", [("", "x", "A"), ("x", "  \n", "B")])
def test_empty_side_is_refused(nlp, a, b, side):
    with pytest.raises(ValueError, match=rf"E011.*text {side}"):
        make_pair_doc(nlp, a, b)


def test_doc_without_pair_spans_is_refused(nlp):
    with pytest.raises(ValueError, match="E012.*found 0"):
        pair_texts(nlp("Just one text."))
    doc = nlp("One two")
    doc.spans[PAIR_KEY] = [doc[0:1]]
    with pytest.raises(ValueError, match="found 1"):
        pair_spans(doc)
