import json

import pytest

from conftest import ROOT
from spacy_inconsistency.corpora.behaviour import SPLIT_PATTERNS, gold_spans, read_behaviour_suite, split_pattern, suite_files
from spacy_inconsistency.metrics.behaviour import (
    DocOutcome, MatchedOutcome, behaviour_metrics, is_pair_hit, matched_auc, matched_auc_interval, paired_auc_difference,
)

SUITE = ROOT / "tests" / "behaviour"
CAPABILITIES = {
    "negation", "antonyms", "numbers", "dates", "entities", "impossible", "quantifiers", "places", "speaker",
    "long-distance",
}


def test_pair_hit_needs_both_sentences_in_different_units():
    gold = ((0, 10), (50, 60))
    assert is_pair_hit(((0, 12), (48, 70)), gold)
    assert is_pair_hit(((48, 70), (0, 12)), gold)
    assert not is_pair_hit(((0, 12), (20, 30)), gold)
    assert not is_pair_hit(((0, 70), (0, 70)), ((0, 10), (80, 90)))
    assert not is_pair_hit(None, gold)


def test_matched_auc_counts_wins_and_half_ties():
    assert matched_auc([0.9, 0.5, 0.2], [0.1, 0.5, 0.3]) == pytest.approx((1 + 0.5 + 0) / 3)
    assert matched_auc([], []) is None
    with pytest.raises(ValueError):  # unmatched lists are an error, not a silently shorter comparison
        matched_auc([0.9, 0.5, 0.2], [0.1, 0.5])


def test_named_splits_are_the_suite_files():
    assert split_pattern("dev2") == "dev2_*.jsonl" and split_pattern("test") == "test_*.jsonl"
    assert split_pattern("train_part3?.jsonl,x.jsonl") == "train_part3?.jsonl,x.jsonl"  # a pattern stays one
    for split, pattern in SPLIT_PATTERNS.items():
        names = {p.name for p in suite_files(SUITE, pattern)}
        assert names and all(n.startswith(split + "_") for n in names), split  # "test" does not read test2_*


def outcome(capability, c_score, c_flag, c_top, k_score, k_flag, kind="paraphrase", gold_pair=(0.8, 0.3)):
    gold = ((0, 10), (20, 30))
    return MatchedOutcome(
        capability=capability, gold=gold,
        contradiction=DocOutcome(c_score, c_flag, c_top, gold_pair[0]),
        control=DocOutcome(k_score, k_flag, None, gold_pair[1]), control_kind=kind,
    )


def test_behaviour_metrics_per_capability():
    right, wrong = ((0, 10), (20, 30)), ((0, 10), (40, 50))
    outcomes = [
        outcome("negation", 0.9, True, right, 0.2, False),
        outcome("negation", 0.8, True, wrong, 0.85, True, kind="different entity"),
        outcome("negation", 0.3, False, None, 0.1, False, gold_pair=(None, 0.2)),
        outcome("numbers", 0.6, True, right, 0.6, True),
    ]
    m = behaviour_metrics(outcomes)
    neg = m["by_capability"]["negation"]
    assert neg["n"] == 3
    assert neg["recall"] == pytest.approx(2 / 3)
    assert neg["pair_hits"] == pytest.approx(1 / 3)  # the second flagged the wrong pair
    assert neg["false_alarms"] == pytest.approx(1 / 3)
    assert neg["matched_auc"] == pytest.approx(2 / 3)  # 0.8 < 0.85 loses
    assert neg["pooled_auc"] == pytest.approx(7 / 9)
    assert neg["pair_auc"] == pytest.approx(1.0)  # two records with both gold pairs scored
    assert neg["gold_pairs_compared"] == pytest.approx(2 / 3)
    assert m["by_capability"]["numbers"]["matched_auc"] == 0.5
    assert m["all"]["n"] == 4 and m["all"]["recall"] == 0.75
    low, high = m["all"]["matched_auc_interval"]  # wins 1, 0, 1 and a tie over 4 records
    assert 0.0 <= low < m["all"]["matched_auc"] == 0.625 < high <= 1.0
    para, other = m["by_control_kind"]["paraphrase"], m["by_control_kind"]["different entity"]
    assert para["n"] == 3 and para["false_alarms"] == pytest.approx(1 / 3)
    assert para["matched_auc"] == pytest.approx(2.5 / 3)  # the numbers record ties at 0.6
    # the tie is decided by other pairs: the gold pair (0.8) outscores its near miss (0.3)
    assert para["matched_losses"] == {"pair": 0.0, "other_pairs": pytest.approx(0.5 / 3), "not_compared": 0.0}
    assert other == {"n": 1, "false_alarms": 1.0, "matched_auc": 0.0,
                     "matched_losses": {"pair": 0.0, "other_pairs": 1.0, "not_compared": 0.0}}


