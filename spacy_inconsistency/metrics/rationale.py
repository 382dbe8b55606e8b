"""Rationale extraction metrics as in ERASER (DeYoung et al. 2020), used by ClaimDiff Table 3.

Rationales are token ranges [start, end) per instance. Token F1 is the F1 of
the instance-averaged token precision and recall (ERASER's
`score_hard_tokens`); IOU F1 counts a predicted span as correct when its best
intersection-over-union with a gold span reaches the threshold (0.5), and
reports micro F1 over spans (ERASER's `iou_scores[threshold]["micro"]`) and
the macro F1 over instances.
"""
from typing import Dict, List, Sequence, Tuple

Spans = Sequence[Tuple[int, int]]


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def token_prf(gold: Sequence[Spans], pred: Sequence[Spans]) -> Dict[str, float]:
    """Token precision, recall and F1, averaged over instances.

    gold (Sequence[Spans]): Per instance, gold token ranges.
    pred (Sequence[Spans]): Per instance, predicted token ranges.
    RETURNS (Dict[str, float]): `p`, `r`, `f1` (0-1) and `n` instances.
    """
    if len(gold) != len(pred):
        from ..errors import Errors

        raise ValueError(Errors.E140.format(n_true=len(gold), n_pred=len(pred)))
    ps: List[float] = []
    rs: List[float] = []
    for g, p in zip(gold, pred):
        gt = {i for s, e in g for i in range(s, e)}
        pt = {i for s, e in p for i in range(s, e)}
        ps.append(len(gt & pt) / len(pt) if pt else 0.0)
        rs.append(len(gt & pt) / len(gt) if gt else 0.0)
    p = sum(ps) / len(ps) if ps else 0.0
    r = sum(rs) / len(rs) if rs else 0.0
    return {"p": p, "r": r, "f1": _f1(p, r), "n": len(ps)}


def iou_f1(gold: Sequence[Spans], pred: Sequence[Spans], *, threshold: float = 0.5) -> Dict[str, float]:
    """Span F1 where a prediction matches when its best IOU with a gold span >= threshold.

    gold (Sequence[Spans]): Per instance, gold token ranges.
    pred (Sequence[Spans]): Per instance, predicted token ranges.
    threshold (float): The IOU a match needs (0.5 in ClaimDiff).
    RETURNS (Dict[str, float]): `micro_f1`, `micro_p`, `micro_r`, `macro_f1`.
    """
    matched_total = n_gold = n_pred = 0
    macro: List[float] = []
    for g, p in zip(gold, pred):
        matched = 0
        for ps, pe in p:
            pset = set(range(ps, pe))
            best = 0.0
            for gs, ge in g:
                gset = set(range(gs, ge))
                union = len(pset | gset)
                best = max(best, len(pset & gset) / union if union else 0.0)
            matched += int(best >= threshold)
        matched_total += matched
        n_gold += len(g)
        n_pred += len(p)
        ip = matched / len(p) if p else 0.0
        ir = matched / len(g) if g else 0.0
        macro.append(_f1(ip, ir))
    mp = matched_total / n_pred if n_pred else 0.0
    mr = matched_total / n_gold if n_gold else 0.0
    return {"micro_p": mp, "micro_r": mr, "micro_f1": _f1(mp, mr),
            "macro_f1": sum(macro) / len(macro) if macro else 0.0}
