"""`contradiction_detector`: contradicting pairs of statement units within a Doc."""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.util import minibatch
from thinc.api import Config

from .. import candidates as _candidates  # noqa: F401  (registers the candidate strategies)
from ..backends.nli import CONTRADICTION, NLIBackend
from ..errors import Errors
from ..extensions import CONTRADICTIONS, UNITS_KEY, install_extensions, unit_record
from ..serialize import CfgSerializable

DEFAULT_NLI_MODEL_CONFIG = """
[model]
@misc = "spacy-inconsistency.NLIBackend.v1"
model = "default"
device = "auto"
max_batch_size = 64
max_batch_tokens = 8192
revision = null
label_map = null
truncation = "warn"
local_files_only = false
"""
DEFAULT_NLI_MODEL = Config().from_str(DEFAULT_NLI_MODEL_CONFIG)["model"]

def _mean(a: numpy.ndarray, b: numpy.ndarray) -> numpy.ndarray:
    return (a + b) / 2.0


AGGREGATIONS = {"mean": _mean, "max": numpy.maximum, "min": numpy.minimum}
CFG_KEYS = ("units_key", "window", "max_all_pairs", "threshold", "aggregation")


@dataclass
class PairScores:
    """The scored candidate pairs of one Doc.

    units (List[Span]): The Doc's statement units.
    pairs (numpy.ndarray): int, shape (k, 2): indices into `units`, i < j.
    forward (numpy.ndarray): P(contradiction) with unit i as premise.
    backward (numpy.ndarray): P(contradiction) with unit j as premise.
    score (numpy.ndarray): The two directions aggregated.
    """

    units: List[Span]
    pairs: numpy.ndarray
    forward: numpy.ndarray
    backward: numpy.ndarray
    score: numpy.ndarray

    @property
    def max_score(self) -> float:
        return float(self.score.max()) if len(self.score) else 0.0


def doc_units(doc: Doc, units_key: str, component: str) -> List[Span]:
    """The statement units of a Doc: `doc.spans[units_key]`, else its sentences."""
    if units_key in doc.spans:
        return list(doc.spans[units_key])
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        return [s for s in doc.sents if not all(t.is_space for t in s)]
    raise ValueError(Errors.E007.format(key=units_key, component=component))


def candidate_pairs(n_units: int, *, window: int, max_all_pairs: int) -> numpy.ndarray:
    """Index pairs (i < j) of the units to compare.

    All pairs when there are at most `max_all_pairs` of them; otherwise each
    unit with the `window` units after it.

    n_units (int): Number of units.
    window (int): How many following units each unit is paired with.
    max_all_pairs (int): Largest number of pairs for which all are compared.
    RETURNS (numpy.ndarray): int64, shape (k, 2).
    """
    if n_units < 2:
        return numpy.zeros((0, 2), dtype=numpy.int64)
    if n_units * (n_units - 1) // 2 <= max_all_pairs:
        i, j = numpy.triu_indices(n_units, k=1)
    else:
        offsets = numpy.arange(1, max(window, 1) + 1)
        i = numpy.repeat(numpy.arange(n_units), len(offsets))
        j = i + numpy.tile(offsets, n_units)
        keep = j < n_units
        i, j = i[keep], j[keep]
    return numpy.stack([i, j], axis=1).astype(numpy.int64)


