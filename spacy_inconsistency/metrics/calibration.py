"""Calibration and threshold metrics for scores in [0, 1] against binary labels.

ECE as in the SCALE paper (section 5.3, after Guo et al. 2017): K equal-width
bins over [0, 1]; in each bin the gap between the mean score and the share of
positive (consistent) examples, weighted by the bin's share of the samples.
The paper explains calibration as "a score of 0.2 would have a 20%
probability of being classified as 1", which is this reading of its
equations (1)-(3) for a binary score; comparing bin accuracy of thresholded
predictions with the raw score instead would call a perfectly calibrated
0.1 bin 0.8 off.
"""
from typing import Any, Dict, Optional, Sequence, Union

import numpy
from pathlib import Path

from ..errors import Errors

ECE_BINS = 15


def _arrays(labels: Sequence[int], scores: Sequence[float]):
    y = numpy.asarray(labels, dtype=numpy.int64)
    p = numpy.asarray(scores, dtype=numpy.float64)
    if y.shape != p.shape or y.ndim != 1:
        raise ValueError(Errors.E006.format(name="labels and scores", expected="two lists of one length",
                                            value=(y.shape, p.shape)))
    if len(y) and ((p < 0) | (p > 1) | numpy.isnan(p)).any():
        raise ValueError(Errors.E006.format(name="scores", expected="probabilities in [0, 1]", value="out of range"))
    return y, p


def reliability_bins(labels: Sequence[int], scores: Sequence[float], *, n_bins: int = ECE_BINS) -> Dict[str, list]:
    """Per bin: sample count, mean score (confidence) and accuracy of the predicted labels.

    Bins are equal-width over [0, 1]; a score on an inner edge goes to the
    upper bin, 1.0 to the last bin.

    labels (Sequence[int]): 1 = positive (consistent), 0 = negative.
    scores (Sequence[float]): P(positive).
    n_bins (int): Number of bins.
    RETURNS (Dict[str, list]): "edges", "count", "confidence", "accuracy", "positive_rate".
    """
    y, p = _arrays(labels, scores)
    edges = numpy.linspace(0.0, 1.0, n_bins + 1)
    index = numpy.clip(numpy.digitize(p, edges[1:-1], right=False), 0, n_bins - 1)
    predicted = (p >= 0.5).astype(numpy.int64)
    out: Dict[str, list] = {"edges": edges.tolist(), "count": [], "confidence": [], "accuracy": [], "positive_rate": []}
    for b in range(n_bins):
        mask = index == b
        n = int(mask.sum())
        out["count"].append(n)
        out["confidence"].append(float(p[mask].mean()) if n else None)
        out["accuracy"].append(float((predicted[mask] == y[mask]).mean()) if n else None)
        out["positive_rate"].append(float(y[mask].mean()) if n else None)
    return out


def expected_calibration_error(labels: Sequence[int], scores: Sequence[float], *, n_bins: int = ECE_BINS) -> float:
    """ECE = sum_k |B_k|/n * |pos(B_k) - conf(B_k)|, pos = share of label 1 in the bin.

    labels (Sequence[int]): 1 = positive, 0 = negative.
    scores (Sequence[float]): P(positive), the model output.
    n_bins (int): Number of equal-width bins (15 in the evaluation).
    RETURNS (float): The ECE; 0 is perfect calibration.
    """
    bins = reliability_bins(labels, scores, n_bins=n_bins)
    n = sum(bins["count"])
    if n == 0:
        return float("nan")
    total = 0.0
    for count, conf, acc in zip(bins["count"], bins["confidence"], bins["positive_rate"]):
        if count:
            total += count / n * abs(acc - conf)
    return float(total)


def best_f1_threshold(labels: Sequence[int], scores: Sequence[float], *, positive: int = 0) -> Dict[str, float]:
    """The score threshold with the best F1 for detecting the `positive` class.

    As in the SCALE evaluation, inconsistency (label 0) is what is detected:
    a sample is flagged when its score is below the threshold.

    labels (Sequence[int]): 1 = consistent, 0 = inconsistent.
    scores (Sequence[float]): P(consistent).
    positive (int): The class to detect (0: flag low scores; 1: flag high scores).
    RETURNS (Dict[str, float]): "threshold", "f1", "precision", "recall", "macro_f1"
        (macro F1 over both classes at that threshold).
    """
    from sklearn.metrics import f1_score, precision_recall_curve

    y, p = _arrays(labels, scores)
    if positive == 0:
        target, signal = (y == 0).astype(int), -p
    else:
        target, signal = (y == 1).astype(int), p
    precision, recall, thresholds = precision_recall_curve(target, signal)
    f1 = numpy.where(precision + recall > 0, 2 * precision * recall / numpy.maximum(precision + recall, 1e-12), 0.0)
    best = int(numpy.argmax(f1[:-1])) if len(thresholds) else 0
    cut = float(thresholds[best]) if len(thresholds) else 0.0
    flagged = signal >= cut
    threshold = -cut if positive == 0 else cut
    predicted = numpy.where(flagged, positive, 1 - positive)
    return {
        "threshold": float(threshold),
        "f1": float(f1[best]),
        "precision": float(precision[best]),
        "recall": float(recall[best]),
        "macro_f1": float(f1_score(y, predicted, average="macro")),
    }


def binary_metrics(labels: Sequence[int], scores: Sequence[float], *, n_bins: int = ECE_BINS) -> Dict[str, Any]:
    """ROC-AUC, Pearson, Kendall tau, best-F1 threshold and ECE of scores against labels.

    labels (Sequence[int]): 1 = consistent, 0 = inconsistent.
    scores (Sequence[float]): P(consistent).
    n_bins (int): ECE bins.
    RETURNS (Dict[str, Any]): The metrics (floats) and the counts.
    """
    from scipy.stats import kendalltau, pearsonr
    from sklearn.metrics import roc_auc_score

    y, p = _arrays(labels, scores)
    return {
        "n": int(len(y)),
        "n_consistent": int(y.sum()),
        "roc_auc": float(roc_auc_score(y, p)),
        "pearson": float(pearsonr(p, y)[0]),
        "kendall_tau": float(kendalltau(p, y)[0]),
        "best_f1": best_f1_threshold(y, p, positive=0),
        "ece": expected_calibration_error(y, p, n_bins=n_bins),
    }


def plot_reliability(
    curves: Dict[str, Dict[str, list]], path: Union[str, Path], *, title: Optional[str] = None
) -> Path:
    """Reliability diagram: positive rate and accuracy per confidence bin, one line per dataset.

    curves (Dict[str, Dict[str, list]]): Dataset name -> `reliability_bins` output.
    path (Union[str, Path]): The PNG to write.
    title (Optional[str]): Figure title.
    RETURNS (Path): The PNG path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    for name, bins in curves.items():
        xs = [c for c, n in zip(bins["confidence"], bins["count"]) if n]
        ys = [r for r, n in zip(bins["positive_rate"], bins["count"]) if n]
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("mean score in bin (P consistent)")
    ax.set_ylabel("share of consistent examples in bin")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
