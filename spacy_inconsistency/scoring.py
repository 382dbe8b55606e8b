"""Scorers for `spacy.training.Example`s, referenced from configs through `@scorers`."""
from typing import Any, Callable, Dict, Iterable, List, Optional

from spacy.scorer import PRFScore, Scorer
from spacy.training import Example
from spacy.util import registry

from .errors import Errors
from .extensions import (
    CLAIM_LABELS_KEY, CONTRADICTIONS, HAS_INCONSISTENCY, INCONSISTENCY_SCORE, RATIONALE_KEY, SCALE_RESULTS,
)


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


SCALE_KEYS = ("scale_auc", "scale_ece", "scale_f", "scale_acc")


def score_scale(examples: Iterable[Example], *, threshold: float = 0.5, **kwargs: Any) -> Dict[str, Optional[float]]:
    """Claim-level scores of `scale_scorer` against gold claim labels.

    examples (Iterable[Example]): The reference Docs carry one label per claim
        in ``doc.user_data["inconsistency_claim_labels"]`` (True = supported;
        `set_claims(doc, claims, labels=...)`); the predicted Docs carry
        ``doc._.inconsistency_scale``. Docs without labels are skipped.
    threshold (float): A claim is called inconsistent when its SCALE score
        (P(entailed)) is below this.
    RETURNS (Dict[str, Optional[float]]): `scale_auc` (ROC-AUC of the score
        for "supported"), `scale_ece` (15 bins, as the paper), `scale_f` (F1
        of detecting unsupported claims at the threshold) and `scale_acc`;
        None where undefined (no labels, or one class only for the AUC).
    """
    from sklearn.metrics import f1_score, roc_auc_score

    from .metrics.calibration import expected_calibration_error

    gold: List[int] = []
    scores: List[float] = []
    for eg in examples:
        labels = eg.reference.user_data.get(CLAIM_LABELS_KEY)
        if labels is None:
            continue
        result = getattr(eg.predicted._, SCALE_RESULTS) or {}
        claims = [c for c in result.get("claims", []) if result.get("mode") == "claims"]
        if len(claims) != len(labels):
            raise ValueError(Errors.E113.format(n_labels=len(labels), n_claims=len(claims)))
        for label, claim in zip(labels, claims):
            if claim["score"] is None:  # an empty source scores nothing: counted as unsupported
                scores.append(0.0)
            else:
                scores.append(float(claim["score"]))
            gold.append(int(bool(label)))
    if not gold:
        return {key: None for key in SCALE_KEYS}
    flagged = [s < threshold for s in scores]
    unsupported = [g == 0 for g in gold]
    return {
        "scale_auc": float(roc_auc_score(gold, scores)) if len(set(gold)) == 2 else None,
        "scale_ece": expected_calibration_error(gold, scores),
        "scale_f": float(f1_score(unsupported, flagged, zero_division=0)),
        "scale_acc": sum(f == u for f, u in zip(flagged, unsupported)) / len(gold),
    }


@registry.scorers("spacy-inconsistency.scale_scorer.v1")
def make_scale_scorer() -> Callable[..., Dict[str, Optional[float]]]:
    return score_scale


@registry.scorers("spacy-inconsistency.claim_relation_scorer.v1")
def make_claim_relation_scorer() -> Callable:
    """The scorer of `claim_relation_classifier`: exclusive cats and rationale tokens."""
    return score_claim_relation


def score_claim_relation(examples: Iterable[Example], **kwargs: Any) -> Dict[str, Any]:
    """Macro F / AUC of the labels and token P/R/F of the rationales.

    examples (Iterable[Example]): Predicted and reference Docs.
    RETURNS (Dict[str, Any]): `cats_*` (spaCy's textcat scores) and
        `rationale_token_p/r/f` over tokens of side A.
    """
    examples = list(examples)
    labels = kwargs.pop("labels", None)
    if labels is None:
        labels = sorted({k for eg in examples for k in eg.reference.cats})
    scores = Scorer.score_cats(examples, "cats", labels=labels, multi_label=False,
                               positive_label=None, threshold=0.0)
    key = kwargs.get("rationale_key", RATIONALE_KEY)
    prf = PRFScore()
    seen = False
    for eg in examples:
        if key not in eg.reference.spans:
            continue
        seen = True
        gold = {i for s in eg.reference.spans[key] for i in range(s.start_char, s.end_char)}
        pred = {i for s in eg.predicted.spans.get(key, []) for i in range(s.start_char, s.end_char)}
        gold_t = {t.i for t in eg.predicted if t.idx in gold}
        pred_t = {t.i for t in eg.predicted if t.idx in pred}
        prf.tp += len(gold_t & pred_t)
        prf.fp += len(pred_t - gold_t)
        prf.fn += len(gold_t - pred_t)
    scores["rationale_token_p"] = prf.precision if seen else None
    scores["rationale_token_r"] = prf.recall if seen else None
    scores["rationale_token_f"] = prf.fscore if seen else None
    return scores
