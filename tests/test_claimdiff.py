"""ClaimDiff and political converters: real files from ../shared/data."""
import json
import warnings
from pathlib import Path

import pytest
import spacy

from spacy_inconsistency.corpora.claimdiff import RATIONALE_KEY, claimdiff_docs, convert_claimdiff, read_claimdiff
from spacy_inconsistency.corpora.political import fold_indices, political_docs
from spacy_inconsistency.pairs import PAIR_KEY

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
CLAIMDIFF = SHARED_DATA / "claimdiff"
POLITICAL = SHARED_DATA / "political" / "df_gold.csv"

needs_claimdiff = pytest.mark.skipif(not CLAIMDIFF.is_dir(), reason=f"ClaimDiff data not found at {CLAIMDIFF}")
needs_political = pytest.mark.skipif(not POLITICAL.is_file(), reason=f"political data not found at {POLITICAL}")


def test_rationale_key_matches_component():
    from spacy_inconsistency.components.claim_relation import RATIONALE_KEY as COMPONENT_KEY

    assert RATIONALE_KEY == COMPONENT_KEY


@needs_claimdiff
def test_claimdiff_docs_carry_labels_pairs_and_rationales():
    nlp = spacy.blank("en")
    path = CLAIMDIFF / "ClaimDiff-weak-test.json"
    records = read_claimdiff(path)
    docs = claimdiff_docs(nlp, path, task="W")
    assert len(docs) == len(records) == 1084
    assert sum(d.cats["WEAKEN"] for d in docs) == 238
    for doc, record in zip(docs[:200], records[:200]):
        a, b = doc.spans[PAIR_KEY]
        assert a.text == record["claim_a"].strip() and b.text == record["claim_b"].strip()
        # Every rationale phrase is a span inside claim A, covering the phrase.
        assert len(doc.spans[RATIONALE_KEY]) == len(record["rationale"])
        for span, phrase in zip(doc.spans[RATIONALE_KEY], record["rationale"]):
            assert a.start <= span.start and span.end <= a.end
            assert phrase.strip() in span.text


def test_missing_rationale_warns(tmp_path):
    path = tmp_path / "ClaimDiff-strength-test.json"
    path.write_text(json.dumps({"data": [{"claim_a": "Prices rose sharply.", "claim_b": "Prices fell.",
                                          "relation": 1, "rationale": ["rose sharply", "not in the claim"]}]}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = claimdiff_docs(spacy.blank("en"), path, task="S")
    assert [s.text for s in docs[0].spans[RATIONALE_KEY]] == ["rose sharply"]
    assert any("W120" in str(w.message) and "1 of 2" in str(w.message) for w in caught)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"data": [{"claim_a": "x"}]}))
    with pytest.raises(ValueError, match="E152"):
        read_claimdiff(bad)


@needs_claimdiff
def test_convert_claimdiff_dev_issues_are_exclusive(tmp_path):
    written = convert_claimdiff(CLAIMDIFF, tmp_path, task="S")
    assert written["train.spacy"] + written["dev.spacy"] == 1857 and written["test.spacy"] == 1084
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    topics = {name: {d.user_data["topic"] for d in DocBin().from_disk(tmp_path / f"{name}.spacy").get_docs(nlp.vocab)}
              for name in ("train", "dev")}
    assert topics["train"] and topics["dev"] and not topics["train"] & topics["dev"]


@needs_political
def test_political_docs_and_folds():
    from spacy_inconsistency.political import read_political

    records = read_political(POLITICAL)
    docs = political_docs(spacy.blank("en"), records, n_classes=3)
    assert len(docs) == 698
    assert sum(d.cats["Inconsistent"] for d in docs) == 484
    assert docs[0].spans[PAIR_KEY][0].text.startswith("Motivated and confident workforce")
    folds = fold_indices(records, n_folds=5, seed=0)
    assert sorted(i for f in folds for i in f) == list(range(698))
    # Stratified: each fold holds about a fifth of the 96 Consistent samples.
    for fold in folds:
        assert 18 <= sum(records[i]["label_5"] == "Consistent" for i in fold) <= 20
