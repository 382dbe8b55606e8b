"""`inconsistency_chunker`: SCALE chunks measured in the scoring model's tokens.

A chunk is a run of whole statement units (`doc.spans["inconsistency_units"]`,
else sentences) whose tokens, with the prompt and the longest claim of the
Doc, fit `chunk_size`; consecutive chunks share about `overlap` of their
tokens. A unit longer than a chunk on its own is cut between spaCy tokens.
The text between units (speaker names of dialogue turns, line breaks) stays
in the chunks: chunks are contiguous pieces of the Doc's text.

Memory: per unit only a token count is kept, and each chunk is tokenized
once to check its size, so memory grows with the number of units, not with
chunks times tokens.
"""
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc, SpanGroup
from thinc.api import Config

from .backends.entailment import EntailmentBackend
from .errors import Errors
from .scale import check_chunk_settings
from .extensions import CHUNKS_KEY, CLAIMS_KEY, UNITS_KEY
from .serialize import CfgSerializable

DEFAULT_CHUNK_SIZE = 1000
DEFAULT_OVERLAP = 0.25
# SCALE's default scorer is the shipped mpnet-lora cross-encoder, not the embedded MiniLM:
# on TRUE the MiniLM is at chance (FRANK ROC-AUC 49.8) and mpnet-lora is not (82.5; docs/scale.md).
DEFAULT_ENTAILMENT_MODEL_CONFIG = """
[model]
@misc = "spacy-inconsistency.EntailmentBackend.v1"
model = "mpnet-lora"
kind = "auto"
device = "auto"
prompt = null
yes_token = null
no_token = null
max_batch_size = 32
max_batch_tokens = 16384
revision = null
local_files_only = false
dtype = "auto"
"""
DEFAULT_ENTAILMENT_MODEL = Config().from_str(DEFAULT_ENTAILMENT_MODEL_CONFIG)["model"]
CHUNKER_CFG_KEYS = ("chunk_size", "overlap", "units_key", "chunks_key", "claims_key")


@dataclass
class ChunkPlan:
    """The chunks of one Doc.

    bounds (List[Tuple[int, int]]): (start_char, end_char) of each chunk.
    n_tokens (List[int]): Premise tokens of each chunk (prompt not counted).
    budget (int): Premise tokens a chunk may have.
    """

    bounds: List[Tuple[int, int]]
    n_tokens: List[int]
    budget: int


def get_claims(doc: Doc, key: str = CLAIMS_KEY) -> Optional[List[str]]:
    """The external claims attached to a Doc, or None when it has none.

    doc (Doc): The Doc.
    key (str): The `doc.user_data` key.
    RETURNS (Optional[List[str]]): The claims.
    """
    value = doc.user_data.get(key)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(c, str) for c in value):
        raise ValueError(Errors.E107.format(key=key, value=value))
    return list(value)


def statement_units(doc: Doc, units_key: str = UNITS_KEY) -> List[Tuple[int, int]]:
    """Character ranges of the Doc's statement units, in text order.

    `doc.spans[units_key]` when present, else the sentences when they are
    set, else no units (the chunker then cuts between spaCy tokens).

    doc (Doc): The Doc.
    units_key (str): The `doc.spans` key of the units.
    RETURNS (List[Tuple[int, int]]): (start_char, end_char) per unit.
    """
    if units_key in doc.spans:
        spans = list(doc.spans[units_key])
    elif len(doc) and doc.has_annotation("SENT_START"):
        spans = [s for s in doc.sents if not all(t.is_space for t in s)]
    else:
        spans = []
    return sorted((int(s.start_char), int(s.end_char)) for s in spans)


