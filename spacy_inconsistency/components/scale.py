"""`scale_scorer`: SCALE scores of claims against a Doc, with tree-retrieved evidence.

Claims come with the Doc: set them with `set_claims(doc, claims)` (or build
the Doc with `make_claims_doc(nlp, source, claims)`); they are kept in
``doc.user_data["inconsistency_claims"]`` and so travel with the Doc through
`nlp.pipe`, `DocBin(store_user_data=True)` and `n_process=2`. A Doc without
claims is checked against itself: each statement unit is a claim, scored
against the chunks with that unit cut out ("self" mode).

For each claim: P(entailed) against every chunk, the SCALE score (the
highest), the best chunk, and the most relevant unit found by the paper's
search tree. Written to ``doc._.inconsistency_scale`` as plain JSON data.
"""
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import srsly
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.util import minibatch

from ..backends.entailment import EntailmentBackend
from ..calibration import CALIBRATION_FILE, ScoreCalibration, shipped_calibration
from ..chunk import (
    DEFAULT_CHUNK_SIZE, DEFAULT_ENTAILMENT_MODEL, DEFAULT_OVERLAP, get_claims, plan_chunks,
    statement_units,
)
from ..backends.loading import require_backend, warn_other_language
from ..errors import Errors, Warnings
from ..extensions import (
    CHUNKS_KEY, CLAIM_LABELS_KEY, CLAIMS_KEY, SCALE_RESULTS, UNITS_KEY, install_extensions,
)
from ..scale import DEFAULT_BRANCHES, check_chunk_settings, tree_search
from ..serialize import CfgSerializable

RETRIEVAL_SCOPES = ("best_chunk", "document", "none")
CFG_KEYS = (
    "chunk_size", "overlap", "branches", "retrieval_scope", "self_check", "units_key",
    "chunks_key", "claims_key", "calibration",
)
AUTO_CALIBRATION = "auto"


def set_claims(
    doc: Doc, claims: Sequence[str], *, key: str = CLAIMS_KEY, labels: Optional[Sequence[bool]] = None,
) -> Doc:
    """Attach claims to a Doc for `scale_scorer` (and `inconsistency_chunker`).

    doc (Doc): The source Doc.
    claims (Sequence[str]): The claims to score against it (e.g. summary sentences).
    key (str): The `doc.user_data` key.
    labels (Optional[Sequence[bool]]): Gold labels, one per claim (True = the
        source supports the claim), kept in
        ``doc.user_data["inconsistency_claim_labels"]`` for the SCALE scorer.
    RETURNS (Doc): The same Doc.
    """
    claims = list(claims)
    if not all(isinstance(c, str) for c in claims):
        raise ValueError(Errors.E107.format(key=key, value=claims))
    for i, claim in enumerate(claims):
        if not claim.strip():
            raise ValueError(Errors.E105.format(index=i, premise=0))
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(claims) or not all(isinstance(x, bool) for x in labels):
            raise ValueError(Errors.E112.format(n_claims=len(claims), value=labels))
        doc.user_data[CLAIM_LABELS_KEY] = labels
    doc.user_data[key] = claims
    return doc


def make_claims_doc(
    nlp: Language, source: str, claims: Sequence[str], *, key: str = CLAIMS_KEY,
    labels: Optional[Sequence[bool]] = None,
) -> Doc:
    """Tokenize a source text into a Doc that carries its claims (no components run).

    nlp (Language): Pipeline whose tokenizer is used.
    source (str): The source text.
    claims (Sequence[str]): The claims.
    key (str): The `doc.user_data` key.
    labels (Optional[Sequence[bool]]): Gold labels per claim (see `set_claims`).
    RETURNS (Doc): The Doc; run `nlp` (or `nlp.pipe`) on it.
    """
    return set_claims(nlp.make_doc(source), claims, key=key, labels=labels)


def evidence_span(doc: Doc, claim: Dict[str, Any]) -> Optional[Span]:
    """The evidence unit of a claim record of `doc._.inconsistency_scale`, as a Span."""
    evidence = claim.get("evidence")
    if not evidence:
        return None
    return doc.char_span(evidence["start_char"], evidence["end_char"], label=evidence.get("speaker", ""),
                         alignment_mode="expand")


def _cut(text: str, start: int, end: int, hole: Optional[Tuple[int, int]]) -> str:
    """Text of [start, end) with the claim's own range left out (self mode)."""
    if hole is None or hole[1] <= start or hole[0] >= end:
        return text[start:end]
    return text[start : max(start, hole[0])] + " " + text[min(end, hole[1]) : end]


