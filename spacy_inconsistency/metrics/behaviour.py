"""Metrics of a behavioural suite of matched documents (CheckList-style).

Each record of a suite is a document with one contradicting pair of sentences
and its matched control: a near-miss version of the same document that does not
contradict itself. Per capability (negation, numbers, ...) the figures are

- recall: share of contradiction documents flagged;
- pair hits: share of contradiction documents whose highest-scoring finding is
  the gold pair (so pair hits <= recall);
- false alarms: share of control documents flagged;
- matched AUC: share of records whose contradiction document scores higher than
  its own control (ties count half), i.e. the ROC-AUC over matched pairs;
- pooled AUC: ROC-AUC of document scores, contradictions against controls;
- pair AUC: as matched AUC, for the score of the two gold sentences against the
  score of the control's two near-miss sentences (the pair scorer alone, without
  the rest of the document).
- matched losses: where the records lost to their controls (1 - matched AUC) are
  lost, as shares of all records: `pair` when the gold pair scores at or below
  the control's near-miss pair (the pair judgement itself), `other_pairs` when
  the gold pair scores higher but another pair of one of the documents decides,
  `not_compared` when the gold pair was never scored. They sum to 1 - matched AUC.
"""
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

CharSpan = Tuple[int, int]


@dataclass
class DocOutcome:
    """What the detector did with one document of the suite.

    score (float): The document score (highest pair score).
    flagged (bool): Whether any pair reached the threshold.
    top_pair (Optional[Tuple[CharSpan, CharSpan]]): Character spans of the
        highest-scoring flagged pair, None when nothing was flagged.
    gold_pair_score (Optional[float]): Score of the pair of units holding the two
        gold sentences; None when the units were never scored together.
    """

    score: float
    flagged: bool
    top_pair: Optional[Tuple[CharSpan, CharSpan]] = None
    gold_pair_score: Optional[float] = None


@dataclass
class MatchedOutcome:
    """A record: its capability, the gold pairs and both documents' outcomes."""

    capability: str
    gold: Tuple[CharSpan, CharSpan]
    contradiction: DocOutcome
    control: DocOutcome
    control_kind: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


def _overlaps(a: CharSpan, b: CharSpan) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def is_pair_hit(found: Optional[Tuple[CharSpan, CharSpan]], gold: Tuple[CharSpan, CharSpan]) -> bool:
    """Whether a found pair of units covers the two gold sentences, one each.

    found (Optional[Tuple[CharSpan, CharSpan]]): Character spans of the two units.
    gold (Tuple[CharSpan, CharSpan]): Character spans of the two gold sentences.
    RETURNS (bool): True when each gold sentence overlaps a different unit.
    """
    if found is None:
        return False
    a, b = found
    return (_overlaps(a, gold[0]) and _overlaps(b, gold[1])) or (_overlaps(a, gold[1]) and _overlaps(b, gold[0]))


def matched_auc(positive: Sequence[float], negative: Sequence[float]) -> Optional[float]:
    """Share of matched pairs where the positive scores higher (ties count half)."""
    if not positive:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in zip(positive, negative))
    return wins / len(positive)


def pooled_auc(positive: Sequence[float], negative: Sequence[float]) -> Optional[float]:
    """ROC-AUC of every positive score against every negative one (None when a side is empty)."""
    from sklearn.metrics import roc_auc_score

    if not positive or not negative:
        return None
    return float(roc_auc_score([1] * len(positive) + [0] * len(negative), list(positive) + list(negative)))


def matched_losses(outcomes: Sequence[MatchedOutcome]) -> Dict[str, float]:
    """Where the records lost to their controls are lost (shares of all records, ties count half).

    outcomes (Sequence[MatchedOutcome]): One per record.
    RETURNS (Dict[str, float]): `pair`, `other_pairs` and `not_compared`, summing
        to 1 - matched AUC (all 0.0 for no records).
    """
    losses = {"pair": 0.0, "other_pairs": 0.0, "not_compared": 0.0}
    for o in outcomes:
        pos, neg = o.contradiction.score, o.control.score
        lost = 0.0 if pos > neg else 0.5 if pos == neg else 1.0
        if not lost:
            continue
        gold, near_miss = o.contradiction.gold_pair_score, o.control.gold_pair_score
        if gold is None:
            losses["not_compared"] += lost
        elif near_miss is not None and gold <= near_miss:
            losses["pair"] += lost
        else:
            losses["other_pairs"] += lost
    n = len(outcomes)
    return {k: v / n for k, v in losses.items()} if n else losses


def _summary(outcomes: Sequence[MatchedOutcome]) -> Dict[str, Any]:
    n = len(outcomes)
    pos = [o.contradiction.score for o in outcomes]
    neg = [o.control.score for o in outcomes]
    pair_pos = [o.contradiction.gold_pair_score for o in outcomes]
    pair_neg = [o.control.gold_pair_score for o in outcomes]
    scored = [(p, q) for p, q in zip(pair_pos, pair_neg) if p is not None and q is not None]
    return {
        "n": n,
        "recall": sum(o.contradiction.flagged for o in outcomes) / n,
        "pair_hits": sum(o.contradiction.flagged and is_pair_hit(o.contradiction.top_pair, o.gold) for o in outcomes) / n,
        "false_alarms": sum(o.control.flagged for o in outcomes) / n,
        "matched_auc": matched_auc(pos, neg),
        "pooled_auc": pooled_auc(pos, neg),
        "pair_auc": matched_auc([p for p, _ in scored], [q for _, q in scored]),
        "gold_pairs_compared": sum(p is not None for p in pair_pos) / n,
        "matched_losses": matched_losses(outcomes),
    }


def behaviour_metrics(outcomes: Sequence[MatchedOutcome]) -> Dict[str, Any]:
    """Suite figures per capability and over all records.

    outcomes (Sequence[MatchedOutcome]): One per record.
    RETURNS (Dict[str, Any]): `all` and `by_capability` (each: `n`, `recall`,
        `pair_hits`, `false_alarms`, `matched_auc`, `pooled_auc`, `pair_auc`,
        `gold_pairs_compared`, `matched_losses`), and `by_control_kind` (each: `n`,
        `false_alarms`, `matched_auc`, `matched_losses`: which kinds of near miss the
        contradictions lose to).
    """
    by_capability: Dict[str, List[MatchedOutcome]] = defaultdict(list)
    by_kind: Dict[str, List[MatchedOutcome]] = defaultdict(list)
    for o in outcomes:
        by_capability[o.capability].append(o)
        by_kind[o.control_kind].append(o)
    return {
        "all": _summary(outcomes) if outcomes else {"n": 0},
        "by_capability": {c: _summary(v) for c, v in sorted(by_capability.items())},
        "by_control_kind": {
            k: {
                "n": len(v),
                "false_alarms": sum(o.control.flagged for o in v) / len(v),
                "matched_auc": matched_auc([o.contradiction.score for o in v], [o.control.score for o in v]),
                "matched_losses": matched_losses(v),
            }
            for k, v in sorted(by_kind.items())
        },
    }
