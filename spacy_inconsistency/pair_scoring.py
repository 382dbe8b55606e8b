"""Units, candidate pairs and pair scores: the logic every contradiction finder shares.

Used by `contradiction_detector` / `inconsistency_detector`, by cross-source
comparison (`spacy_inconsistency.compare`) and by the offline NLI judge of the
evidence extractor. A pair of units is scored by the NLI model in both
directions; the two directions are combined either by a fixed rule (`min`,
`mean`, `max` of P(contradiction)) or by the learned pair score
(`spacy_inconsistency.pair_score`), which also reads alignment evidence
(`spacy_inconsistency.alignment`).
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

import numpy
from spacy.tokens import Doc, Span

from .alignment import (
    COREFERENCE_WINDOW,
    UnitFacts,
    facts_of_texts,
    language_supported,
    pair_feature_matrix,
    resolve_pronoun_subjects,
    unit_facts,
)
from .backends.nli import CONTRADICTION, NLIBackend
from .errors import Errors
from .pair_score import PairScoreModel, stack_probabilities


def _mean(a: numpy.ndarray, b: numpy.ndarray) -> numpy.ndarray:
    return (a + b) / 2.0


AGGREGATIONS = {"mean": _mean, "max": numpy.maximum, "min": numpy.minimum}
LEARNED = "learned"
AGGREGATION_OPTIONS = (LEARNED,) + tuple(sorted(AGGREGATIONS))
SPEAKER_OPTIONS = ("same", "all")


def noisy_or_top(scores: numpy.ndarray, k: int) -> float:
    """1 - prod(1 - s) over the k highest of `scores` (k = 1: the highest); 0.0 for none."""
    if not len(scores):
        return 0.0
    top = numpy.sort(numpy.clip(numpy.asarray(scores, dtype=numpy.float64), 0.0, 1.0))[::-1][:k]
    return float(1.0 - numpy.prod(1.0 - top))


@dataclass
class PairScores:
    """The scored candidate pairs of one Doc (or one pool of units).

    units (List[Span]): The statement units.
    pairs (numpy.ndarray): int, shape (k, 2): indices into `units`, i < j.
    forward (numpy.ndarray): P(contradiction) with unit i as premise.
    backward (numpy.ndarray): P(contradiction) with unit j as premise.
    score (numpy.ndarray): The pair score (the two directions combined).
    rescored (Optional[numpy.ndarray]): In a cascade, the indices of the pairs the
        second stage read (the others score 0); None otherwise.
    probabilities (Optional[numpy.ndarray]): shape (k, 2, 3): each pair's
        P(entailment), P(neutral), P(contradiction) with its first unit as premise
        and with its second, from the model whose score counts (the second stage's
        for the pairs it read); None with a fixed rule.
    scorer (Optional[PairScoreModel]): The learned pair score that made `score`;
        None for a fixed rule.
    facts (Optional[Sequence[Optional[UnitFacts]]]): The units' alignment facts
        when `scorer` read them; None otherwise.
    """

    units: List[Span]
    pairs: numpy.ndarray
    forward: numpy.ndarray
    backward: numpy.ndarray
    score: numpy.ndarray
    rescored: Optional[numpy.ndarray] = None
    probabilities: Optional[numpy.ndarray] = None
    scorer: Optional[PairScoreModel] = None
    facts: Optional[Sequence[Optional[UnitFacts]]] = None

    @property
    def max_score(self) -> float:
        return float(self.score.max()) if len(self.score) else 0.0

    def evidence(self, k: int) -> Optional[Dict[str, Any]]:
        """Why pair k scores what it does (`PairScoreModel.explain`): both directions'
        NLI probabilities and, with alignment, what each alignment feature added to the
        score's log-odds. None without a learned score or the probabilities, and for a
        pair the second stage of a cascade did not read (it scores 0)."""
        if self.scorer is None or self.probabilities is None:
            return None
        if self.rescored is not None and not numpy.any(self.rescored == k):
            return None
        pair = self.pairs[k : k + 1]
        alignment = pair_feature_matrix(self.facts, pair.tolist()) if self.facts is not None else None
        probs = self.probabilities[k]
        return self.scorer.explain(probs[None, 0], probs[None, 1], alignment)[0]


def pair_finding(scores: PairScores, k: int, units: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Pair k of `scores` as a finding (the `doc._.contradictions` form).

    scores (PairScores): The scored pairs.
    k (int): The pair's index.
    units (List[Dict[str, Any]]): Its two units' records (`unit_record`, with
        whatever the caller adds).
    RETURNS (Dict[str, Any]): `units`, `score`, `label`, `directions` (both
        directions' P(contradiction)) and, with a learned score, `evidence`
        (`PairScores.evidence`).
    """
    finding: Dict[str, Any] = {
        "units": units,
        "score": float(scores.score[k]),
        "label": CONTRADICTION,
        "directions": [float(scores.forward[k]), float(scores.backward[k])],
    }
    evidence = scores.evidence(k)
    if evidence is not None:
        finding["evidence"] = evidence
    return finding