def score_pairs(
    model: NLIBackend,
    texts: Sequence[str],
    pairs: numpy.ndarray,
    *,
    aggregation: str = "min",
    threshold: float = 0.5,
    lazy_reverse: bool = True,
    chunk_size: int = 4096,
) -> PairScores:
    """Score index pairs of texts in both directions, chunk by chunk.

    With `min` aggregation and `lazy_reverse`, the reverse direction is only
    scored where the forward one reaches `threshold`: min(f, b) >= threshold
    needs f >= threshold, so the pairs kept are exactly those of scoring
    both directions, at about half the cost. Unscored reverse scores are NaN
    and their aggregated score is the forward score (an upper bound).

    model (NLIBackend): The NLI backend.
    texts (Sequence[str]): Unit texts.
    pairs (numpy.ndarray): int, shape (k, 2): indices into `texts`.
    aggregation (str): "min", "mean" or "max".
    threshold (float): The threshold findings will be cut at.
    lazy_reverse (bool): Skip reverse scores that cannot matter (min only).
    chunk_size (int): Pairs sent to the backend at once (bounds memory).
    RETURNS (PairScores): Scores; `units` is empty (the caller has them).
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(Errors.E008.format(value=aggregation, options=sorted(AGGREGATIONS)))
    pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
    k = len(pairs)
    forward = numpy.zeros(k, dtype=numpy.float32)
    backward = numpy.full(k, numpy.nan, dtype=numpy.float32)
    lazy = lazy_reverse and aggregation == "min"
    for start in range(0, k, chunk_size):
        chunk = pairs[start : start + chunk_size].tolist()
        if lazy:
            forward[start : start + len(chunk)] = model.predict([(texts[i], texts[j]) for i, j in chunk])[CONTRADICTION]
        else:
            both = [p for i, j in chunk for p in ((texts[i], texts[j]), (texts[j], texts[i]))]
            scores = model.predict(both)[CONTRADICTION]
            forward[start : start + len(chunk)] = scores[0::2]
            backward[start : start + len(chunk)] = scores[1::2]
    if lazy:
        todo = numpy.flatnonzero(forward >= threshold)
        for start in range(0, len(todo), chunk_size):
            idx = todo[start : start + chunk_size]
            backward[idx] = model.predict([(texts[j], texts[i]) for i, j in pairs[idx].tolist()])[CONTRADICTION]
        score = numpy.where(numpy.isnan(backward), forward, numpy.minimum(forward, backward))
    else:
        score = AGGREGATIONS[aggregation](forward, backward)
    return PairScores([], pairs, forward, backward, score.astype(numpy.float32))


class ProbeScores:
    """Scores both directions of the pairs a candidate strategy probes, and remembers them.

    Strategies that pick pairs by scoring some first (`needs_scorer`, e.g.
    `contradiction_hubs`) get this as their scorer; the detector then reuses
    the remembered scores instead of scoring those pairs again. What is
    remembered is three arrays (pair keys and the two directions' scores).

    model (NLIBackend): The NLI backend.
    texts (Sequence[str]): Unit texts.
    chunk_size (int): Pairs sent to the backend at once.
    """

    def __init__(self, model: NLIBackend, texts: Sequence[str], *, chunk_size: int = 4096) -> None:
        self.model = model
        self.texts = texts
        self.chunk_size = chunk_size
        self.keys = numpy.zeros(0, dtype=numpy.int64)  # i * n + j, sorted
        self.forward = numpy.zeros(0, dtype=numpy.float32)
        self.backward = numpy.zeros(0, dtype=numpy.float32)

    def __len__(self) -> int:
        return len(self.keys)

    def _keys(self, pairs: numpy.ndarray) -> numpy.ndarray:
        return pairs[:, 0] * len(self.texts) + pairs[:, 1]

    def lookup(self, pairs: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """(known mask, forward, backward) for `pairs`; unknown pairs get NaN."""
        pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
        keys = self._keys(pairs)
        pos = numpy.minimum(numpy.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        known = self.keys[pos] == keys if len(self.keys) else numpy.zeros(len(keys), dtype=bool)
        forward = numpy.full(len(keys), numpy.nan, dtype=numpy.float32)
        backward = numpy.full(len(keys), numpy.nan, dtype=numpy.float32)
        forward[known] = self.forward[pos[known]]
        backward[known] = self.backward[pos[known]]
        return known, forward, backward

    def __call__(self, pairs: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
        pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
        known, _, _ = self.lookup(pairs)
        new = numpy.unique(pairs[~known], axis=0)
        if len(new):
            scores = score_pairs(
                self.model, self.texts, new, aggregation="mean", lazy_reverse=False, chunk_size=self.chunk_size
            )
            keys = numpy.concatenate([self.keys, self._keys(new)])
            order = numpy.argsort(keys, kind="stable")
            self.keys = keys[order]
            self.forward = numpy.concatenate([self.forward, scores.forward])[order]
            self.backward = numpy.concatenate([self.backward, scores.backward])[order]
        _, forward, backward = self.lookup(pairs)
        return forward, backward


def score_candidates(
    model: NLIBackend,
    texts: Sequence[str],
    pairs: numpy.ndarray,
    probed: Optional[ProbeScores] = None,
    **kwargs: Any,
) -> PairScores:
    """`score_pairs`, reusing the scores of pairs a strategy already probed."""
    pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
    if probed is None or not len(probed):
        return score_pairs(model, texts, pairs, **kwargs)
    known, forward, backward = probed.lookup(pairs)
    rest = score_pairs(model, texts, pairs[~known], **kwargs)
    forward[~known] = rest.forward
    backward[~known] = rest.backward
    aggregation = kwargs.get("aggregation", "min")
    score = numpy.where(numpy.isnan(backward), forward, AGGREGATIONS[aggregation](forward, backward))
    return PairScores([], pairs, forward, backward, score.astype(numpy.float32))


def has_content(span: Span) -> bool:
    """Whether a unit has a letter or digit; units without one are not paired."""
    return any(ch.isalnum() for ch in span.text)


class ContradictionDetector(CfgSerializable, Pipe):
    """Find pairs of statement units that contradict each other.

    Each candidate pair is scored by the NLI backend in both directions and
    the two P(contradiction) are aggregated; pairs at or over `threshold`
    are written to `doc._.contradictions`, highest score first. Units with
    no letter or digit (e.g. "...") are not paired.

    nlp (Language): The pipeline.
    name (str): The component name.
    model (NLIBackend): The NLI backend; it must have a contradiction label.
    units_key (str): `doc.spans` key of the units (falls back to sentences).
    window (int): Each unit is paired with this many following units.
    max_all_pairs (int): When a Doc has at most this many unit pairs, all
        pairs are compared.
    threshold (float): Lowest aggregated score kept as a contradiction.
    aggregation (str): How the two directions combine: "min" (both must
        say contradiction; contradiction is symmetric, while one-directional
        false alarms are common), "mean" or "max".
    candidates (Optional[CandidateStrategy]): Which unit pairs to score
        (see `spacy_inconsistency.candidates`); None uses `window` and
        `max_all_pairs` as described above.
    scorer (Optional[Callable]): The scoring method.
    """

    cfg_keys = CFG_KEYS

    def __init__(
        self,
        nlp: Language,
        name: str = "contradiction_detector",
        *,
        model: NLIBackend,
        units_key: str = UNITS_KEY,
        window: int = 4,
        max_all_pairs: int = 100,
        threshold: float = 0.5,
        aggregation: str = "min",
        candidates: Optional[Callable[[Sequence[Span]], numpy.ndarray]] = None,
        scorer: Optional[Callable] = None,
    ) -> None:
        install_extensions()
        if aggregation not in AGGREGATIONS:
            raise ValueError(Errors.E008.format(value=aggregation, options=sorted(AGGREGATIONS)))
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(Errors.E006.format(name="threshold", expected="in [0, 1]", value=threshold))
        if window < 1:
            raise ValueError(Errors.E006.format(name="window", expected="at least 1", value=window))
        if max_all_pairs < 0:
            raise ValueError(Errors.E006.format(name="max_all_pairs", expected="0 or more", value=max_all_pairs))
        if CONTRADICTION not in model.label_index:
            raise ValueError(
                Errors.E003.format(name=model.name, label=CONTRADICTION, labels=list(model.labels), component=name)
            )
        self.name = name
        self.model = model
        self.scorer = scorer
        self.candidates = candidates
        self.cfg: Dict[str, Any] = {
            "units_key": units_key,
            "window": window,
            "max_all_pairs": max_all_pairs,
            "threshold": threshold,
            "aggregation": aggregation,
        }

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        for docs in minibatch(stream, size=batch_size):
            self.set_annotations(docs, self.predict(docs))
            yield from docs

    def predict(self, docs: Iterable[Doc]) -> List[PairScores]:
        """Score the candidate pairs of a batch of Docs in one backend call.

        docs (Iterable[Doc]): The Docs.
        RETURNS (List[PairScores]): One per Doc.
        """
        docs = list(docs)
        per_doc = []
        texts: List[Tuple[str, str]] = []
        for doc in docs:
            units = [u for u in doc_units(doc, self.cfg["units_key"], self.name) if has_content(u)]
            unit_texts = [u.text.strip() for u in units]
            probed = ProbeScores(self.model, unit_texts)
            pairs = self.unit_pairs(units, scorer=probed)
            known, forward, backward = probed.lookup(pairs)
            for i, j in pairs[~known].tolist():
                texts.append((unit_texts[i], unit_texts[j]))
                texts.append((unit_texts[j], unit_texts[i]))
            per_doc.append((units, pairs, known, forward, backward))
        contradiction = self.model.predict(texts)[CONTRADICTION] if texts else numpy.zeros(0, dtype=numpy.float32)
        aggregate = AGGREGATIONS[self.cfg["aggregation"]]
        out = []
        offset = 0
        for units, pairs, known, forward, backward in per_doc:
            k = int((~known).sum())
            scores = contradiction[offset : offset + 2 * k]
            offset += 2 * k
            forward[~known], backward[~known] = scores[0::2], scores[1::2]
            out.append(PairScores(units, pairs, forward, backward, aggregate(forward, backward)))
        return out

    def unit_pairs(self, units: Sequence[Span], scorer: Optional[_candidates.PairScorer] = None) -> numpy.ndarray:
        """The candidate pairs of units: the `candidates` strategy, else window / all pairs.

        units (Sequence[Span]): The units.
        scorer (Optional[PairScorer]): For strategies that probe pairs with
            the model; None scores with this detector's model (not remembered).
        RETURNS (numpy.ndarray): int64, shape (k, 2), i < j.
        """
        if self.candidates is not None:
            if scorer is None and _candidates.needs_scorer(self.candidates):
                scorer = ProbeScores(self.model, [u.text.strip() for u in units])
            return _candidates.run_strategy(self.candidates, units, scorer=scorer)
        return candidate_pairs(len(units), window=self.cfg["window"], max_all_pairs=self.cfg["max_all_pairs"])

    def findings(self, scores: PairScores) -> List[Dict[str, Any]]:
        """The pairs at or over the threshold, as plain dicts, highest score first."""
        keep = numpy.flatnonzero(scores.score >= self.cfg["threshold"])
        keep = keep[numpy.argsort(-scores.score[keep], kind="stable")]
        found = []
        for k in keep.tolist():
            i, j = scores.pairs[k].tolist()
            found.append(
                {
                    "units": [unit_record(scores.units[i]), unit_record(scores.units[j])],
                    "score": float(scores.score[k]),
                    "label": CONTRADICTION,
                    "directions": [float(scores.forward[k]), float(scores.backward[k])],
                }
            )
        return found

    def set_annotations(self, docs: Iterable[Doc], scores: List[PairScores]) -> None:
        for doc, doc_scores in zip(docs, scores):
            setattr(doc._, CONTRADICTIONS, self.findings(doc_scores))

@Language.factory(
    "contradiction_detector",
    assigns=[f"doc._.{CONTRADICTIONS}"],
    default_config={
        "model": DEFAULT_NLI_MODEL,
        "units_key": UNITS_KEY,
        "window": 4,
        "max_all_pairs": 100,
        "threshold": 0.5,
        "aggregation": "min",
        "candidates": None,
        "scorer": {"@scorers": "spacy-inconsistency.contradiction_scorer.v1"},
    },
    default_score_weights={"contradiction_f": 1.0, "contradiction_p": 0.0, "contradiction_r": 0.0},
)
def make_contradiction_detector(
    nlp: Language,
    name: str,
    model: NLIBackend,
    units_key: str,
    window: int,
    max_all_pairs: int,
    threshold: float,
    aggregation: str,
    candidates: Optional[Callable[[Sequence[Span]], numpy.ndarray]],
    scorer: Optional[Callable],
) -> ContradictionDetector:
    """Create a `contradiction_detector` (see `ContradictionDetector`)."""
    return ContradictionDetector(
        nlp, name, model=model, units_key=units_key, window=window,
        max_all_pairs=max_all_pairs, threshold=threshold, aggregation=aggregation,
        candidates=candidates, scorer=scorer,
    )
