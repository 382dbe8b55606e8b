"""Scorers for `spacy.training.Example`s, referenced from configs through `@scorers`."""
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from spacy.training import Example
from spacy.util import registry

from .extensions import CONTRADICTIONS, HAS_INCONSISTENCY, INCONSISTENCY_SCORE


def _overlaps(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    return a["start_char"] < b["end_char"] and b["start_char"] < a["end_char"]


def _pair_matches(pred: Dict[str, Any], gold: Dict[str, Any]) -> bool:
    (p1, p2), (g1, g2) = pred["units"], gold["units"]
    return (_overlaps(p1, g1) and _overlaps(p2, g2)) or (_overlaps(p1, g2) and _overlaps(p2, g1))


def score_contradictions(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Optional[float]]:
    """Pair-level precision, recall and F1 of `doc._.contradictions`.

    A predicted pair is correct when its two units overlap the two units of
    a gold pair (in either order), compared by character offsets.

    examples (Iterable[Example]): Predicted and reference Docs; the reference
        carries the gold pairs in `doc._.contradictions`.
    RETURNS (Dict[str, Optional[float]]): `contradiction_p`, `_r`, `_f`
        (None when undefined).
    """
    tp = n_pred = n_gold = 0
    for eg in examples:
        pred = getattr(eg.predicted._, CONTRADICTIONS) or []
        gold = getattr(eg.reference._, CONTRADICTIONS) or []
        n_pred += len(pred)
        n_gold += len(gold)
        tp += sum(1 for p in pred if any(_pair_matches(p, g) for g in gold))
    p = tp / n_pred if n_pred else None
    r = tp / n_gold if n_gold else None
    f = 2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else (0.0 if p is not None and r is not None else None)
    return {"contradiction_p": p, "contradiction_r": r, "contradiction_f": f}


@registry.scorers("spacy-inconsistency.contradiction_scorer.v1")
def make_contradiction_scorer() -> Callable[..., Dict[str, Optional[float]]]:
    return score_contradictions


def score_inconsistency(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Optional[float]]:
    """Document-level scores of `doc._.has_inconsistency` and `doc._.inconsistency_score`.

    examples (Iterable[Example]): The reference Docs carry the gold
        `doc._.has_inconsistency` (True / False).
    RETURNS (Dict[str, Optional[float]]): `inconsistency_acc`, `_p`, `_r`,
        `_f`, and `inconsistency_auc` (ROC-AUC of the score; None when only
        one class is present).
    """
    from sklearn.metrics import precision_recall_fscore_support, roc_auc_score

    gold: List[bool] = []
    pred: List[bool] = []
    scores: List[float] = []
    for eg in examples:
        label = getattr(eg.reference._, HAS_INCONSISTENCY)
        if label is None:
            continue
        gold.append(bool(label))
        pred.append(bool(getattr(eg.predicted._, HAS_INCONSISTENCY)))
        scores.append(float(getattr(eg.predicted._, INCONSISTENCY_SCORE) or 0.0))
    if not gold:
        return {key: None for key in ("inconsistency_acc", "inconsistency_p", "inconsistency_r", "inconsistency_f", "inconsistency_auc")}
    p, r, f, _ = precision_recall_fscore_support(
        gold, pred, average="binary", zero_division=0
    )
    acc = sum(g == q for g, q in zip(gold, pred)) / len(gold)
    auc = roc_auc_score(gold, scores) if len(set(gold)) == 2 else None
    return {
        "inconsistency_acc": acc,
        "inconsistency_p": float(p),
        "inconsistency_r": float(r),
        "inconsistency_f": float(f),
        "inconsistency_auc": None if auc is None else float(auc),
    }


@registry.scorers("spacy-inconsistency.inconsistency_scorer.v1")
def make_inconsistency_scorer() -> Callable[..., Dict[str, Optional[float]]]:
    return score_inconsistency