@dataclass(frozen=True)
class PairSettings:
    """What scoring unit pairs outside a Doc needs of a contradiction detector.

    A detector hands these to cross-Doc comparison (`spacy_inconsistency.compare`),
    so that code can score pairs the detector's way without importing the
    component.

    name (str): The component's name (for messages).
    model (NLIBackend): The (first) NLI model.
    units_key (str): `doc.spans` key of the statement units.
    candidates (Optional[Callable]): The candidate strategy; None: all pairs.
    aggregation (str): The aggregation in use ("learned", "min", "mean", "max").
    threshold (float): The threshold in use.
    pair_scorer (Optional[PairScoreModel]): The learned pair score, if any.
    alignment (bool): Whether the learned score reads alignment evidence.
    """

    name: str
    model: NLIBackend
    units_key: str
    candidates: Optional[Callable]
    aggregation: str
    threshold: float
    pair_scorer: Optional[PairScoreModel]
    alignment: bool

    @property
    def uses_alignment(self) -> bool:
        """Whether pair scores need the units' alignment facts."""
        return self.aggregation == LEARNED and self.alignment


@runtime_checkable
class PairDetector(Protocol):
    """A pipeline component that scores unit pairs and says how (`contradiction_detector`)."""

    def pair_settings(self) -> PairSettings:
        ...


def doc_units(doc: Doc, units_key: str, component: str) -> List[Span]:
    """The statement units of a Doc: `doc.spans[units_key]`, else its sentences."""
    if units_key in doc.spans:
        return list(doc.spans[units_key])
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        return [s for s in doc.sents if not all(t.is_space for t in s)]
    raise ValueError(Errors.E007.format(key=units_key, component=component))


def has_content(span: Span) -> bool:
    """Whether a unit can state something: two words with letters, or six letters.

    "4.", "No." or "(b)" are not paired: the model scores two such fragments
    as contradicting each other, and they say nothing on their own. A text in
    a script without spaces (one long token) passes on its letters.
    """
    words = sum(1 for t in span if any(ch.isalpha() for ch in t.text))
    letters = sum(ch.isalpha() for ch in span.text)
    return words >= 2 or letters >= 6


def candidate_pairs(n_units: int, *, window: int, max_all_pairs: int) -> numpy.ndarray:
    """Index pairs (i < j): all pairs up to `max_all_pairs` of them, else each unit with the `window` after it.

    n_units (int): Number of units.
    window (int): How many following units each unit is paired with.
    max_all_pairs (int): Largest number of pairs for which all are compared.
    RETURNS (numpy.ndarray): int64, shape (k, 2).
    """
    from .candidates import all_pairs, window_pairs

    if n_units * (n_units - 1) // 2 <= max_all_pairs:
        return all_pairs(n_units)
    return window_pairs(n_units, max(window, 1))


def speaker_pairs(units: Sequence[Span], pairs: numpy.ndarray, speakers: str) -> numpy.ndarray:
    """Drop pairs of two different speakers unless `speakers == "all"`.

    Two people who disagree in a transcript do not contradict themselves; a
    unit without a speaker (narration) is paired with everyone.
    """
    if speakers == "all" or not len(pairs):
        return pairs
    labels = numpy.array([u.label_ for u in units], dtype=object)
    a, b = labels[pairs[:, 0]], labels[pairs[:, 1]]
    keep = (a == "") | (b == "") | (a == b)
    return pairs[keep]