class _DocWork:
    """What `predict` collects about one Doc."""

    def __init__(self) -> None:
        self.mode = "claims"
        self.claims: List[Dict[str, Any]] = []
        self.chunks: List[Tuple[int, int]] = []
        self.units: List[Tuple[int, int]] = []
        self.scores: List[List[Optional[float]]] = []
        self.evidence: List[Optional[Dict[str, Any]]] = []
        self.empty_source = False


class ScaleScorer(CfgSerializable, Pipe):
    """Score claims against a Doc with SCALE (chunked entailment, max over chunks).

    nlp (Language): The pipeline.
    name (str): The component name.
    model (EntailmentBackend): The entailment backend.
    chunk_size (int): Tokens per model input, prompt and longest claim included.
    overlap (float): Share of a chunk's tokens repeated in the next chunk.
    branches (int): Groups per level of the retrieval tree (2 = binary).
    retrieval_scope (str): Where the tree starts: "best_chunk" (the units of
        the claim's best chunk: inputs never exceed the chunk budget),
        "document" (all units, as the paper and `scale-score` do; for models
        with an input limit the document must fit it), or "none".
    self_check (bool): Score the Doc's own units against the rest of it when
        it has no claims; when False such Docs get no claims.
    units_key (str): `doc.spans` key of the statement units (else sentences).
    chunks_key (str): `doc.spans` key of chunks from `inconsistency_chunker`;
        when absent, chunks are planned here with the same settings.
    claims_key (str): `doc.user_data` key of the claims.
    calibration (Optional[str]): What a claim's `score` is. "auto": P(supported) from the
        calibration map fitted for the model (`scale_calibration.json`; shipped for
        "mpnet-lora", fitted on TRUE), else the model's own score; a path: that map
        (`scripts/scale/fit_calibration.py`); None: the model's own score, max P(entailed)
        over the chunks, as the paper and `scale-score`. `raw_score` always holds the latter.
    scorer (Optional[Callable]): The scoring method (`nlp.evaluate`).
    """

    cfg_keys = CFG_KEYS

    def __init__(
        self,
        nlp: Language,
        name: str = "scale_scorer",
        *,
        model: EntailmentBackend,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        overlap: float = DEFAULT_OVERLAP,
        branches: int = DEFAULT_BRANCHES,
        retrieval_scope: str = "best_chunk",
        self_check: bool = True,
        units_key: str = UNITS_KEY,
        chunks_key: str = CHUNKS_KEY,
        claims_key: str = CLAIMS_KEY,
        calibration: Optional[str] = AUTO_CALIBRATION,
        scorer: Optional[Callable] = None,
    ) -> None:
        install_extensions()
        if retrieval_scope not in RETRIEVAL_SCOPES:
            raise ValueError(Errors.E110.format(value=retrieval_scope))
        if branches < 2:
            raise ValueError(Errors.E006.format(name="branches", expected="at least 2", value=branches))
        check_chunk_settings(chunk_size, overlap)
        # A chunk_size over the model's input limit (the default 1000 with a
        # 512-token NLI model such as the default mpnet-lora) is lowered to the limit when chunks are
        # planned; that shortens chunks, it cuts no text.
        self.name = name
        self.model = model
        self.scorer = scorer
        self.cfg: Dict[str, Any] = {
            "chunk_size": chunk_size, "overlap": overlap, "branches": branches,
            "retrieval_scope": retrieval_scope, "self_check": self_check, "units_key": units_key,
            "chunks_key": chunks_key, "claims_key": claims_key, "calibration": calibration,
        }
        # Resolved on first use, so a pipeline whose map travels with it (to_disk) loads
        # where the original path does not exist.
        self._calibration: Optional[ScoreCalibration] = None
        self._calibration_resolved = False
        self._language_warned = False  # W143 / W144 once per component

    @property
    def calibration(self) -> Optional[ScoreCalibration]:
        """The map applied to claim scores (None: the model's own scores)."""
        if not self._calibration_resolved:
            setting = self.cfg["calibration"]
            if setting is None or str(setting).lower() == "none":
                path = None
            elif setting == AUTO_CALIBRATION:
                path = shipped_calibration(self.model.name)
            else:
                path = Path(setting)
            self._calibration = ScoreCalibration.from_disk(path) if path is not None else None
            self._calibration_resolved = True
        return self._calibration

    def to_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = tuple()) -> None:
        super().to_disk(path, exclude=exclude)
        if self.calibration is not None:
            self.calibration.to_disk(Path(path) / CALIBRATION_FILE)

    def from_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = tuple()) -> "ScaleScorer":
        super().from_disk(path, exclude=exclude)
        stored = Path(path) / CALIBRATION_FILE
        self._calibration = ScoreCalibration.from_disk(stored) if stored.is_file() else None
        self._calibration_resolved = stored.is_file() or self.cfg["calibration"] is None
        return self

    def to_bytes(self, *, exclude: Sequence[str] = tuple()) -> bytes:
        calibration = self.calibration
        return srsly.msgpack_dumps({"cfg": self.cfg, "calibration": calibration.to_dict() if calibration else None})

    def from_bytes(self, bytes_data: bytes, *, exclude: Sequence[str] = tuple()) -> "ScaleScorer":
        data = srsly.msgpack_loads(bytes_data)
        self._restore(data["cfg"])
        stored = data.get("calibration")
        self._calibration = ScoreCalibration.from_dict(stored) if stored else None
        self._calibration_resolved = stored is not None or self.cfg["calibration"] is None
        return self

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 16) -> Iterator[Doc]:
        for docs in minibatch(stream, size=batch_size):
            self.set_annotations(docs, self.predict(docs))
            yield from docs

    # -- predict --------------------------------------------------------------

    def _collect(self, doc: Doc) -> _DocWork:
        cfg = self.cfg
        work = _DocWork()
        text = doc.text
        work.units = statement_units(doc, cfg["units_key"]) if len(doc) else []
        external = get_claims(doc, cfg["claims_key"])
        if external is not None:
            for i, claim in enumerate(external):
                if not claim.strip():
                    raise ValueError(Errors.E105.format(index=i, premise=0))
            work.claims = [{"text": c, "start_char": None, "end_char": None, "unit": None} for c in external]
        elif cfg["self_check"]:
            work.mode = "self"
            work.claims = [
                {"text": text[a:b], "start_char": a, "end_char": b, "unit": k}
                for k, (a, b) in enumerate(work.units)
                if any(ch.isalnum() for ch in text[a:b])
            ]
        if not text.strip():
            work.empty_source = True
            return work
        if cfg["chunks_key"] in doc.spans and len(doc.spans[cfg["chunks_key"]]):
            work.chunks = [(s.start_char, s.end_char) for s in doc.spans[cfg["chunks_key"]]]
        elif work.claims:
            plan = plan_chunks(
                doc, backend=self.model, claims=[c["text"] for c in work.claims],
                chunk_size=cfg["chunk_size"], overlap=cfg["overlap"], units_key=cfg["units_key"],
            )
            work.chunks = plan.bounds
        return work

    def predict(self, docs: Iterable[Doc]) -> List[_DocWork]:
        """Score the claims of a batch of Docs: all (chunk, claim) inputs in one backend call.

        docs (Iterable[Doc]): The Docs.
        RETURNS (List[_DocWork]): Per Doc: claims, chunks, scores and evidence.
        """
        docs = list(docs)
        if not self._language_warned:
            self._language_warned = warn_other_language(self.name, self.model.name, docs)
        works = [self._collect(doc) for doc in docs]
        backend = self.model
        lengths: List[int] = []
        specs: List[Tuple[Any, ...]] = []
        owners: List[Tuple[int, int, int]] = []
        n_empty = 0
        for d, (doc, work) in enumerate(zip(docs, works)):
            text = doc.text
            work.scores = [[None] * len(work.chunks) for _ in work.claims]
            if work.empty_source:
                n_empty += len(work.claims)
                continue
            chunk_ids = [backend.premise_ids(text[a:b]) for a, b in work.chunks]
            for c, claim in enumerate(work.claims):
                template = backend.template(claim["text"])
                hole = (claim["start_char"], claim["end_char"]) if work.mode == "self" else None
                for k, (a, b) in enumerate(work.chunks):
                    if hole is not None and hole[0] < b and hole[1] > a:
                        rest = _cut(text, a, b, hole)
                        if not rest.strip():
                            continue
                        ids = backend.premise_ids(rest)
                    else:
                        ids = chunk_ids[k]
                    specs.append((template, ids))
                    lengths.append(template.overhead + len(ids))
                    owners.append((d, c, k))
        if n_empty:
            warnings.warn(Warnings.W100.format(n=n_empty))
        values = backend.score_inputs(lengths, lambda i: specs[i][0].build(specs[i][1]))
        del specs
        for (d, c, k), value in zip(owners, values.tolist()):
            works[d].scores[c][k] = float(value)
        self._retrieve(docs, works)
        return works

    def _retrieve(self, docs: List[Doc], works: List[_DocWork]) -> None:
        scope = self.cfg["retrieval_scope"]
        unit_texts: List[List[str]] = []
        candidates: List[List[int]] = []
        claims: List[str] = []
        where: List[Tuple[int, int]] = []
        for d, (doc, work) in enumerate(zip(docs, works)):
            work.evidence = [None] * len(work.claims)
            if scope == "none":
                continue
            full = doc.text
            texts = [full[a:b] for a, b in work.units]
            for c, claim in enumerate(work.claims):
                row = [s for s in work.scores[c] if s is not None]
                if not row:
                    continue
                best = max(range(len(work.scores[c])), key=lambda k: -1.0 if work.scores[c][k] is None else work.scores[c][k])
                if scope == "best_chunk":
                    a, b = work.chunks[best]
                    pool = [u for u, (ua, ub) in enumerate(work.units) if ua < b and ub > a]
                else:
                    pool = list(range(len(work.units)))
                pool = [u for u in pool if u != claim["unit"] and texts[u].strip()]
                if not pool:
                    continue
                unit_texts.append(texts)
                candidates.append(pool)
                claims.append(claim["text"])
                where.append((d, c))
        if not claims:
            return
        found = tree_search(unit_texts, candidates, claims, backend=self.model, branches=self.cfg["branches"])
        for idx, ((d, c), (u, value, calls)) in enumerate(zip(where, found)):
            doc, work = docs[d], works[d]
            a, b = work.units[u]
            span = doc.char_span(a, b, alignment_mode="expand")
            work.evidence[c] = {
                "start_char": a, "end_char": b, "text": unit_texts[idx][u],
                "speaker": span.label_ if span is not None else "", "score": float(value), "n_calls": int(calls),
            }

    # -- annotations ----------------------------------------------------------

    def results(self, work: _DocWork) -> Dict[str, Any]:
        """The plain-data record stored on the Doc."""
        claims = []
        calibration = self.calibration
        for c, claim in enumerate(work.claims):
            row = work.scores[c]
            valid = [(s, k) for k, s in enumerate(row) if s is not None]
            best_score, best = max(valid, key=lambda x: (x[0], -x[1])) if valid else (None, None)
            score = best_score
            if calibration is not None and best_score is not None:
                score = calibration.calibrate(best_score)
            claims.append(
                {
                    "text": claim["text"], "start_char": claim["start_char"], "end_char": claim["end_char"],
                    "score": score, "raw_score": best_score, "best_chunk": best, "chunk_scores": list(row),
                    "evidence": work.evidence[c] if work.evidence else None,
                }
            )
        scored = [c["score"] for c in claims if c["score"] is not None]
        return {
            "mode": work.mode,
            "model": self.model.name,
            "calibrated": calibration is not None,
            "chunks": [{"start_char": a, "end_char": b} for a, b in work.chunks],
            "claims": claims,
            # The Doc is as consistent as its least supported claim.
            "score": min(scored) if scored else None,
        }

    def set_annotations(self, docs: Iterable[Doc], works: List[_DocWork]) -> None:
        for doc, work in zip(docs, works):
            setattr(doc._, SCALE_RESULTS, self.results(work))

