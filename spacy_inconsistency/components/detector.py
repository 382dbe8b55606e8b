"""`inconsistency_detector`: the one-line entry point.

It segments the Doc (unless units are already there), finds contradicting
unit pairs with the NLI backend and writes one result format.
"""
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.util import minibatch

from ..backends.loading import require_backend
from ..backends.nli import NLIBackend
from ..extensions import (
    CONTRADICTIONS,
    HAS_INCONSISTENCY,
    INCONSISTENCIES,
    INCONSISTENCY_SCORE,
    install_extensions,
)
from ..segment import Segmenter
from .pairwise import (
    DEFAULT_NLI_MODEL,
    DEFAULT_RESCORER,
    DEFAULT_SETTINGS,
    ContradictionDetector,
    PairedRescorer,
    PairScores,
)

METHOD_PAIRWISE = "nli-pairwise"
KIND_CONTRADICTION = "contradiction"


class InconsistencyDetector(Pipe):
    """Find where a Doc disagrees with itself.

    Findings go to `doc._.inconsistencies` (each: `kind`, `units` with
    character offsets, `score`, `method`, and with the learned pair score
    `evidence`: both directions' NLI probabilities and what each alignment
    feature added to the score), `doc._.has_inconsistency` is
    True when there is at least one, and `doc._.inconsistency_score` is
    1 - prod(1 - s) over the Doc's `doc_score_top_k` (3) highest pair scores
    (the chance that one of them is a contradiction, were they independent;
    never below the highest; 0.0 when the Doc has fewer than two units), so
    it ranks Docs even below the threshold, and a Doc and an edited copy that
    share their highest pair are still told apart. The contradicting pairs are
    also in `doc._.contradictions`.

    nlp (Language): The pipeline.
    name (str): The component name.
    model (NLIBackend): The NLI backend.
    segmenter (Segmenter): Used when the Doc has no units yet.
    window, max_all_pairs, threshold, aggregation, speakers, alignment,
        pair_scorer, candidates, rescorer, rescore_top_k, rescore_top_share, rescore_similar_k, cascade_threshold,
        first_stage_directions,
        reverse_top_k, rescore_reverse_top_k, doc_score_top_k: as for
        `contradiction_detector`
        (`candidates`, a strategy from `spacy_inconsistency.candidates`, replaces the budget
        rule; `rescorer`, a larger NLI model, re-scores each Doc's top pairs).
    scorer (Optional[Callable]): The scoring method.
    """

    def __init__(
        self,
        nlp: Language,
        name: str = "inconsistency_detector",
        *,
        model: NLIBackend,
        segmenter: Segmenter,
        window: int = DEFAULT_SETTINGS["window"],
        max_all_pairs: int = DEFAULT_SETTINGS["max_all_pairs"],
        threshold: Optional[float] = DEFAULT_SETTINGS["threshold"],
        aggregation: str = DEFAULT_SETTINGS["aggregation"],
        speakers: str = DEFAULT_SETTINGS["speakers"],
        alignment: bool = DEFAULT_SETTINGS["alignment"],
        pair_scorer: Optional[str] = DEFAULT_SETTINGS["pair_scorer"],
        candidates: Optional[Callable[[Sequence[Span]], numpy.ndarray]] = None,
        rescorer: Optional[Union[NLIBackend, PairedRescorer]] = None,
        rescore_top_k: int = DEFAULT_SETTINGS["rescore_top_k"],
        rescore_top_share: float = DEFAULT_SETTINGS["rescore_top_share"],
        rescore_similar_k: int = DEFAULT_SETTINGS["rescore_similar_k"],
        cascade_threshold: bool = DEFAULT_SETTINGS["cascade_threshold"],
        first_stage_directions: int = DEFAULT_SETTINGS["first_stage_directions"],
        reverse_top_k: Optional[int] = DEFAULT_SETTINGS["reverse_top_k"],
        rescore_reverse_top_k: Optional[int] = DEFAULT_SETTINGS["rescore_reverse_top_k"],
        doc_score_top_k: int = DEFAULT_SETTINGS["doc_score_top_k"],
        scorer: Optional[Callable] = None,
    ) -> None:
        install_extensions()
        self.name = name
        self.segmenter = segmenter
        self.pairwise = ContradictionDetector(
            nlp, f"{name}.pairwise", model=model, units_key=segmenter.units_key,
            window=window, max_all_pairs=max_all_pairs, threshold=threshold,
            aggregation=aggregation, speakers=speakers, alignment=alignment, pair_scorer=pair_scorer,
            candidates=candidates, rescorer=rescorer, rescore_top_k=rescore_top_k, rescore_top_share=rescore_top_share,
            rescore_similar_k=rescore_similar_k, cascade_threshold=cascade_threshold,
            first_stage_directions=first_stage_directions, reverse_top_k=reverse_top_k,
            rescore_reverse_top_k=rescore_reverse_top_k, doc_score_top_k=doc_score_top_k,
        )
        self.scorer = scorer

    @property
    def cfg(self) -> Dict[str, Any]:  # type: ignore[override]
        return self.pairwise.cfg

    @property
    def model(self) -> NLIBackend:  # type: ignore[override]
        return self.pairwise.model

    def __call__(self, doc: Doc) -> Doc:
        self.segment([doc])
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        for docs in minibatch(stream, size=batch_size):
            self.segment(docs)
            self.set_annotations(docs, self.predict(docs))
            yield from docs

    def segment(self, docs: Iterable[Doc]) -> None:
        """Write statement units to the Docs that have none yet."""
        for doc in docs:
            if self.segmenter.units_key not in doc.spans:
                self.segmenter(doc)

    def predict(self, docs: Iterable[Doc]) -> List[PairScores]:
        """Score the candidate unit pairs of segmented Docs (see `segment`)."""
        return self.pairwise.predict(docs)

    def set_annotations(self, docs: Iterable[Doc], scores: List[PairScores]) -> None:
        for doc, doc_scores in zip(docs, scores):
            contradictions = self.pairwise.findings(doc_scores)
            setattr(doc._, CONTRADICTIONS, contradictions)
            findings = [
                {
                    "kind": KIND_CONTRADICTION,
                    "units": c["units"],
                    "score": c["score"],
                    "method": METHOD_PAIRWISE,
                    **({"evidence": c["evidence"]} if "evidence" in c else {}),
                }
                for c in contradictions
            ]
            setattr(doc._, INCONSISTENCIES, findings)
            setattr(doc._, HAS_INCONSISTENCY, bool(findings))
            setattr(doc._, INCONSISTENCY_SCORE, self.pairwise.document_score(doc_scores))

    def to_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = tuple()) -> None:
        self.pairwise.to_disk(path, exclude=exclude)

    def from_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = tuple()) -> "InconsistencyDetector":
        self.pairwise.from_disk(path, exclude=exclude)
        return self

    def to_bytes(self, *, exclude: Sequence[str] = tuple()) -> bytes:
        return self.pairwise.to_bytes(exclude=exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Sequence[str] = tuple()) -> "InconsistencyDetector":
        self.pairwise.from_bytes(bytes_data, exclude=exclude)
        return self


