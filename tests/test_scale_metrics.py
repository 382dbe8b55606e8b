"""Calibration metrics and the TRUE reader used by the SCALE evaluation."""
from pathlib import Path

import pytest

from spacy_inconsistency.corpora.true import read_true
from spacy_inconsistency.metrics.calibration import (
    best_f1_threshold, binary_metrics, expected_calibration_error, plot_reliability, reliability_bins,
)

TRUE_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "true"


def test_ece_by_hand():
    # Bin [0.2, 0.267): two scores 0.2, one of two positive -> |0.5 - 0.2| = 0.3, weight 2/4.
    # Bin [0.933, 1]: two scores 0.95, both positive -> |1 - 0.95| = 0.05, weight 2/4.
    labels, scores = [1, 0, 1, 1], [0.2, 0.2, 0.95, 0.95]
    assert expected_calibration_error(labels, scores) == pytest.approx(0.5 * 0.3 + 0.5 * 0.05)
    bins = reliability_bins(labels, scores)
    assert sum(bins["count"]) == 4 and bins["count"][3] == 2 and bins["count"][14] == 2
    assert expected_calibration_error([1, 0], [1.0, 0.0]) == 0.0


def test_best_f1_threshold_flags_low_scores():
    labels = [0, 0, 1, 1, 1]
    scores = [0.1, 0.3, 0.35, 0.8, 0.9]
    best = best_f1_threshold(labels, scores)
    assert best["f1"] == pytest.approx(1.0)
    assert best["threshold"] == pytest.approx(0.3)
    metrics = binary_metrics(labels, scores)
    assert metrics["roc_auc"] == pytest.approx(1.0)
    assert metrics["kendall_tau"] > 0.7


def test_reliability_plot(tmp_path):
    bins = reliability_bins([1, 0, 1, 0], [0.9, 0.1, 0.6, 0.4])
    path = plot_reliability({"toy": bins}, tmp_path / "calibration.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(not TRUE_DIR.is_dir(), reason="needs ../shared/data/true")
def test_read_true():
    rows = read_true(TRUE_DIR / "qags_xsum.csv")
    assert len(rows) == 239
    assert {r.label for r in rows} == {0, 1}
    assert rows[0].source.startswith("A g4s security van has been robbed")
    sample = read_true(TRUE_DIR / "qags_xsum.csv", limit=50, seed=1)
    assert len(sample) == 50 and sample == read_true(TRUE_DIR / "qags_xsum.csv", limit=50, seed=1)
    assert [r.row for r in sample] == sorted(r.row for r in sample)
