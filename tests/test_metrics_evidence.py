"""Evidence metrics on hand-worked examples (paper Section 3, Appendices B and H)."""
import math
import warnings

import pytest

from spacy_inconsistency.metrics import evidence_metrics, evidence_scores, tfidf_cosine

A = "The committee approved the budget on Monday."
B = "A man is playing a guitar on the street."
C = "The sky is blue over the old harbour."
D = "It is raining heavily in the city tonight."
E = "Dogs, cats and birds live in the garden."
F = "Alice was at home all evening."
G = "Bob was seen at the station."
H = "The minister visited three schools."
I_ = "Prices of bread doubled in spring."
J = "The river flooded the lower town."
K = "A new bridge opened in March."
L = "Voters elected a new mayor."
M = "The museum closed for repairs."

GOLD_LABELS = [True, True, True, True, False, False]
GOLD_EVIDENCE = [[A], [C, D], [E], [F], [], []]
PRED_LABELS = [True, True, False, True, True, False]
# d1: A found plus one extra; d2: one of two found (written slightly differently: matches by TF-IDF);
# d3: missed (predicted no); d4: three wrong sentences; d5: false positive with four; d6: true negative.
PRED_EVIDENCE = [[A, B], ["the sky is blue over the old harbour"], [], [G, H, I_], [J, K, L, M], []]
RETRIES = [3, 2, 1, 4, 5, 1]


def test_hand_worked_example():
    m = evidence_metrics(GOLD_LABELS, GOLD_EVIDENCE, PRED_LABELS, PRED_EVIDENCE, retries=RETRIES)
    # TP = 3 (d1, d2, d4), FN = 1 (d3), FP = 1 (d5), TN = 1 (d6).
    assert (m["TP"], m["FN"], m["FP"], m["TN"]) == (3, 1, 1, 1)
    assert m["accuracy"] == pytest.approx(4 / 6)
    assert m["precision"] == pytest.approx(3 / 4)
    assert m["recall"] == m["TPR"] == pytest.approx(3 / 4)
    assert m["f1"] == pytest.approx(0.75)
    assert m["FPR"] == pytest.approx(1 / 2) and m["TNR"] == pytest.approx(1 / 2)
    assert m["FNR"] == pytest.approx(1 / 4)
    # Per positive doc (EH, EP, ER): d1 (1, 1/2, 1), d2 (0, 1/1, 1/2), d3 (0, 0, 0), d4 (0, 0, 0).
    assert m["EHR"] == pytest.approx(1 / 4) and m["EHRC"] == pytest.approx(1 / 3)
    assert m["EPR"] == pytest.approx(1.5 / 4) and m["EPRC"] == pytest.approx(1.5 / 3)
    assert m["ERR"] == pytest.approx(1.5 / 4) and m["ERRC"] == pytest.approx(1.5 / 3)
    # |Ê| over predicted-yes docs: gold yes d1 2, d2 1, d4 3; gold no d5 4.
    assert m["avg_sentences_pos"] == pytest.approx(2.0)
    assert m["avg_sentences_neg"] == pytest.approx(4.0)
    assert m["avg_sentences_all"] == pytest.approx(10 / 4)
    assert m["avg_retries_pos"] == pytest.approx(10 / 4)
    assert m["avg_retries_neg"] == pytest.approx(3.0)
    assert m["avg_retries_all"] == pytest.approx(16 / 6)
    assert (m["n"], m["n_pos"], m["n_neg"]) == (6, 4, 2)


def test_appendix_b_identities_and_bounds():
    m = evidence_metrics(GOLD_LABELS, GOLD_EVIDENCE, PRED_LABELS, PRED_EVIDENCE)
    for rate in ("EHR", "EPR", "ERR"):
        assert m[rate] == pytest.approx(m["TPR"] * m[rate + "C"])
        assert 0 <= m[rate] <= m[rate + "C"] <= 1
    assert "avg_retries_all" not in m


def test_evidence_of_a_no_prediction_counts_as_empty():
    # d3 predicted "no" but carries its true evidence: it must not count as a hit.
    pred = [list(e) for e in PRED_EVIDENCE]
    pred[2] = [E]
    with pytest.warns(UserWarning, match="W111"):
        m = evidence_metrics(GOLD_LABELS, GOLD_EVIDENCE, PRED_LABELS, pred)
    assert m["EHR"] == pytest.approx(1 / 4)
    assert m["EHR"] == pytest.approx(m["TPR"] * m["EHRC"])


def test_tfidf_threshold_matching_by_hand():
    # Fitted on the two sentences: 4 shared words (idf 1), one own word each (idf ln(3/2) + 1).
    a, b = "Taxes will fall next year.", "Taxes will rise next year."
    own = math.log(3 / 2) + 1
    expected = 4 / (4 + own ** 2)
    assert tfidf_cosine([a], [b])[0, 0] == pytest.approx(expected)
    assert expected == pytest.approx(0.6694, abs=1e-4)
    assert evidence_scores([a], [b], threshold=0.8) == {"EH": 0.0, "EP": 0.0, "ER": 0.0, "matched": 0}
    assert evidence_scores([a], [b], threshold=0.6) == {"EH": 1.0, "EP": 1.0, "ER": 1.0, "matched": 1}
    # Case and punctuation do not matter; a sentence with no word token matches only itself.
    assert tfidf_cosine(["TAXES will fall next year"], [a])[0, 0] == pytest.approx(1.0)
    assert tfidf_cosine(["..."], ["...", "!!"]).tolist() == [[1.0, 0.0]]


def test_ep_is_capped_when_one_prediction_matches_two_gold_sentences():
    gold = ["The budget was approved.", "The budget was approved!"]
    assert evidence_scores(gold, ["the budget was approved"]) == {"EH": 1.0, "EP": 1.0, "ER": 1.0, "matched": 2}


def test_undefined_rates_are_nan_and_lengths_checked():
    m = evidence_metrics([False, False], [[], []], [False, True], [[], [A]])
    assert math.isnan(m["EHR"]) and math.isnan(m["EHRC"]) and math.isnan(m["recall"])
    assert m["FPR"] == pytest.approx(0.5) and m["avg_sentences_neg"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="E128"):
        evidence_metrics([True], [[A]], [True, False], [[A], []])
    with pytest.raises(ValueError, match="E128"):
        evidence_metrics([True], [[A]], [True], [[A]], retries=[1, 2])
    with pytest.raises(ValueError, match="E006"):
        evidence_metrics([True], [[]], [True], [[A]])


def test_perfect_prediction():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = evidence_metrics([True, False], [[A, B], []], [True, False], [[B, A], []])
    for key in ("accuracy", "precision", "recall", "f1", "TNR", "EHR", "EHRC", "EPR", "EPRC", "ERR", "ERRC"):
        assert m[key] == 1.0, key
    assert m["FPR"] == 0.0 and m["FNR"] == 0.0


def test_repeated_quotes_count_once():
    # Ê is a set: A quoted three times (case/punctuation differ) is one sentence, so EP = 1/2, not 3/4.
    m = evidence_metrics([True], [[A]], [True], [[A, A.lower(), A.rstrip("."), B]])
    assert m["avg_sentences_all"] == 2.0
    assert m["EPR"] == pytest.approx(0.5) and m["EHR"] == 1.0