@Language.factory(
    "inconsistency_detector",
    assigns=[
        f"doc._.{INCONSISTENCIES}",
        f"doc._.{HAS_INCONSISTENCY}",
        f"doc._.{INCONSISTENCY_SCORE}",
        f"doc._.{CONTRADICTIONS}",
        "doc.spans",
        "token.is_sent_start",
    ],
    default_config={
        "model": DEFAULT_NLI_MODEL,
        "segmenter": {"@misc": "spacy-inconsistency.Segmenter.v1"},
        **DEFAULT_SETTINGS,
        "candidates": None,
        "rescorer": DEFAULT_RESCORER,
        "scorer": {"@scorers": "spacy-inconsistency.inconsistency_scorer.v1"},
    },
    default_score_weights={
        "inconsistency_f": 1.0,
        "inconsistency_acc": None,
        "inconsistency_p": None,
        "inconsistency_r": None,
        "inconsistency_auc": None,
    },
)
def make_inconsistency_detector(
    nlp: Language,
    name: str,
    model: Union[NLIBackend, str],
    segmenter: Segmenter,
    window: int,
    max_all_pairs: int,
    threshold: Optional[float],
    aggregation: str,
    speakers: str,
    alignment: bool,
    pair_scorer: Optional[str],
    candidates: Optional[Callable[[Sequence[Span]], numpy.ndarray]],
    rescorer: Optional[Union[NLIBackend, PairedRescorer, str]],
    rescore_top_k: int,
    rescore_top_share: float,
    rescore_similar_k: int,
    cascade_threshold: bool,
    first_stage_directions: int,
    reverse_top_k: Optional[int],
    rescore_reverse_top_k: Optional[int],
    doc_score_top_k: int,
    scorer: Optional[Callable],
) -> InconsistencyDetector:
    """Create an `inconsistency_detector` (see `InconsistencyDetector`)."""
    require_backend(model, factory="inconsistency_detector", backend="spacy-inconsistency.NLIBackend.v1")
    require_backend(rescorer, factory="inconsistency_detector", backend="spacy-inconsistency.NLIBackend.v1",
                    setting="rescorer")
    return InconsistencyDetector(
        nlp, name, model=model, segmenter=segmenter, window=window,
        max_all_pairs=max_all_pairs, threshold=threshold, aggregation=aggregation,
        speakers=speakers, alignment=alignment, pair_scorer=pair_scorer, candidates=candidates,
        rescorer=rescorer, rescore_top_k=rescore_top_k, rescore_top_share=rescore_top_share,
        rescore_similar_k=rescore_similar_k, cascade_threshold=cascade_threshold,
        first_stage_directions=first_stage_directions, reverse_top_k=reverse_top_k,
        rescore_reverse_top_k=rescore_reverse_top_k, doc_score_top_k=doc_score_top_k, scorer=scorer,
    )