@Language.factory(
    "scale_scorer",
    assigns=[f"doc._.{SCALE_RESULTS}"],
    default_config={
        "model": DEFAULT_ENTAILMENT_MODEL,
        "chunk_size": DEFAULT_CHUNK_SIZE,
        "overlap": DEFAULT_OVERLAP,
        "branches": DEFAULT_BRANCHES,
        "retrieval_scope": "best_chunk",
        "self_check": True,
        "units_key": UNITS_KEY,
        "chunks_key": CHUNKS_KEY,
        "claims_key": CLAIMS_KEY,
        "calibration": AUTO_CALIBRATION,
        "scorer": {"@scorers": "spacy-inconsistency.scale_scorer.v1"},
    },
    default_score_weights={"scale_auc": 1.0, "scale_f": 0.0, "scale_acc": 0.0, "scale_ece": None},
)
def make_scale_scorer(
    nlp: Language,
    name: str,
    model: Union[EntailmentBackend, str],
    chunk_size: int,
    overlap: float,
    branches: int,
    retrieval_scope: str,
    self_check: bool,
    units_key: str,
    chunks_key: str,
    claims_key: str,
    calibration: Optional[str],
    scorer: Optional[Callable],
) -> ScaleScorer:
    """Create a `scale_scorer` (see `ScaleScorer` for the settings)."""
    require_backend(model, factory="scale_scorer", backend="spacy-inconsistency.EntailmentBackend.v1")
    return ScaleScorer(
        nlp, name, model=model, chunk_size=chunk_size, overlap=overlap, branches=branches,
        retrieval_scope=retrieval_scope, self_check=self_check, units_key=units_key,
        chunks_key=chunks_key, claims_key=claims_key, calibration=calibration, scorer=scorer,
    )
