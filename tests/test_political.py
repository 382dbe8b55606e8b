"""The political benchmark's protocol (Section 6); its reproduction of the paper's Tables 3/4 is
tested in test_reproductions.py."""
import json
import random

import pytest

from spacy_inconsistency.metrics.agreement import krippendorff_alpha, majority_label
from spacy_inconsistency.metrics.classification import mcc_per_class
from spacy_inconsistency.political import (
    CONSISTENT, FACTUAL, INCONSISTENT, LABELS_3, SURFACE, UNRELATED, bootstrap_upper_bound,
    evaluate_protocol, leave_one_out, protocol_tables, read_political, split_input,
)

from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

POLITICAL = SHARED_DATA / "political" / "df_gold.csv"


def test_majority_breaks_ties_among_tied_labels_only():
    rng = random.Random(0)
    assert majority_label(["a", "b", "b"], rng) == "b"
    drawn = {majority_label(["a", "b", "c", "c", "a"], rng) for _ in range(50)}
    assert drawn == {"a", "c"}
    with pytest.raises(ValueError, match="E141"):
        majority_label([], rng)


def test_leave_one_out_pairs_by_hand():
    # Votes S,S,S,C: holding out an S leaves S,S,C -> S; holding out C leaves S,S,S -> S.
    pairs = leave_one_out([[SURFACE, SURFACE, SURFACE, CONSISTENT]], n_classes=5, rng=random.Random(0))
    assert pairs["truth"] == [SURFACE] * 4
    assert pairs["human"] == [SURFACE, SURFACE, SURFACE, CONSISTENT]
    assert pairs["sample"] == [0, 0, 0, 0]
    # In 3 classes the types merge before the majority: S,F,C -> Inconsistent wins 2:1.
    pairs = leave_one_out([[SURFACE, FACTUAL, CONSISTENT, CONSISTENT]], n_classes=3, rng=random.Random(0))
    assert pairs["truth"][2] == INCONSISTENT  # held out C: S,F,C -> Inconsistent
    assert pairs["human"] == [INCONSISTENT, INCONSISTENT, CONSISTENT, CONSISTENT]


def test_models_compared_with_every_ground_truth():
    annotations = [[UNRELATED] * 5, [CONSISTENT] * 5, [SURFACE] * 4 + [UNRELATED]]
    perfect = [UNRELATED, CONSISTENT, SURFACE]
    rows = evaluate_protocol(annotations, {"perfect": perfect, "runs": [[UNRELATED] * 5, [CONSISTENT] * 3 + [UNRELATED] * 2, [SURFACE]]},
                             n_classes=3, seed=0, bootstrap=False)
    assert rows["perfect"] == {UNRELATED: 1.0, CONSISTENT: 1.0, INCONSISTENT: 1.0}
    assert rows["runs"] == rows["perfect"]
    # The held-out Unrelated vote of sample 3 is the only human error, seen once in 15 pairs.
    expected = mcc_per_class([UNRELATED] * 5 + [CONSISTENT] * 5 + [INCONSISTENT] * 5,
                             [UNRELATED] * 5 + [CONSISTENT] * 5 + [INCONSISTENT] * 4 + [UNRELATED], LABELS_3)
    assert rows["Humans"] == pytest.approx(expected)
    assert rows["Humans"][UNRELATED] < 1.0
    with pytest.raises(ValueError, match="E140"):
        evaluate_protocol(annotations, {"short": perfect[:2]}, n_classes=3)
    with pytest.raises(ValueError, match="E142"):
        evaluate_protocol([["Contradiction", UNRELATED]], {}, n_classes=5)


def test_bootstrap_of_unanimous_votes_is_perfect():
    annotations = [[UNRELATED] * 5, [CONSISTENT] * 5, [FACTUAL] * 5]
    assert bootstrap_upper_bound(annotations, n_classes=3, rng=random.Random(0)) == {
        UNRELATED: 1.0, CONSISTENT: 1.0, INCONSISTENT: 1.0}


def test_alpha_extremes():
    assert krippendorff_alpha([["a", "a"], ["b", "b"], ["a", "a"]], ["a", "b"]) == pytest.approx(1.0)
    assert krippendorff_alpha([["a", "b"], ["b", "a"], ["a", "b"]], ["a", "b"]) < 0.0


def test_split_input():
    assert split_input("Text 1: We want A.\n\nText 2: We oppose A.") == ["We want A.", "We oppose A."]
    with pytest.raises(ValueError, match="E144"):
        split_input("We want A. We oppose A.")


@pytest.fixture(scope="module")
def tables():
    if not POLITICAL.is_file():
        pytest.skip(f"political benchmark data not found at {POLITICAL} (../shared/data is not mounted)")
    return protocol_tables(read_political(POLITICAL), seeds=[0, 1], models=["LLaMA 70B"],
                           extra_predictions={"always consistent": [CONSISTENT] * 698})


def test_protocol_tables_rows_and_summary(tables):
    assert (tables["n_samples"], tables["n_pairs"], tables["seeds"]) == (698, 3525, [0, 1])
    for key, n_classes in (("table_3", 3), ("table_4", 5)):
        table = tables[key]
        assert table["n_classes"] == n_classes
        assert set(table["first_seed"]) == {"Humans", "LLaMA 70B", "always consistent", "Bootstrap humans"}
        for row, cells in table["over_seeds"].items():
            for cls, summary in cells.items():
                assert summary["min"] <= table["first_seed"][row][cls] <= summary["max"]
                assert summary["min"] <= summary["mean"] <= summary["max"]
        # A constant prediction has no correlation with any class.
        assert all(v == 0.0 for v in table["first_seed"]["always consistent"].values())
    assert "paper" not in tables["table_3"] and "paper" not in tables["alpha"]
    json.dumps(tables)  # plain JSON


def test_published_majorities_are_modes_of_the_runs():
    if not POLITICAL.is_file():
        pytest.skip(f"political benchmark data not found at {POLITICAL}")
    from collections import Counter

    from spacy_inconsistency.political import to_3_classes

    for record in read_political(POLITICAL):
        for model, runs in record["runs"].items():
            for n, labels in ((5, runs), (3, [to_3_classes(x) for x in runs])):
                counts = Counter(labels)
                assert counts[record["majority"][model][n]] == max(counts.values())


def test_rows_do_not_depend_on_other_rows():
    annotations = [[UNRELATED, CONSISTENT, CONSISTENT, UNRELATED], [SURFACE, FACTUAL, SURFACE, FACTUAL]] * 3
    one = evaluate_protocol(annotations, {"x": [UNRELATED, SURFACE] * 3}, n_classes=5, seed=1)
    two = evaluate_protocol(annotations, {"y": [[CONSISTENT, UNRELATED]] * 6, "x": [UNRELATED, SURFACE] * 3},
                            n_classes=5, seed=1)
    assert one["x"] == two["x"] and one["Humans"] == two["Humans"]


