"""Calibration maps for SCALE scores: P(the source supports the claim) from the model's score.

An entailment model's P(entailed) ranks claims but need not be a probability that they are
supported: mpnet-lora scores TRUE's consistent and inconsistent claims alike above 0.999, so
a threshold of 0.5 calls nearly every claim supported. `ScoreCalibration` is Platt scaling on
the logit of the score, P = sigmoid(slope * logit(score) + intercept), fitted on labelled
claims (`scripts/scale/fit_calibration.py`, TRUE). It is monotone, so calibrated scores rank
claims exactly as the model's scores do (same ROC-AUC); what changes is what a score means.
The map is a small JSON file (`scale_calibration.json`) beside the model it was fitted for.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import numpy

from .errors import Errors

CALIBRATION_FILE = "scale_calibration.json"
# float64 keeps 1 - 1e-7 apart from 1; scores at 1.0 (a saturated softmax) get logit 16.1.
EPS = 1e-7


def clipped_logit(p: Union[Sequence[float], numpy.ndarray], eps: float) -> numpy.ndarray:
    """log(p / (1 - p)) of probabilities clipped to [eps, 1 - eps], so 0 and 1 stay finite."""
    p = numpy.clip(numpy.asarray(p, dtype=numpy.float64), eps, 1 - eps)
    return numpy.log(p / (1 - p))


def score_logit(scores: Union[Sequence[float], numpy.ndarray]) -> numpy.ndarray:
    """logit(score) for the calibration map (float64, clipped at EPS)."""
    return clipped_logit(scores, EPS)


@dataclass(frozen=True)
class ScoreCalibration:
    """P(supported) = sigmoid(slope * logit(score) + intercept).

    slope (float): Must be positive (a map that reverses the ranking is refused).
    intercept (float): The offset.
    meta (Dict[str, Any]): Where and how it was fitted (model, data, rows, held-out ECE).
    """

    slope: float
    intercept: float
    meta: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (numpy.isfinite(self.slope) and numpy.isfinite(self.intercept)) or self.slope <= 0:
            raise ValueError(Errors.E247.format(slope=self.slope, intercept=self.intercept))

    def __call__(self, scores: Union[Sequence[float], numpy.ndarray]) -> numpy.ndarray:
        """Calibrated scores, float64, the shape of `scores`."""
        z = self.slope * score_logit(scores) + self.intercept
        return 1.0 / (1.0 + numpy.exp(-z))

    def calibrate(self, score: float) -> float:
        """One calibrated score."""
        return float(self([score])[0])

    @classmethod
    def fit(
        cls,
        scores: Sequence[float],
        labels: Sequence[int],
        *,
        groups: Optional[Sequence[str]] = None,
        meta: Optional[Dict[str, Any]] = None,
    ) -> "ScoreCalibration":
        """Fit the map by maximum likelihood (logistic regression on logit(score)).

        scores (Sequence[float]): The model's scores in [0, 1].
        labels (Sequence[int]): 1 = supported, 0 = not.
        groups (Optional[Sequence[str]]): A dataset name per score; each dataset then weighs
            the same in the fit, whatever its size (so the largest does not set the base rate).
        meta (Optional[Dict[str, Any]]): Stored with the map.
        RETURNS (ScoreCalibration): The fitted map.
        """
        from sklearn.linear_model import LogisticRegression

        y = numpy.asarray(labels, dtype=numpy.int64)
        x = score_logit(scores).reshape(-1, 1)
        if len(y) != len(x) or len(set(y.tolist())) != 2:
            raise ValueError(Errors.E248.format(n_scores=len(x), n_labels=len(y)))
        weight = numpy.ones(len(y))
        if groups is not None:
            names = numpy.asarray(list(groups))
            for name in set(names.tolist()):
                mask = names == name
                weight[mask] = len(y) / (len(set(names.tolist())) * mask.sum())
        model = LogisticRegression(C=1e6, max_iter=1000).fit(x, y, sample_weight=weight)
        return cls(float(model.coef_[0, 0]), float(model.intercept_[0]), dict(meta or {}))

    def to_dict(self) -> Dict[str, Any]:
        return {"form": "platt-logit", "slope": self.slope, "intercept": self.intercept, "meta": self.meta}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ScoreCalibration":
        if data.get("form") != "platt-logit" or "slope" not in data or "intercept" not in data:
            raise ValueError(Errors.E249.format(keys=sorted(data)))
        return cls(float(data["slope"]), float(data["intercept"]), dict(data.get("meta") or {}))

    def to_disk(self, path: Union[str, Path]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "ScoreCalibration":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(Errors.E250.format(path=path))
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


def shipped_calibration(model_name: str) -> Optional[Path]:
    """The calibration file fitted for an entailment model, if one exists.

    model_name (str): The model setting ("mpnet-lora", "default", a local folder, a hub id).
    RETURNS (Optional[Path]): `scale_calibration.json` in the folder of "mpnet-lora"'s shipped
        adapters, or in a local model's folder; None when there is none.
    """
    from .backends.loading import MPNET_LORA_MODEL, resolve_model

    if model_name == MPNET_LORA_MODEL:
        # Not the built model's folder: that is named after the adapters' fingerprint and
        # built once, so a map added later would not reach it.
        from .backends.mpnet_lora import adapter_dir

        folder: Optional[Path] = adapter_dir()
    else:
        target, local = resolve_model(model_name)
        folder = Path(target) if local else None
    if folder is not None and (folder / CALIBRATION_FILE).is_file():
        return folder / CALIBRATION_FILE
    return None
