"""Every Doc extension of the package, installed idempotently.

Values are plain Python (lists, dicts, floats, bools) so that they survive
``Doc.to_bytes``, ``DocBin(store_user_data=True)`` and ``nlp.pipe(n_process=2)``.
Character offsets are stored instead of Span objects; ``finding_spans`` turns
them back into Spans.
"""
from typing import Any, Dict, List

from spacy.tokens import Doc, Span

CONTRADICTIONS = "contradictions"
INCONSISTENCIES = "inconsistencies"
HAS_INCONSISTENCY = "has_inconsistency"
INCONSISTENCY_SCORE = "inconsistency_score"

UNITS_KEY = "inconsistency_units"
# SCALE: results per claim; chunks span group; claims given with a Doc (user_data key).
SCALE_RESULTS = "inconsistency_scale"
CHUNKS_KEY = "inconsistency_chunks"
CLAIMS_KEY = "inconsistency_claims"
# Gold labels of the claims (True = supported by the source), for the SCALE scorer.
CLAIM_LABELS_KEY = "inconsistency_claim_labels"
# doc.spans key of the claim-relation rationales.
RATIONALE_KEY = "claim_relation_rationale"
# Evidence units (char offsets) of `evidence_extractor`; its trace of LLM
# calls is doc.user_data[EVIDENCE_TRACE]. A Doc whose judge failed (the
# client raised) gets an error record in EVIDENCE_ERROR instead of a result.
EVIDENCE = "inconsistency_evidence"
EVIDENCE_TRACE = "inconsistency_evidence_trace"
EVIDENCE_ERROR = "inconsistency_evidence_error"

# Every Doc extension name, registered by `install_extensions`.
DOC_EXTENSIONS = [
    CONTRADICTIONS,
    INCONSISTENCIES,
    HAS_INCONSISTENCY,
    INCONSISTENCY_SCORE,
    SCALE_RESULTS,
    EVIDENCE,
    EVIDENCE_ERROR,
]


def install_extensions() -> None:
    """Register the Doc extensions once; an existing registration is kept."""
    for name in DOC_EXTENSIONS:
        # None means "not processed", which differs from "processed, nothing found".
        if not Doc.has_extension(name):
            Doc.set_extension(name, default=None)


def unit_record(span: Span) -> Dict[str, Any]:
    """Describe a statement unit by character offsets, for storing on a Doc.

    span (Span): The unit.
    RETURNS (dict): `start_char`, `end_char`, `text` and `speaker` (the span
        label, "" when the unit has no speaker).
    """
    return {
        "start_char": int(span.start_char),
        "end_char": int(span.end_char),
        "text": span.text,
        "speaker": span.label_,
    }


def finding_spans(doc: Doc, finding: Dict[str, Any]) -> List[Span]:
    """Turn the units of a stored finding back into Spans of `doc`.

    doc (Doc): The Doc the finding was written to.
    finding (dict): An item of `doc._.contradictions` or `doc._.inconsistencies`.
    RETURNS (List[Span]): One Span per unit, with the speaker as label.
    """
    spans = []
    for unit in finding["units"]:
        span = doc.char_span(
            unit["start_char"], unit["end_char"], label=unit.get("speaker", ""),
            alignment_mode="expand",
        )
        spans.append(span)
    return spans
