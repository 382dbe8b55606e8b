"""A learned, calibrated and symmetric score for a pair of statement units.

The NLI model scores a pair in both directions, and the two are not the same:
"X donated a kidney." -> "X never donated a kidney." 0.99, the reverse 0.32. A
fixed rule (min, mean or max of the two) either misses half of such pairs or
doubles the false alarms. `PairScoreModel` is a logistic regression, fitted on
held-out document pairs (`scripts/nli/fit_pair_scorer.py`), over

- the NLI probabilities of both directions, put in an order-free form (the
  larger and the smaller P(contradiction), P(entailment), P(neutral)), so the
  score of (a, b) is the score of (b, a);
- the alignment features of `spacy_inconsistency.alignment` (same subject?
  another time? a hedge? conflicting numbers, dates, names, places?), times the
  larger P(contradiction), and alone (the shipped scorer is fitted "gated": the
  features' own weights are held at zero, so they scale the NLI evidence but
  never make a contradiction of a pair the NLI model does not find one).

Its output is a probability (reported with ECE), and it comes with the document
threshold chosen on held-out data. The weights are a small JSON file beside the
NLI model they were fitted for (`pair_scorer.json`), with a second set fitted on
the NLI features alone for languages without alignment features.
"""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy

from .alignment import FEATURE_NAMES
from .calibration import clipped_logit
from .errors import Errors

PAIR_SCORER_FILE = "pair_scorer.json"
NLI_FEATURE_NAMES = ("c_max", "c_min", "e_max", "e_min", "n_max", "n_min")
# Every alignment feature also enters times the larger P(contradiction): it changes what
# a high P(contradiction) means (same subject? another time?).
INTERACTIONS = tuple(FEATURE_NAMES)
EPS = 1e-6
LABELS = ("entailment", "neutral", "contradiction")


def _logit(p: numpy.ndarray) -> numpy.ndarray:
    return clipped_logit(p, EPS)


def _sigmoid(z: numpy.ndarray) -> numpy.ndarray:
    return 1.0 / (1.0 + numpy.exp(-z))


def nli_features(forward: numpy.ndarray, backward: numpy.ndarray) -> numpy.ndarray:
    """Order-free NLI features of pairs scored in both directions.

    forward (numpy.ndarray): shape (k, 3): P(entailment), P(neutral),
        P(contradiction) with the first unit as premise.
    backward (numpy.ndarray): shape (k, 3), the second unit as premise.
    RETURNS (numpy.ndarray): shape (k, len(NLI_FEATURE_NAMES)), logits.
    """
    e = numpy.stack([forward[:, 0], backward[:, 0]], axis=1)
    n = numpy.stack([forward[:, 1], backward[:, 1]], axis=1)
    c = numpy.stack([forward[:, 2], backward[:, 2]], axis=1)
    columns = [c.max(1), c.min(1), e.max(1), e.min(1), n.max(1), n.min(1)]
    return _logit(numpy.stack(columns, axis=1).astype(numpy.float64))


def design_matrix(
    forward: numpy.ndarray, backward: numpy.ndarray, alignment: Optional[numpy.ndarray]
) -> numpy.ndarray:
    """The scorer's inputs: NLI features, alignment features and their interactions.

    forward (numpy.ndarray): shape (k, 3), see `nli_features`.
    backward (numpy.ndarray): shape (k, 3).
    alignment (Optional[numpy.ndarray]): shape (k, len(FEATURE_NAMES)), or None
        for the NLI-only scorer.
    RETURNS (numpy.ndarray): float64, shape (k, len(feature_names(alignment is not None))).
    """
    nli = nli_features(forward, backward)
    if alignment is None:
        return nli
    c_max = numpy.clip(numpy.maximum(forward[:, 2], backward[:, 2]), 0.0, 1.0).astype(numpy.float64)[:, None]
    index = [FEATURE_NAMES.index(name) for name in INTERACTIONS]
    alignment = numpy.asarray(alignment, dtype=numpy.float64)
    return numpy.concatenate([nli, alignment, alignment[:, index] * c_max], axis=1)


def _alignment_feature(column: str) -> Optional[str]:
    """The alignment feature a design column reads ("negation_mismatch" for itself and for
    "c_max*negation_mismatch"), None for an NLI column."""
    name = column[len("c_max*"):] if column.startswith("c_max*") else column
    return name if name in FEATURE_NAMES else None


def feature_names(with_alignment: bool) -> List[str]:
    """Column names of `design_matrix`."""
    names = list(NLI_FEATURE_NAMES)
    if with_alignment:
        names += list(FEATURE_NAMES) + [f"c_max*{name}" for name in INTERACTIONS]
    return names