def test_matched_auc_interval_resamples_records():
    assert matched_auc_interval([0.9, 0.8, 0.7], [0.1, 0.2, 0.3]) == (1.0, 1.0)  # every resample wins
    assert matched_auc_interval([], []) is None
    # 400 records, half won: the interval is about the normal one, 0.5 +- 1.96 * sqrt(0.25 / 400)
    positive, negative = [1.0, 0.0] * 200, [0.5] * 400
    low, high = matched_auc_interval(positive, negative)
    assert low == pytest.approx(0.5 - 0.049, abs=0.01) and high == pytest.approx(0.5 + 0.049, abs=0.01)
    assert matched_auc_interval(positive, negative) == (low, high)  # seeded
    assert matched_auc_interval(positive, negative, level=0.5)[1] - matched_auc_interval(positive, negative, level=0.5)[0] < high - low
    with pytest.raises(ValueError):
        matched_auc_interval([0.9, 0.8], [0.1])


def test_paired_auc_difference_judges_the_records_that_changed():
    pos, neg = [0.9] * 70 + [0.2] * 30, [0.5] * 100  # A wins 70 of 100
    same = paired_auc_difference(pos, neg, pos, neg)
    assert same["difference"] == 0.0 and (same["low"], same["high"]) == (0.0, 0.0)
    assert same["changed"] == 0.0 and same["no_gain"] == 1.0
    better = [0.9] * 100  # B wins the 30 that A lost
    d = paired_auc_difference(pos, neg, better, neg)
    assert (d["a"], d["b"], d["difference"], d["changed"]) == (0.7, 1.0, pytest.approx(0.3), pytest.approx(0.3))
    assert 0.2 < d["low"] < 0.3 < d["high"] < 0.4 and d["no_gain"] == 0.0
    # B loses one record A won, wins one A lost and ties a third A lost: half a record up, three records changed
    mixed = [0.2] + [0.9] * 69 + [0.9] + [0.2] * 28 + [0.5]
    m = paired_auc_difference(pos, neg, mixed, neg)
    assert m["difference"] == pytest.approx(0.5 / 100) and m["changed"] == pytest.approx(0.03)
    assert m["low"] < 0 < m["high"] and 0.2 < m["no_gain"] < 0.9
    assert paired_auc_difference([], [], [], []) is None
    with pytest.raises(ValueError):
        paired_auc_difference(pos, neg, pos[:-1], neg[:-1])


def test_matched_losses_say_where_records_are_lost():
    outcomes = [
        outcome("negation", 0.9, True, None, 0.2, False),  # won: no loss
        outcome("negation", 0.5, False, None, 0.7, True, gold_pair=(0.5, 0.7)),  # the near miss outscores the gold pair
        outcome("negation", 0.8, True, None, 0.9, True, gold_pair=(0.8, 0.3)),  # another pair of the control decides
        outcome("negation", 0.4, False, None, 0.4, False, gold_pair=(0.4, 0.1)),  # a tie decided elsewhere: half
        outcome("negation", 0.2, False, None, 0.6, False, gold_pair=(None, 0.6)),  # gold pair never scored
        outcome("negation", 0.6, False, None, 0.6, False, gold_pair=(0.6, 0.6)),  # tied pair judgement: half
    ]
    m = behaviour_metrics(outcomes)["all"]
    assert m["matched_losses"] == {
        "pair": pytest.approx(1.5 / 6), "other_pairs": pytest.approx(1.5 / 6), "not_compared": pytest.approx(1 / 6),
    }
    assert sum(m["matched_losses"].values()) == pytest.approx(1 - m["matched_auc"])


