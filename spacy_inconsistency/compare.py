"""Contradictions across Docs: two texts against each other, or one actor's statements.

    nlp = spacy.blank("en")
    nlp.add_pipe("contradiction_detector")
    compare_docs(nlp, manifesto, posts, sources=("manifesto", "posts"))
    find_contradictions(nlp, statements, sources=years)

Both use the pipeline's `contradiction_detector` (or `inconsistency_detector`):
its (first) NLI model, threshold, aggregation and candidate strategy; the
second stage of the default cascade (`rescorer`) is not used across Docs (on
ProSeCCo and the political pairs it ranks no better than the first model:
docs/corpora.md), so `config={"rescorer": None}` saves loading it. Every unit of
every finding carries its `source` label and `doc` index, so findings across
sources say where each side comes from.
"""
import logging
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span

from .candidates import all_pairs, run_strategy
from .backends.loading import warn_other_language
from .pair_scoring import (
    PairDetector, ProbeScores, doc_units, has_content, pair_finding, score_pairs, unit_alignment,
)
from .errors import Errors, Warnings
from .extensions import unit_record

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

SOURCE_KEY = "source"
# Above this many pairs without a candidate strategy, say that one would help.
LARGE_ALL_PAIRS = 100_000

DocLike = Union[Doc, str]


def get_detector(nlp: Language, name: Optional[str] = None) -> PairDetector:
    """The pipeline's contradiction detector.

    nlp (Language): The pipeline.
    name (Optional[str]): Component name; None takes the first
        `contradiction_detector` or `inconsistency_detector` in the pipeline.
    RETURNS (PairDetector): The detector (for `inconsistency_detector`, its
        pairwise part); `detector.pair_settings()` says how it scores pairs.
    """
    names = [name] if name is not None else nlp.pipe_names
    for pipe_name in names:
        if pipe_name not in nlp.pipe_names:
            break
        pipe = nlp.get_pipe(pipe_name)
        pipe = getattr(pipe, "pairwise", pipe)
        if isinstance(pipe, PairDetector):
            return pipe
    raise ValueError(Errors.E186.format(name=name or "contradiction_detector"))


def _prepare(nlp: Language, docs: Sequence[DocLike], detector: PairDetector) -> List[Doc]:
    """Docs as given; strings run through the pipeline without the detectors."""
    detector_names = [
        n for n, p in nlp.pipeline if isinstance(getattr(p, "pairwise", p), PairDetector)
    ]
    # `inconsistency_detector` segments inside itself; its segmenter runs here.
    segmenters = [p for n, p in nlp.pipeline if getattr(p, "pairwise", None) is detector and hasattr(p, "segment")]
    out = []
    for i, doc in enumerate(docs):
        if isinstance(doc, Doc):
            out.append(doc)
        elif isinstance(doc, str):
            with nlp.select_pipes(disable=detector_names):
                processed = nlp(doc)
            for segmenter in segmenters:
                segmenter.segment([processed])
            out.append(processed)
        else:
            raise TypeError(Errors.E184.format(name=f"docs[{i}]", type=type(doc).__name__))
    return out


def _units(doc: Doc, detector: PairDetector) -> List[Span]:
    # A Doc with neither units nor sentences is one statement.
    settings = detector.pair_settings()
    if settings.units_key not in doc.spans and not doc.has_annotation("SENT_START"):
        units = [doc[:]] if len(doc) else []
    else:
        units = doc_units(doc, settings.units_key, settings.name)
    return [u for u in units if has_content(u)]


def _sources(docs: Sequence[Doc], sources: Optional[Sequence[str]]) -> List[str]:
    if sources is None:
        return [str(d.user_data.get(SOURCE_KEY, f"doc{i}")) for i, d in enumerate(docs)]
    if len(sources) != len(docs):
        raise ValueError(Errors.E183.format(n_docs=len(docs), n_sources=len(sources)))
    return [str(s) for s in sources]


