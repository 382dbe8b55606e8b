"""SCALE score calibration: the Platt map on logit(score), its file, and `scale_scorer`'s use of it."""
import json
import math

import numpy
import pytest
import spacy

import spacy_inconsistency.components.scale  # noqa: F401  (registers the factory)
import spacy_inconsistency.segment  # noqa: F401
from spacy_inconsistency.calibration import CALIBRATION_FILE, ScoreCalibration, score_logit, shipped_calibration
from spacy_inconsistency.components.scale import make_claims_doc
from scale_fixtures import PARAGRAPH

CLAIMS = ["The budget was approved.", "It is raining."]


def _sigmoid(z):
    return 1.0 / (1.0 + numpy.exp(-z))


def test_fit_recovers_a_known_map():
    rng = numpy.random.default_rng(0)
    scores = _sigmoid(rng.normal(4.0, 3.0, 20000))
    labels = (rng.random(20000) < _sigmoid(0.5 * score_logit(scores) - 1.0)).astype(int)
    fitted = ScoreCalibration.fit(scores, labels)
    assert fitted.slope == pytest.approx(0.5, abs=0.03)
    assert fitted.intercept == pytest.approx(-1.0, abs=0.1)
    # Monotone: the ranking (and so the ROC-AUC) is the model's.
    assert numpy.array_equal(numpy.argsort(fitted(scores), kind="stable"), numpy.argsort(scores, kind="stable"))


def test_each_dataset_weighs_the_same():
    rng = numpy.random.default_rng(1)
    big = _sigmoid(rng.normal(2.0, 2.0, 900))
    small = _sigmoid(rng.normal(0.0, 2.0, 100))
    y_big = (rng.random(900) < 0.8).astype(int)
    y_small = (rng.random(100) < 0.3).astype(int)
    weighted = ScoreCalibration.fit(numpy.concatenate([big, small]), numpy.concatenate([y_big, y_small]),
                                    groups=["big"] * 900 + ["small"] * 100)
    # The same as the small set repeated to the big one's size, without weights.
    replicated = ScoreCalibration.fit(numpy.concatenate([big] + [small] * 9), numpy.concatenate([y_big] + [y_small] * 9))
    assert weighted.slope == pytest.approx(replicated.slope, rel=1e-3)
    assert weighted.intercept == pytest.approx(replicated.intercept, rel=1e-3, abs=1e-3)
    unweighted = ScoreCalibration.fit(numpy.concatenate([big, small]), numpy.concatenate([y_big, y_small]))
    assert abs(unweighted.intercept - weighted.intercept) > 0.05


def test_scores_at_the_edges_stay_finite_and_ordered():
    cal = ScoreCalibration(2.0, -3.0)
    out = cal([0.0, 1e-9, 0.5, 0.9999999, 1.0])
    assert numpy.isfinite(out).all() and (numpy.diff(out) >= 0).all()
    assert cal.calibrate(0.5) == pytest.approx(_sigmoid(-3.0))


def test_bad_maps_and_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"\[E247\]"):
        ScoreCalibration(-1.0, 0.0)
    with pytest.raises(ValueError, match=r"\[E248\]"):
        ScoreCalibration.fit([0.2, 0.9], [1, 1])
    (tmp_path / "bad.json").write_text(json.dumps({"slope": 1.0}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[E249\]"):
        ScoreCalibration.from_disk(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match=r"\[E250\]"):
        ScoreCalibration.from_disk(tmp_path / "missing.json")


def test_file_round_trip(tmp_path):
    cal = ScoreCalibration(1.5, -2.25, {"model": "x"})
    cal.to_disk(tmp_path / "c.json")
    assert ScoreCalibration.from_disk(tmp_path / "c.json") == cal


def test_the_shipped_map_is_mpnet_loras_and_keeps_its_ranking():
    path = shipped_calibration("mpnet-lora")
    assert path is not None and path.name == CALIBRATION_FILE
    cal = ScoreCalibration.from_disk(path)
    assert cal.meta["model"] == "mpnet-lora" and cal.slope > 0
    # The model's scores crowd just below 1; the map spreads them over (0, 1).
    assert cal.calibrate(0.9) < 0.5 < cal.calibrate(0.99999)


def _pipeline(tiny_t5, calibration):
    nlp = spacy.blank("en")
    nlp.add_pipe("inconsistency_segmenter")
    nlp.add_pipe("scale_scorer", config={"model": {"model": tiny_t5, "device": "cpu"}, "chunk_size": 70,
                                         "calibration": calibration})
    return nlp


def test_scorer_applies_a_map_and_keeps_the_raw_score(tmp_path, tiny_t5):
    ScoreCalibration(2.0, -1.0).to_disk(tmp_path / "map.json")
    plain = _pipeline(tiny_t5, None)(make_claims_doc(spacy.blank("en"), PARAGRAPH, CLAIMS))._.inconsistency_scale
    nlp = _pipeline(tiny_t5, str(tmp_path / "map.json"))
    result = nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS))._.inconsistency_scale
    assert result["calibrated"] and not plain["calibrated"]
    for claim, raw in zip(result["claims"], plain["claims"]):
        assert raw["score"] == raw["raw_score"]
        assert claim["raw_score"] == pytest.approx(raw["score"], abs=1e-6)
        p = claim["raw_score"]
        assert claim["score"] == pytest.approx(1 / (1 + math.exp(-(2 * math.log(p / (1 - p)) - 1))), abs=1e-9)
        assert claim["chunk_scores"] == pytest.approx(raw["chunk_scores"], abs=1e-6)
    assert result["score"] == min(c["score"] for c in result["claims"])


def test_a_tiny_model_has_no_shipped_map(tiny_t5):
    nlp = _pipeline(tiny_t5, "auto")
    result = nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS))._.inconsistency_scale
    assert not result["calibrated"] and all(c["score"] == c["raw_score"] for c in result["claims"])


def test_a_missing_map_is_a_clear_error_on_first_use(tmp_path, tiny_t5):
    nlp = _pipeline(tiny_t5, str(tmp_path / "nowhere.json"))
    with pytest.raises(FileNotFoundError, match=r"\[E250\]"):
        nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS))


def test_the_map_travels_with_the_pipeline(tmp_path, tiny_t5):
    path = tmp_path / "map.json"
    ScoreCalibration(0.7, 0.4).to_disk(path)
    nlp = _pipeline(tiny_t5, str(path))
    expected = [c["score"] for c in nlp(make_claims_doc(nlp, PARAGRAPH, CLAIMS))._.inconsistency_scale["claims"]]
    nlp.to_disk(tmp_path / "pipeline")
    data = nlp.to_bytes()
    path.unlink()  # the original map is gone; the saved pipeline holds its own copy
    for loaded in (spacy.load(tmp_path / "pipeline"), _pipeline(tiny_t5, str(path)).from_bytes(data)):
        result = loaded(make_claims_doc(loaded, PARAGRAPH, CLAIMS))._.inconsistency_scale
        assert result["calibrated"]
        assert [c["score"] for c in result["claims"]] == pytest.approx(expected, abs=1e-6)