def test_gold_spans_and_bad_records(tmp_path):
    text = "A is here. B is not here. C."
    assert gold_spans(text, ["B is not here.", "A is here."]) == ((0, 10), (11, 25))
    for pair in (["A is here.", "A is here."], ["A is here.", "Z."], ["A is here."]):
        with pytest.raises(ValueError):
            gold_spans(text, pair)
    record = {"id": "x", "capability": "negation", "contradiction": {"text": text, "pair": ["A is here.", "B is not here."]},
              "control": {"text": text, "pair": ["A is here.", "B is not here."]}}
    (tmp_path / "test_a.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(ValueError, match="E188.*line 1.*control text equals"):
        read_behaviour_suite(tmp_path)
    with pytest.raises(ValueError, match="E189"):
        read_behaviour_suite(tmp_path, "dev_*.jsonl")


@pytest.mark.parametrize("split,per_capability", [("test_*.jsonl", 25), ("dev_*.jsonl", 20), ("test2_*.jsonl", 50),
                                                   ("dev2_*.jsonl", 20), ("test3_*.jsonl", 20), ("dev3_*.jsonl", 40)])
def test_the_project_suites_are_complete_and_valid(split, per_capability):
    records = read_behaviour_suite(SUITE, split)
    counts = {}
    for r in records:
        counts[r["capability"]] = counts.get(r["capability"], 0) + 1
    assert counts == {c: per_capability for c in CAPABILITIES}
    # Negation is tested in both orders: the negated sentence first in some records, second in others.
    assert all(r["gold"][0][1] <= r["gold"][1][0] for r in records)
    # No record, domain or pair sentence is in two splits (dev2, test3 and dev3 were written by other
    # writers in other domains; the earlier splits share some domains, not records).
    splits = {name: read_behaviour_suite(SUITE, f"{name}_*.jsonl") for name in ("test", "dev", "test2", "dev2", "test3", "dev3")}
    ids = [r["id"] for rs in splits.values() for r in rs]
    assert len(set(ids)) == len(ids)
    for new in ("dev2", "test3", "dev3"):
        others = [r for name, rs in splits.items() if name != new for r in rs]
        assert not {r["domain"] for r in splits[new]} & {r["domain"] for r in others}
        text = "\n".join(_normal(r[side]["text"]) for r in others for side in ("contradiction", "control"))
        assert not [s for r in splits[new] for s in r["contradiction"]["pair"] if _normal(s) in text]


def _normal(text):
    return " ".join(text.lower().split())


def test_the_written_training_records_are_complete_and_disjoint_from_the_suite():
    # data/near_miss trains models that the suite measures: no record, pair sentence or domain may be shared.
    folder = ROOT / "data" / "near_miss"
    records = read_behaviour_suite(folder, "train_*.jsonl")
    parts = len(list(folder.glob("train_*.jsonl")))
    counts = {}
    for r in records:
        counts[r["capability"]] = counts.get(r["capability"], 0) + 1
    assert counts == {c: 5 * parts for c in CAPABILITIES}
    suite = read_behaviour_suite(SUITE, "*.jsonl")
    assert len({r["id"] for r in records}) == len(records)
    assert not {r["id"] for r in records} & {r["id"] for r in suite}
    assert not {r["domain"] for r in records} & {r["domain"] for r in suite}
    suite_text = "\n".join(_normal(r[side]["text"]) for r in suite for side in ("contradiction", "control"))
    shared = [s for r in records for side in ("contradiction", "control") for s in r[side]["pair"]
              if _normal(s) in suite_text]
    assert not shared


def test_suite_files_pin_a_set_that_later_parts_do_not_join(tmp_path):
    # finetune-mpnet-docrank and pack-mpnet-rank pin parts 01-32 this way (probe_matched_rank.py --pattern).
    for name in ("train_part01.jsonl", "train_part19.jsonl", "train_part32.jsonl", "train_part33.jsonl", "notes.txt"):
        (tmp_path / name).write_text("")
    pinned = suite_files(tmp_path, "train_part0?.jsonl,train_part[12]?.jsonl,train_part3[0-2].jsonl")
    assert [p.name for p in pinned] == ["train_part01.jsonl", "train_part19.jsonl", "train_part32.jsonl"]
    assert [p.name for p in suite_files(tmp_path, "train_part3*.jsonl, train_part33.jsonl")] == [
        "train_part32.jsonl", "train_part33.jsonl"]  # a file two globs match comes once
    with pytest.raises(ValueError, match="E189"):
        suite_files(tmp_path, "train_part9?.jsonl")


def test_several_globs_read_the_files_any_of_them_matches():
    # The shipped second stage's recipe reads parts 01-16 of data/near_miss, which no single glob names.
    folder = ROOT / "data" / "near_miss"
    shipped = read_behaviour_suite(folder, "train_part0?.jsonl, train_part1[0-6].jsonl")
    assert len(shipped) == 800
    assert {r["id"].split("-")[0] for r in shipped} == {f"nm{k:02d}" for k in range(1, 17)}
    # A file matched by two globs is read once (a duplicate id would raise).
    assert len(read_behaviour_suite(folder, "train_part01.jsonl,train_part0[1-2].jsonl")) == 100
    with pytest.raises(ValueError, match="E189"):
        read_behaviour_suite(folder, "dev_*.jsonl,test_*.jsonl")