def find_contradictions(
    nlp: Language,
    docs: Sequence[DocLike],
    *,
    sources: Optional[Sequence[str]] = None,
    detector: Optional[str] = None,
    within_docs: bool = True,
    across_docs: bool = True,
    threshold: Optional[float] = None,
    chunk_size: int = 4096,
) -> List[Dict[str, Any]]:
    """Contradicting pairs among the statements of several Docs (e.g. one actor's).

    The units of all Docs (their `doc.spans` units, else sentences, else the
    whole Doc) form one pool. The detector's candidate strategy picks the
    pairs; without one, all pairs are scored. With `min` aggregation only
    pairs whose first direction reaches the threshold are scored backwards
    (the result is the same, see `score_pairs`).

    nlp (Language): Pipeline with a contradiction detector.
    docs (Sequence[Union[Doc, str]]): The statements; strings are processed
        by `nlp` without its detectors (so a segmenter or NER runs, and the
        segmenter of an `inconsistency_detector`). Docs are used as given.
    sources (Optional[Sequence[str]]): One label per Doc; default:
        `doc.user_data["source"]`, else "doc<i>".
    detector (Optional[str]): Name of the detector component.
    within_docs (bool): Compare units of the same Doc.
    across_docs (bool): Compare units of different Docs.
    threshold (Optional[float]): Override the detector's threshold.
    chunk_size (int): Pairs scored at once.
    RETURNS (List[Dict[str, Any]]): Findings, highest score first: `units`
        (two unit records with `source` and `doc` added), `score`, `label`,
        `directions`.
    """
    pipe = get_detector(nlp, detector)
    settings = pipe.pair_settings()
    docs = _prepare(nlp, docs, pipe)
    labels = _sources(docs, sources)
    warn_other_language(settings.name, settings.model.name, docs)
    units: List[Span] = []
    owner: List[int] = []
    for i, doc in enumerate(docs):
        doc_unit_list = _units(doc, pipe)
        units.extend(doc_unit_list)
        owner.extend([i] * len(doc_unit_list))
    texts = [u.text.strip() for u in units]
    probed = ProbeScores(settings.model, texts, chunk_size=chunk_size)
    if settings.candidates is not None:
        pairs = run_strategy(settings.candidates, units, scorer=probed)
    else:
        pairs = all_pairs(len(units))
        if len(pairs) > LARGE_ALL_PAIRS:
            warnings.warn(Warnings.W142.format(n=len(pairs), units=len(units)))
    doc_of = numpy.asarray(owner, dtype=numpy.int64)
    if len(pairs):
        same = doc_of[pairs[:, 0]] == doc_of[pairs[:, 1]]
        keep = (same & within_docs) | (~same & across_docs)
        pairs = pairs[keep]
    cut = settings.threshold if threshold is None else threshold
    scores = score_pairs(
        settings.model, texts, pairs, probed=probed, aggregation=settings.aggregation, threshold=cut,
        chunk_size=chunk_size, pair_scorer=settings.pair_scorer,
        facts=unit_alignment(units, pairs) if settings.uses_alignment else None,
    )
    logger.info("scored %d of %d unit pairs", len(pairs), len(units) * (len(units) - 1) // 2)
    keep_idx = numpy.flatnonzero(scores.score >= cut)
    keep_idx = keep_idx[numpy.argsort(-scores.score[keep_idx], kind="stable")]
    findings = []
    for k in keep_idx.tolist():
        i, j = pairs[k].tolist()
        records = []
        for u in (i, j):
            record = unit_record(units[u])
            record["source"] = labels[owner[u]]
            record["doc"] = owner[u]
            records.append(record)
        findings.append(pair_finding(scores, k, records))
    return findings


def compare_docs(
    nlp: Language,
    doc_a: DocLike,
    doc_b: DocLike,
    *,
    sources: Tuple[str, str] = ("A", "B"),
    detector: Optional[str] = None,
    threshold: Optional[float] = None,
) -> List[Dict[str, Any]]:
    """Contradicting pairs between two Docs: units of A against units of B.

    nlp (Language): Pipeline with a contradiction detector.
    doc_a (Union[Doc, str]): First text (e.g. a manifesto).
    doc_b (Union[Doc, str]): Second text (e.g. a party's posts).
    sources (Tuple[str, str]): Source labels of A and B.
    detector (Optional[str]): Name of the detector component.
    threshold (Optional[float]): Override the detector's threshold.
    RETURNS (List[Dict[str, Any]]): Findings as in `find_contradictions`,
        each with one unit from A (first) and one from B.
    """
    # Units of A come before those of B and pairs are (i < j), so the
    # first unit of every finding is from A and `directions[0]` is A -> B.
    return find_contradictions(
        nlp, [doc_a, doc_b], sources=list(sources), detector=detector,
        within_docs=False, threshold=threshold,
    )