class LogisticModel:
    """A fitted logistic regression stored as plain numbers (no pickle).

    features (List[str]): The columns of `design_matrix` it reads, by name: a model
        fitted before an alignment feature was added reads the columns it knows.
    mean (List[float]): Per-column mean used for standardising.
    scale (List[float]): Per-column scale used for standardising.
    coef (List[float]): One weight per column.
    intercept (float): The bias.
    """

    def __init__(self, features: List[str], mean: List[float], scale: List[float], coef: List[float], intercept: float):
        self.features = list(features)
        self.mean = numpy.asarray(mean, dtype=numpy.float64)
        self.scale = numpy.asarray(scale, dtype=numpy.float64)
        self.coef = numpy.asarray(coef, dtype=numpy.float64)
        self.intercept = float(intercept)

    def columns(self, x: numpy.ndarray) -> numpy.ndarray:
        """Rows as it reads them: rows of its own columns as they are, a whole
        `design_matrix` cut to its columns."""
        x = numpy.asarray(x, dtype=numpy.float64)
        if x.shape[1] != len(self.features):
            names = feature_names(x.shape[1] != len(NLI_FEATURE_NAMES))
            if x.shape[1] != len(names) or not set(self.features) <= set(names):
                raise ValueError(Errors.E251.format(features=self.features, n_columns=x.shape[1], n_design=len(names)))
            x = x[:, [names.index(name) for name in self.features]]
        return x

    def logit(self, x: numpy.ndarray) -> numpy.ndarray:
        """The log-odds of rows (see `columns`), float64."""
        return ((self.columns(x) - self.mean) / self.scale) @ self.coef + self.intercept

    def __call__(self, x: numpy.ndarray) -> numpy.ndarray:
        """P(contradiction) of rows of its own columns, or of a whole `design_matrix` (it reads its own)."""
        return _sigmoid(self.logit(x)).astype(numpy.float32)

    def shares(self, x: numpy.ndarray) -> numpy.ndarray:
        """What each column adds to the log-odds of rows (see `columns`) against the
        same row with that column at 0: weight x value / scale. Shape (k, len(features))."""
        return self.columns(x) * (self.coef / self.scale)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "features": self.features, "mean": self.mean.tolist(), "scale": self.scale.tolist(),
            "coef": self.coef.tolist(), "intercept": self.intercept,
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "LogisticModel":
        return cls(data["features"], data["mean"], data["scale"], data["coef"], data["intercept"])


class DocumentThreshold:
    """The pair score a Doc must reach, growing with the number of pairs compared.

    The highest of k pair scores of a consistent document grows with k: a fixed
    threshold low enough to find a contradiction in a five-sentence paragraph
    flags most 30-sentence news articles. A pair is reported when a consistent
    document of as many pairs would have a pair scoring this high with chance at
    most `alpha` (a Sidak correction, pairs taken as independent):
    1 - F(score) ** k <= alpha, where F is the distribution of pair scores in
    consistent documents (`cdf`, measured on real news articles), so
    the threshold is F^-1((1 - alpha) ** (1 / k)), never below `floor`, and
    never above the first score higher than every consistent pair measured.

    cdf (List[float]): F(s) at s = 0, 1/(len-1), ..., 1, non-decreasing.
    alpha (float): The chance of flagging a consistent document, any length.
    floor (float): The lowest threshold, for documents of very few pairs.
    max_pairs (Optional[int]): Count at most this many pairs (None: no cap). A
        cascade's second stage reads only the first model's top pairs: its
        threshold is fitted on the scores of those (`cdf`) with k capped where the
        measured false alarms of long documents allow (`calibrate_cascade.py`).
    """

    def __init__(self, cdf: Sequence[float], *, alpha: float, floor: float, max_pairs: Optional[int] = None):
        self.cdf = numpy.maximum.accumulate(numpy.asarray(cdf, dtype=numpy.float64))
        if len(self.cdf) < 2 or not 0.0 < alpha < 1.0 or not 0.0 <= floor <= 1.0:
            raise ValueError(Errors.E006.format(name="document threshold", expected="a CDF of 2+ points, 0 < alpha < 1, 0 <= floor <= 1", value=(len(self.cdf), alpha, floor)))
        self.grid = numpy.linspace(0.0, 1.0, len(self.cdf))
        if max_pairs is not None and int(max_pairs) < 1:
            raise ValueError(Errors.E006.format(name="document threshold", expected="max_pairs >= 1 or None", value=max_pairs))
        self.alpha = float(alpha)
        self.floor = float(floor)
        self.max_pairs = None if max_pairs is None else int(max_pairs)

    def __call__(self, n_pairs: int) -> float:
        """The threshold for a Doc with `n_pairs` compared pairs."""
        k = max(int(n_pairs), 1)
        if self.max_pairs is not None:
            k = min(k, self.max_pairs)
        target = (1.0 - self.alpha) ** (1.0 / k)
        # Beyond what the measured distribution can tell (more pairs than it has
        # scores), the threshold stays at the first score above every one measured.
        target = min(target, float(self.cdf[-1]))
        i = int(numpy.searchsorted(self.cdf, target, side="left"))
        return max(self.floor, float(self.grid[i]))

    def to_dict(self) -> Dict[str, Any]:
        data = {"cdf": [round(float(x), 7) for x in self.cdf], "alpha": self.alpha, "floor": self.floor}
        if self.max_pairs is not None:
            data["max_pairs"] = self.max_pairs
        return data

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "DocumentThreshold":
        return cls(data["cdf"], alpha=data["alpha"], floor=data["floor"], max_pairs=data.get("max_pairs"))


