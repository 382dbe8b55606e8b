"""scripts/nli/containment_pairs.py: premises that contain the hypothesis (entailment) and
same-passage controls outside the window (neutral), split by passage. No model."""
import importlib.util
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

spec = importlib.util.spec_from_file_location("containment_pairs", ROOT / "scripts" / "nli" / "containment_pairs.py")
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)

PASSAGE = [
    "The museum opened its doors to visitors in 1990.",
    "It is closed to the public on Mondays.",
    "Entry is free for children under twelve years old.",
    "A new wing for modern sculpture was added in 2004.",
    "The gardens behind the building host concerts every summer.",
    "Guided tours in French and German start at noon.",
    "The cafe on the top floor serves local cheese and bread.",
    "Photography without flash is allowed in most galleries.",
    "Volunteers from the town run the small gift shop.",
]


def test_labels_follow_containment():
    rows = cp.passage_rows("p0", PASSAGE, random.Random(0), ks=(1, 2, 3, 5))
    assert {r["k"] for r in rows} == {1, 2, 3, 5}
    for r in rows:
        window = [s for s in PASSAGE if s in r["premise"]]
        assert len(window) == r["k"] and r["premise"] == " ".join(window)
        if r["label"] == "entailment":
            assert r["source"] == cp.SOURCE
            assert r["hypothesis"] in window and window[r["position"]] == r["hypothesis"]
        else:
            assert r["label"] == "neutral" and r["source"] == cp.SOURCE_CONTROL
            assert r["hypothesis"] in PASSAGE and r["hypothesis"] not in window
            assert r["position"] == -1
    labels = [r["label"] for r in rows]
    assert labels.count("entailment") == 4 and labels.count("neutral") == 4


def test_control_skips_restatements_and_long_premises():
    # The only sentence outside the window restates it: no control.
    rows = cp.passage_rows("p", ["The museum opened in 1990 downtown.", "The museum opened downtown in 1990."],
                           random.Random(0), ks=(1,), max_overlap=0.5)
    assert [r["label"] for r in rows] == ["entailment"]
    assert cp.passage_rows("p", PASSAGE, random.Random(0), ks=(5,), max_premise_words=20) == []


def test_train_and_heldout_passages_are_disjoint():
    passages = [(f"doc-{i}", [f"Passage {i} says thing {j} about topic number {i * 10 + j}." for j in range(6)])
                for i in range(20)]
    train, held = cp.build(passages, seed=1, heldout_share=0.25, ks=(1, 2, 3))
    train_docs, held_docs = {r["doc"] for r in train}, {r["doc"] for r in held}
    assert train_docs and held_docs and not train_docs & held_docs
    assert len(held_docs) == 5
    held_premises = {r["premise"] for r in held}
    assert not any(r["premise"] in held_premises for r in train)
    # Same seed, same split and rows.
    assert cp.build(passages, seed=1, heldout_share=0.25, ks=(1, 2, 3)) == (train, held)