def _pieces(text: str, units: Sequence[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """Cut the whole text at unit ends: each piece is one unit with what precedes it."""
    cuts = sorted({end for _, end in units if 0 < end < len(text)})
    bounds = [0, *cuts, len(text)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if text[a:b].strip()]


def _split_long(doc: Doc, start: int, end: int, budget: int, backend: EntailmentBackend) -> List[Tuple[int, int]]:
    """Cut a piece longer than the budget between spaCy tokens."""
    span = doc.char_span(start, end, alignment_mode="expand")
    tokens = list(span) if span is not None else []
    if not tokens:
        return [(start, end)]
    counts = backend.count_tokens([t.text_with_ws for t in tokens])
    out: List[Tuple[int, int]] = []
    piece_start, total = start, 0
    for token, n in zip(tokens, counts):
        if n > budget:
            raise ValueError(
                Errors.E006.format(name="chunk_size", expected=f"room for the token {token.text[:40]!r} ({n} model tokens)",
                                   value=budget)
            )
        if total + n > budget and total:
            out.append((piece_start, token.idx))
            piece_start, total = token.idx, 0
        total += n
    out.append((piece_start, end))
    return out


def plan_chunks(
    doc: Doc,
    *,
    backend: EntailmentBackend,
    claims: Sequence[str],
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    overlap: float = DEFAULT_OVERLAP,
    units_key: str = UNITS_KEY,
) -> ChunkPlan:
    """Chunk a Doc for SCALE: whole units, prompt and longest claim included in `chunk_size`.

    doc (Doc): The Doc (units from `doc.spans[units_key]` or its sentences).
    backend (EntailmentBackend): Its tokenizer measures the chunks.
    claims (Sequence[str]): The claims that will be scored against the
        chunks; the longest one sets the room left for the source text.
    chunk_size (int): Tokens per model input, prompt and claim included.
    overlap (float): Share of a chunk's tokens repeated in the next, in [0, 1).
    units_key (str): The `doc.spans` key of the units.
    RETURNS (ChunkPlan): The chunks.
    """
    check_chunk_settings(chunk_size, overlap)
    if backend.max_length is not None:
        chunk_size = min(chunk_size, int(backend.max_length))
    overhead, longest = 0, ""
    for claim in claims:
        n = backend.template(claim).overhead
        if n > overhead:
            overhead, longest = n, claim
    if not claims:
        overhead = backend.template("").overhead
    budget = chunk_size - overhead
    if budget < 1:
        raise ValueError(
            Errors.E100.format(claim=longest[:80], overhead=overhead, name=backend.name, left=max(budget, 0),
                               chunk_size=chunk_size, minimum=1)
        )
    # `doc.text` joins every token on each access: read it once.
    text = doc.text
    if not text.strip():
        return ChunkPlan([], [], budget)
    units = statement_units(doc, units_key)
    pieces = _pieces(text, units) if units else [(0, len(text))]
    counts = backend.count_tokens([text[a:b] for a, b in pieces])
    fitted: List[Tuple[int, int]] = []
    fitted_counts: List[int] = []
    for (a, b), n in zip(pieces, counts):
        if n <= budget:
            fitted.append((a, b))
            fitted_counts.append(n)
        else:
            parts = _split_long(doc, a, b, budget, backend)
            fitted.extend(parts)
            fitted_counts.extend(backend.count_tokens([text[x:y] for x, y in parts]))
    bounds: List[Tuple[int, int]] = []
    sizes: List[int] = []
    i, n_pieces = 0, len(fitted)
    while i < n_pieces:
        j, total = i, 0
        while j < n_pieces and total + fitted_counts[j] <= budget:
            total += fitted_counts[j]
            j += 1
        j = max(j, i + 1)
        while True:
            start, end = _strip(text, fitted[i][0], fitted[j - 1][1])
            real = backend.count_tokens([text[start:end]])[0]
            # Tokens can merge differently across a piece boundary; never exceed the budget.
            if real <= budget or j - 1 <= i:
                break
            j -= 1
        bounds.append((start, end))
        sizes.append(real)
        if j >= n_pieces:
            break
        k, shared = j, 0
        while k - 1 > i and shared + fitted_counts[k - 1] <= overlap * total:
            k -= 1
            shared += fitted_counts[k]
        i = k
    return ChunkPlan(bounds, sizes, budget)


def _strip(text: str, start: int, end: int) -> Tuple[int, int]:
    piece = text[start:end]
    return start + len(piece) - len(piece.lstrip()), end - (len(piece) - len(piece.rstrip()))


def chunk_claims(doc: Doc, backend: EntailmentBackend, claims_key: str, units_key: str) -> List[str]:
    """The claims a Doc's chunks must leave room for: its external claims, else its units."""
    claims = get_claims(doc, claims_key)
    if claims is not None:
        return claims
    text = doc.text
    return [text[a:b] for a, b in statement_units(doc, units_key)]


class Chunker(CfgSerializable):
    """Write SCALE chunks to `doc.spans[chunks_key]`.

    name (str): The component name.
    model (EntailmentBackend): The scoring backend whose tokenizer and prompt
        measure the chunks (its weights are not loaded).
    chunk_size (int): Tokens per model input, prompt and longest claim included.
    overlap (float): Share of a chunk's tokens repeated in the next chunk.
    units_key (str): `doc.spans` key of the statement units.
    chunks_key (str): `doc.spans` key to write.
    claims_key (str): `doc.user_data` key of external claims.
    """

    cfg_keys = CHUNKER_CFG_KEYS

    def __init__(
        self,
        name: str = "inconsistency_chunker",
        *,
        model: EntailmentBackend,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        overlap: float = DEFAULT_OVERLAP,
        units_key: str = UNITS_KEY,
        chunks_key: str = CHUNKS_KEY,
        claims_key: str = CLAIMS_KEY,
    ) -> None:
        check_chunk_settings(chunk_size, overlap)
        self.name = name
        self.model = model
        self.cfg: Dict[str, Any] = {
            "chunk_size": chunk_size, "overlap": overlap, "units_key": units_key,
            "chunks_key": chunks_key, "claims_key": claims_key,
        }

    def __call__(self, doc: Doc) -> Doc:
        cfg = self.cfg
        plan = plan_chunks(
            doc, backend=self.model, claims=chunk_claims(doc, self.model, cfg["claims_key"], cfg["units_key"]),
            chunk_size=cfg["chunk_size"], overlap=cfg["overlap"], units_key=cfg["units_key"],
        )
        spans = [doc.char_span(a, b, alignment_mode="expand") for a, b in plan.bounds]
        group = SpanGroup(doc, name=cfg["chunks_key"], spans=spans)
        group.attrs["n_tokens"] = plan.n_tokens
        group.attrs["budget"] = plan.budget
        group.attrs["chunk_size"] = cfg["chunk_size"]
        doc.spans[cfg["chunks_key"]] = group
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        for doc in stream:
            yield self(doc)

@Language.factory(
    "inconsistency_chunker",
    assigns=["doc.spans"],
    default_config={
        "model": DEFAULT_ENTAILMENT_MODEL,
        "chunk_size": DEFAULT_CHUNK_SIZE,
        "overlap": DEFAULT_OVERLAP,
        "units_key": UNITS_KEY,
        "chunks_key": CHUNKS_KEY,
        "claims_key": CLAIMS_KEY,
    },
)
def make_chunker(
    nlp: Language,
    name: str,
    model: EntailmentBackend,
    chunk_size: int,
    overlap: float,
    units_key: str,
    chunks_key: str,
    claims_key: str,
) -> Chunker:
    """Create an `inconsistency_chunker` (see `Chunker` for the settings)."""
    return Chunker(
        name, model=model, chunk_size=chunk_size, overlap=overlap, units_key=units_key,
        chunks_key=chunks_key, claims_key=claims_key,
    )
