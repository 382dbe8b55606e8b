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

How sure a matched AUC is: it is the mean of one win (1, a tie 0.5, a loss 0) per
record, so `matched_auc_interval` resamples records (percentile bootstrap), and
`paired_auc_difference` resamples the records two detectors share, so that a change
is judged against the records it changed, not against two independent intervals.
"""
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

CharSpan = Tuple[int, int]


@dataclass
class DocOutcome:
    """What the detector did with one document of the suite.

    score (float): The document score (`doc._.inconsistency_score`).
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
    """Share of matched pairs where the positive scores higher (ties count half); None without pairs."""
    if not len(positive):
        return None
    return float(matched_wins(positive, negative).mean())


def matched_wins(positive: Sequence[float], negative: Sequence[float]) -> numpy.ndarray:
    """Per matched pair: 1.0 when the positive scores higher, 0.5 on a tie, else 0.0."""
    pos = numpy.asarray(positive, dtype=numpy.float64)
    neg = numpy.asarray(negative, dtype=numpy.float64)
    if pos.shape != neg.shape:
        raise ValueError(f"{len(pos)} positive scores against {len(neg)} negative ones: they must be matched")
    return numpy.where(pos > neg, 1.0, numpy.where(pos == neg, 0.5, 0.0))


def _bootstrap(values: numpy.ndarray, level: float, n_resamples: int, seed: int) -> Tuple[float, float, numpy.ndarray]:
    """(low, high) percentile interval of the mean of VALUES, resampled; and the resampled means."""
    rng = numpy.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_resamples, len(values)))].mean(axis=1)
    tail = (1.0 - level) / 2
    low, high = numpy.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high), means


def matched_auc_interval(
    positive: Sequence[float], negative: Sequence[float], *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> Optional[Tuple[float, float]]:
    """Percentile bootstrap interval of `matched_auc`, resampling records.

    positive (Sequence[float]): Each record's contradiction score.
    negative (Sequence[float]): Its control's score, in the same order.
    level (float): Coverage, e.g. 0.95.
    n_resamples (int): Bootstrap resamples.
    seed (int): Seed of the resampling (the same seed gives the same interval).
    RETURNS (Optional[Tuple[float, float]]): (low, high); None without records.
    """
    if not len(positive):
        return None
    low, high, _ = _bootstrap(matched_wins(positive, negative), level, n_resamples, seed)
    return low, high


def paired_auc_difference(
    positive_a: Sequence[float], negative_a: Sequence[float], positive_b: Sequence[float], negative_b: Sequence[float],
    *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0,
) -> Optional[Dict[str, float]]:
    """How much detector B's matched AUC differs from A's on the same records.

    Records are resampled together, so the interval reflects the records where
    the two detectors differ.

    positive_a (Sequence[float]): A's score of each record's contradiction document.
    negative_a (Sequence[float]): A's score of its control, in the same order.
    positive_b (Sequence[float]): B's, for the same records in the same order.
    negative_b (Sequence[float]): B's control scores.
    level (float): Coverage of the interval.
    n_resamples (int): Bootstrap resamples.
    seed (int): Seed of the resampling.
    RETURNS (Optional[Dict[str, float]]): `a`, `b` (the two matched AUCs),
        `difference` (b - a), `low`, `high` (its percentile bootstrap interval),
        `changed` (share of records whose win differs) and `no_gain` (share of
        resamples where B is not above A); None without records.
    """
    wins_a, wins_b = matched_wins(positive_a, negative_a), matched_wins(positive_b, negative_b)
    if wins_a.shape != wins_b.shape:
        raise ValueError(f"{len(wins_a)} records of A against {len(wins_b)} of B: compare the same records")
    if not len(wins_a):
        return None
    low, high, diffs = _bootstrap(wins_b - wins_a, level, n_resamples, seed)
    return {
        "a": float(wins_a.mean()), "b": float(wins_b.mean()), "difference": float((wins_b - wins_a).mean()),
        "low": low, "high": high, "changed": float((wins_a != wins_b).mean()),
        "no_gain": float((diffs <= 0).mean()),
    }


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
        "matched_auc_interval": matched_auc_interval(pos, neg),
        "pooled_auc": pooled_auc(pos, neg),
        "pair_auc": matched_auc([p for p, _ in scored], [q for _, q in scored]),
        "gold_pairs_compared": sum(p is not None for p in pair_pos) / n,
        "matched_losses": matched_losses(outcomes),
    }


def behaviour_metrics(outcomes: Sequence[MatchedOutcome]) -> Dict[str, Any]:
    """Suite figures per capability and over all records.

    outcomes (Sequence[MatchedOutcome]): One per record.
    RETURNS (Dict[str, Any]): `all` and `by_capability` (each: `n`, `recall`,
        `pair_hits`, `false_alarms`, `matched_auc` with its 95% `matched_auc_interval`,
        `pooled_auc`, `pair_auc`,
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