class PairScoreModel:
    """P(the two units contradict each other), from both NLI directions and alignment.

    full (LogisticModel): Fitted on NLI and alignment features.
    nli_only (LogisticModel): Fitted on NLI features alone (other languages).
    threshold (float): Pair threshold chosen on held-out data (used where the
        number of pairs means nothing, as across documents).
    document_thresholds (Optional[Dict[str, DocumentThreshold]]): Per model
        ("full", "nli_only"), the threshold of a Doc by its number of pairs.
    info (Dict[str, Any]): How it was fitted (data, held-out figures).
    cascade_settings (Optional[Dict[str, Any]]): The settings of the cascade the
        `"cascade"` document threshold was fitted for (`rescore_top_k`, ...); without
        them that rule never applies.
    """

    def __init__(
        self, full: LogisticModel, nli_only: LogisticModel, *, threshold: float,
        document_thresholds: Optional[Dict[str, DocumentThreshold]] = None, info: Optional[Dict[str, Any]] = None,
        cascade_settings: Optional[Dict[str, Any]] = None,
    ):
        # A scorer reads the columns it names, so one fitted before an alignment feature was
        # added keeps its scores; it must name every NLI column and no unknown one.
        for model, with_alignment in ((full, True), (nli_only, False)):
            known = feature_names(with_alignment)
            unknown = [name for name in model.features if name not in known]
            missing = [name for name in NLI_FEATURE_NAMES if name not in model.features]
            if unknown or missing or len(set(model.features)) != len(model.features):
                raise ValueError(Errors.E191.format(expected=known, got=model.features))
        self.full = full
        self.nli_only = nli_only
        self.threshold = float(threshold)
        self.document_thresholds = dict(document_thresholds or {})
        self.info = info or {}
        self.cascade_settings = dict(cascade_settings) if cascade_settings is not None else None

    def fitted_for_cascade(self, cascade: Dict[str, Any]) -> bool:
        """Whether its `"cascade"` document threshold was fitted for a cascade of these settings."""
        return self.cascade_settings is not None and self.cascade_settings == dict(cascade)

    def document_threshold(self, n_pairs: int, *, alignment: bool = True,
                           cascade: Optional[Dict[str, Any]] = None) -> float:
        """The threshold of a Doc with `n_pairs` compared pairs (`threshold` without a
        fitted document threshold). `cascade`: this model re-scores a first model's top
        pairs, chosen by these settings (`rescore_top_k`, ...); its `"cascade"` rule,
        fitted on what such a cascade reads, applies when it was fitted for them."""
        rule = None
        if cascade is not None and alignment and self.fitted_for_cascade(cascade):
            rule = self.document_thresholds.get("cascade")
        rule = rule or self.document_thresholds.get("full" if alignment else "nli_only")
        return rule(n_pairs) if rule is not None else self.threshold

    def __call__(
        self, forward: numpy.ndarray, backward: numpy.ndarray, alignment: Optional[numpy.ndarray] = None
    ) -> numpy.ndarray:
        """Scores of k pairs.

        forward (numpy.ndarray): shape (k, 3): P(entailment), P(neutral), P(contradiction).
        backward (numpy.ndarray): shape (k, 3), the other direction.
        alignment (Optional[numpy.ndarray]): shape (k, len(FEATURE_NAMES)); None
            uses the NLI-only model.
        RETURNS (numpy.ndarray): float32, shape (k,).
        """
        if len(forward) == 0:
            return numpy.zeros(0, dtype=numpy.float32)
        model = self.full if alignment is not None else self.nli_only
        return model(design_matrix(forward, backward, alignment))

    def explain(
        self, forward: numpy.ndarray, backward: numpy.ndarray, alignment: Optional[numpy.ndarray] = None
    ) -> List[Dict[str, Any]]:
        """Why k pairs score what they score (the arguments of `__call__`).

        Each pair gets both directions' NLI probabilities and, when the score read
        alignment features, what each feature that fired added to the score's
        log-odds: its weight times its value, times the larger P(contradiction) for
        its interaction (the shipped scores are gated, so that is all of it), that
        is how much higher the log-odds are than with that feature at 0.
        `without_alignment` is the score with every alignment feature at 0.

        RETURNS (List[Dict[str, Any]]): One per pair: `"nli"` (label -> [P with the
            first unit as premise, P with the second]) and, with alignment,
            `"alignment"` (feature -> log-odds it added, the largest first; features
            at 0 or without weight left out) and `"without_alignment"`.
        """
        forward = numpy.asarray(forward, dtype=numpy.float64).reshape(-1, 3)
        backward = numpy.asarray(backward, dtype=numpy.float64).reshape(-1, 3)
        out: List[Dict[str, Any]] = [
            {"nli": {label: [float(f[n]), float(b[n])] for n, label in enumerate(LABELS)}}
            for f, b in zip(forward, backward)
        ]
        if alignment is None or not len(out):
            return out
        x = self.full.columns(design_matrix(forward, backward, alignment))
        shares, logit = self.full.shares(x), self.full.logit(x)
        owner = [_alignment_feature(name) for name in self.full.features]
        for row, pair_shares, z in zip(out, shares, logit):
            by_feature: Dict[str, float] = {}
            for name, share in zip(owner, pair_shares):
                if name is not None and share != 0.0:
                    by_feature[name] = by_feature.get(name, 0.0) + float(share)
            ranked = sorted(by_feature.items(), key=lambda item: -abs(item[1]))
            row["alignment"] = dict(ranked)
            row["without_alignment"] = float(_sigmoid(z - sum(by_feature.values())))
        return out

    def to_dict(self) -> Dict[str, Any]:
        data = {
            "full": self.full.to_dict(), "nli_only": self.nli_only.to_dict(), "threshold": self.threshold,
            "document_thresholds": {k: v.to_dict() for k, v in self.document_thresholds.items()}, "info": self.info,
        }
        if self.cascade_settings is not None:
            data["cascade_settings"] = self.cascade_settings
        return data

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "PairScoreModel":
        thresholds = {k: DocumentThreshold.from_dict(v) for k, v in (data.get("document_thresholds") or {}).items()}
        info = data.get("info", {})
        settings = data.get("cascade_settings")
        if settings is None and "cascade" in thresholds:  # files written before the field: in `info`
            settings = (info.get("cascade_threshold") or {}).get("cascade")
        if settings is not None and "rescore_top_share" not in settings:
            # Fitted before the second stage read more pairs of long Docs: a fixed top k.
            settings = {**settings, "rescore_top_share": 0.0}
        return cls(
            LogisticModel.from_dict(data["full"]), LogisticModel.from_dict(data["nli_only"]),
            threshold=data["threshold"], info=info, document_thresholds=thresholds, cascade_settings=settings,
        )

    def to_disk(self, path: Union[str, Path]) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf8")

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "PairScoreModel":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf8")))


def find_pair_scorer(model_dir: Optional[Path], *, model_name: str) -> PairScoreModel:
    """The pair scorer fitted for an NLI model: `pair_scorer.json` in its directory.

    model_dir (Optional[Path]): The NLI model's local directory (None for a hub model).
    model_name (str): For the error message.
    RETURNS (PairScoreModel): The scorer.
    """
    path = Path(model_dir) / PAIR_SCORER_FILE if model_dir is not None else None
    if path is None or not path.exists():
        raise ValueError(Errors.E192.format(name=model_name, path=path))
    return PairScoreModel.from_disk(path)


def stack_probabilities(probs: Dict[str, numpy.ndarray], n: int) -> numpy.ndarray:
    """(n, 3) array of P(entailment), P(neutral), P(contradiction) from a label dict.

    A model without a neutral label (entailment / contradiction only) gets
    P(neutral) = 0.
    """
    columns: Sequence[numpy.ndarray] = [
        probs.get(label, numpy.zeros(n, dtype=numpy.float32)) for label in LABELS
    ]
    return numpy.stack(columns, axis=1).astype(numpy.float32)