def unit_alignment(
    units: Sequence[Span], pairs: Optional[numpy.ndarray] = None
) -> Optional[List[Optional[UnitFacts]]]:
    """The alignment facts of units, or None where there are none (not English).

    Units of a Doc that a trained English pipeline parsed are read as they
    are; others are parsed by themselves with `alignment.load_parser()`. A
    pronoun subject takes the subject of a recent earlier unit of the same
    Doc (`alignment.resolve_pronoun_subjects`).

    units (Sequence[Span]): The units, each Doc's in document order.
    pairs (Optional[numpy.ndarray]): int, shape (k, 2): the pairs the facts
        are for. Only the units in them are read (and, for a pronoun subject,
        the units it may take its subject from), so a long Doc whose pair
        budget touches few of its units is not parsed whole; the other
        entries are None. None reads every unit. The facts of paired units
        are the same either way.
    RETURNS (Optional[List[Optional[UnitFacts]]]): One entry per unit.
    """
    if not units:
        return []
    if not all(language_supported(u.doc.lang_) for u in units):
        return None
    facts: List[Optional[UnitFacts]] = [None] * len(units)
    if pairs is None:
        _read_facts(units, facts, range(len(units)))
    else:
        needed = numpy.unique(numpy.asarray(pairs, dtype=numpy.int64).reshape(-1)).tolist()
        _read_facts(units, facts, needed)
        lenders = set()
        for i in needed:
            f = facts[i]
            if f is not None and f.subject_pronoun and not f.subject:
                for k in range(max(0, i - COREFERENCE_WINDOW), i):
                    if facts[k] is None and units[k].doc is units[i].doc:
                        lenders.add(k)
        _read_facts(units, facts, sorted(lenders))
    resolved: List[Optional[UnitFacts]] = []
    start = 0
    for end in range(1, len(units) + 1):
        if end == len(units) or units[end].doc is not units[start].doc:
            resolved.extend(resolve_pronoun_subjects(facts[start:end]))
            start = end
    return resolved


def _read_facts(units: Sequence[Span], facts: List[Optional[UnitFacts]], indices: Iterable[int]) -> None:
    """Fill `facts[i]` for `indices`: from the Doc's own parse, else by parsing the unit's text."""
    to_parse = []
    # `Doc.has_annotation` scans the whole Doc: ask once per Doc, not once per unit.
    parsed: Dict[int, bool] = {}
    for i in indices:
        doc = units[i].doc
        if id(doc) not in parsed:
            parsed[id(doc)] = (
                doc.has_annotation("DEP") and doc.has_annotation("ENT_IOB") and doc.has_annotation("LEMMA")
            )
        if parsed[id(doc)]:
            facts[i] = unit_facts(units[i])
        else:
            to_parse.append(i)
    if to_parse:
        for i, f in zip(to_parse, facts_of_texts([units[i].text.strip() for i in to_parse])):
            facts[i] = f


def combine(
    forward: numpy.ndarray,
    backward: numpy.ndarray,
    pairs: numpy.ndarray,
    *,
    aggregation: str,
    pair_scorer: Optional[PairScoreModel] = None,
    facts: Optional[Sequence[UnitFacts]] = None,
) -> numpy.ndarray:
    """The pair scores from both directions' NLI probabilities.

    forward (numpy.ndarray): shape (k, 3): P(entailment), P(neutral),
        P(contradiction), the first unit of each pair as premise.
    backward (numpy.ndarray): shape (k, 3), the other direction.
    pairs (numpy.ndarray): shape (k, 2): indices into `facts`.
    aggregation (str): "learned", "min", "mean" or "max".
    pair_scorer (Optional[PairScoreModel]): Needed for "learned".
    facts (Optional[Sequence[UnitFacts]]): Alignment facts of the units; None
        scores with the NLI features alone ("learned" only).
    RETURNS (numpy.ndarray): float32, shape (k,).
    """
    if aggregation != LEARNED:
        return AGGREGATIONS[aggregation](forward[:, 2], backward[:, 2]).astype(numpy.float32)
    if pair_scorer is None:
        raise ValueError(Errors.E192.format(name="(none given)", path=None))
    alignment = pair_feature_matrix(facts, pairs.tolist()) if facts is not None else None
    return pair_scorer(forward, backward, alignment)


