"""Classification metrics: per-class (one-vs-rest) MCC, AUROC, F1, P, R.

Thin wrappers over scikit-learn so that every caller computes the same
figures the same way.
"""
from typing import Dict, Hashable, List, Optional, Sequence

from ..errors import Errors


def mcc_per_class(
    y_true: Sequence[Hashable],
    y_pred: Sequence[Hashable],
    classes: Sequence[Hashable],
) -> Dict[str, float]:
    """Matthews correlation of each class against the rest.

    y_true (Sequence[Hashable]): Ground-truth labels, one per comparison.
    y_pred (Sequence[Hashable]): Predicted labels, aligned with `y_true`.
    classes (Sequence[Hashable]): The classes to score (one-vs-rest each).
    RETURNS (Dict[str, float]): MCC per class; 0.0 where a class never
        occurs on either side (scikit-learn's convention).
    """
    from sklearn.metrics import matthews_corrcoef

    if len(y_true) != len(y_pred):
        raise ValueError(Errors.E140.format(n_true=len(y_true), n_pred=len(y_pred)))
    scores = {}
    for c in classes:
        true = [t == c for t in y_true]
        pred = [p == c for p in y_pred]
        # One value on both sides (class never or always there): MCC is 0 by
        # convention; computed here to spare scikit-learn's warning.
        scores[str(c)] = 0.0 if len(set(true) | set(pred)) < 2 else float(matthews_corrcoef(true, pred))
    return scores


def binary_scores(
    y_true: Sequence[int],
    scores: Sequence[float],
    *,
    threshold: float = 0.5,
) -> Dict[str, Optional[float]]:
    """AUROC, F1, precision and recall of a binary task (positive = 1), as percentages.

    y_true (Sequence[int]): Gold labels, 0 or 1.
    scores (Sequence[float]): Score of the positive class per item.
    threshold (float): Scores at or above it count as positive for F1/P/R.
    RETURNS (Dict[str, Optional[float]]): `auroc`, `f1`, `precision`,
        `recall` in percent (AUROC is None when only one class is present)
        and `n`.
    """
    from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

    if len(y_true) != len(scores):
        raise ValueError(Errors.E140.format(n_true=len(y_true), n_pred=len(scores)))
    y_pred: List[int] = [int(s >= threshold) for s in scores]
    auroc = None if len(set(y_true)) < 2 else 100.0 * float(roc_auc_score(y_true, scores))
    return {
        "auroc": auroc,
        "f1": 100.0 * float(f1_score(y_true, y_pred, zero_division=0)),
        "precision": 100.0 * float(precision_score(y_true, y_pred, zero_division=0)),
        "recall": 100.0 * float(recall_score(y_true, y_pred, zero_division=0)),
        "n": len(y_true),
    }