class ProbeScores:
    """Scores both directions of the pairs a candidate strategy probes, and remembers them.

    Strategies that pick pairs by scoring some first (`needs_scorer`, e.g.
    `contradiction_hubs`) get this as their scorer; the detector then reuses
    the remembered probabilities instead of scoring those pairs again. What is
    remembered is the sorted pair keys and both directions' label probabilities.

    model (NLIBackend): The NLI backend.
    texts (Sequence[str]): Unit texts.
    chunk_size (int): Pairs sent to the backend at once.
    """

    def __init__(self, model: NLIBackend, texts: Sequence[str], *, chunk_size: int = 4096) -> None:
        self.model = model
        self.texts = texts
        self.chunk_size = chunk_size
        self.keys = numpy.zeros(0, dtype=numpy.int64)  # i * n + j, sorted
        self.forward = numpy.zeros((0, 3), dtype=numpy.float32)
        self.backward = numpy.zeros((0, 3), dtype=numpy.float32)

    def __len__(self) -> int:
        return len(self.keys)

    def _keys(self, pairs: numpy.ndarray) -> numpy.ndarray:
        return pairs[:, 0] * len(self.texts) + pairs[:, 1]

    def lookup(self, pairs: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """(known mask, forward, backward) label probabilities for `pairs`; unknown rows are NaN."""
        pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
        keys = self._keys(pairs)
        pos = numpy.minimum(numpy.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        known = self.keys[pos] == keys if len(self.keys) else numpy.zeros(len(keys), dtype=bool)
        forward = numpy.full((len(keys), 3), numpy.nan, dtype=numpy.float32)
        backward = numpy.full((len(keys), 3), numpy.nan, dtype=numpy.float32)
        forward[known] = self.forward[pos[known]]
        backward[known] = self.backward[pos[known]]
        return known, forward, backward

    def __call__(self, pairs: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """Forward and backward P(contradiction) of `pairs` (scored once, then remembered)."""
        pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
        known, _, _ = self.lookup(pairs)
        new = numpy.unique(pairs[~known], axis=0)
        if len(new):
            forward, backward = nli_probabilities(self.model, self.texts, new, chunk_size=self.chunk_size)
            keys = numpy.concatenate([self.keys, self._keys(new)])
            order = numpy.argsort(keys, kind="stable")
            self.keys = keys[order]
            self.forward = numpy.concatenate([self.forward, forward])[order]
            self.backward = numpy.concatenate([self.backward, backward])[order]
        _, forward, backward = self.lookup(pairs)
        return forward[:, 2], backward[:, 2]


def nli_probabilities(
    model: NLIBackend, texts: Sequence[str], pairs: numpy.ndarray, *, chunk_size: int = 4096
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """P(entailment), P(neutral), P(contradiction) of index pairs, both directions.

    model (NLIBackend): The NLI backend.
    texts (Sequence[str]): Unit texts.
    pairs (numpy.ndarray): int, shape (k, 2).
    chunk_size (int): Pairs sent to the backend at once (bounds memory).
    RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): float32 (k, 3) each, text i
        as premise and text j as premise.
    """
    pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
    k = len(pairs)
    forward = numpy.zeros((k, 3), dtype=numpy.float32)
    backward = numpy.zeros((k, 3), dtype=numpy.float32)
    for start in range(0, k, chunk_size):
        chunk = pairs[start : start + chunk_size].tolist()
        both = [p for i, j in chunk for p in ((texts[i], texts[j]), (texts[j], texts[i]))]
        probs = stack_probabilities(model.predict(both), len(both))
        forward[start : start + len(chunk)] = probs[0::2]
        backward[start : start + len(chunk)] = probs[1::2]
    return forward, backward


def score_pairs(
    model: NLIBackend,
    texts: Sequence[str],
    pairs: numpy.ndarray,
    *,
    aggregation: str = "min",
    threshold: float = 0.5,
    lazy_reverse: bool = True,
    chunk_size: int = 4096,
    pair_scorer: Optional[PairScoreModel] = None,
    facts: Optional[Sequence[UnitFacts]] = None,
    probed: Optional[ProbeScores] = None,
) -> PairScores:
    """Score index pairs of texts in both directions, chunk by chunk.

    With `min` aggregation and `lazy_reverse`, the reverse direction is only
    scored where the forward one reaches `threshold`: min(f, b) >= threshold
    needs f >= threshold, so the pairs kept are exactly those of scoring
    both directions, at about half the cost. Unscored reverse scores are NaN
    and their aggregated score is the forward score (an upper bound). The
    learned score needs both directions and never skips one.

    model (NLIBackend): The NLI backend.
    texts (Sequence[str]): Unit texts.
    pairs (numpy.ndarray): int, shape (k, 2): indices into `texts`.
    aggregation (str): "learned", "min", "mean" or "max".
    threshold (float): The threshold findings will be cut at.
    lazy_reverse (bool): Skip reverse scores that cannot matter (min only).
    chunk_size (int): Pairs sent to the backend at once (bounds memory).
    pair_scorer (Optional[PairScoreModel]): The learned score ("learned").
    facts (Optional[Sequence[UnitFacts]]): Alignment facts of the texts.
    probed (Optional[ProbeScores]): Probabilities already known for some pairs.
    RETURNS (PairScores): Scores; `units` is empty (the caller has them).
    """
    if aggregation not in AGGREGATION_OPTIONS:
        raise ValueError(Errors.E008.format(value=aggregation, options=list(AGGREGATION_OPTIONS)))
    pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
    if probed is not None and len(probed):
        known, forward, backward = probed.lookup(pairs)
    else:
        known = numpy.zeros(len(pairs), dtype=bool)
        forward = numpy.full((len(pairs), 3), numpy.nan, dtype=numpy.float32)
        backward = numpy.full((len(pairs), 3), numpy.nan, dtype=numpy.float32)
    todo = numpy.flatnonzero(~known)
    if aggregation == "min" and lazy_reverse:
        for start in range(0, len(todo), chunk_size):
            idx = todo[start : start + chunk_size]
            both = [(texts[i], texts[j]) for i, j in pairs[idx].tolist()]
            forward[idx] = stack_probabilities(model.predict(both), len(both))
        again = todo[forward[todo, 2] >= threshold]
        for start in range(0, len(again), chunk_size):
            idx = again[start : start + chunk_size]
            both = [(texts[j], texts[i]) for i, j in pairs[idx].tolist()]
            backward[idx] = stack_probabilities(model.predict(both), len(both))
        score = numpy.where(numpy.isnan(backward[:, 2]), forward[:, 2], numpy.minimum(forward[:, 2], backward[:, 2]))
    else:
        if len(todo):
            forward[todo], backward[todo] = nli_probabilities(model, texts, pairs[todo], chunk_size=chunk_size)
        score = combine(forward, backward, pairs, aggregation=aggregation, pair_scorer=pair_scorer, facts=facts)
    learned = aggregation == LEARNED
    return PairScores(
        [], pairs, forward[:, 2].copy(), backward[:, 2].copy(), score.astype(numpy.float32),
        probabilities=numpy.stack([forward, backward], axis=1) if learned else None,
        scorer=pair_scorer if learned else None, facts=facts if learned else None,
    )


def check_aggregation(aggregation: str) -> None:
    if aggregation not in AGGREGATION_OPTIONS:
        raise ValueError(Errors.E008.format(value=aggregation, options=list(AGGREGATION_OPTIONS)))


def check_speakers(speakers: str) -> None:
    if speakers not in SPEAKER_OPTIONS:
        raise ValueError(Errors.E006.format(name="speakers", expected=f"one of {list(SPEAKER_OPTIONS)}", value=speakers))


__all__ = [
    "AGGREGATIONS", "AGGREGATION_OPTIONS", "LEARNED", "PairScores", "ProbeScores", "doc_units", "has_content",
    "candidate_pairs", "speaker_pairs", "unit_alignment", "combine", "nli_probabilities", "score_pairs",
    "check_aggregation", "check_speakers", "CONTRADICTION",
]
