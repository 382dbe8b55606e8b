"""`contradiction_detector`: contradicting pairs of statement units within a Doc."""
import logging
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.util import minibatch, registry
from thinc.api import Config

from .. import candidates as _candidates
from .. import defaults
from ..backends.loading import DEFAULT_MODEL, MPNET_LORA_MODEL, require_backend, warn_other_language
from ..backends.nli import CONTRADICTION, NLIBackend, has_native_bf16
from ..errors import Errors, Warnings
from ..extensions import CONTRADICTIONS, UNITS_KEY, install_extensions, unit_record
from ..pair_score import PAIR_SCORER_FILE, PairScoreModel, stack_probabilities
from ..pair_scoring import (  # noqa: F401  (re-exported: the names callers have used)
    AGGREGATIONS,
    AGGREGATION_OPTIONS,
    LEARNED,
    PairScores,
    PairSettings,
    ProbeScores,
    candidate_pairs,
    check_aggregation,
    check_speakers,
    combine,
    doc_units,
    has_content,
    noisy_or_top,
    pair_finding,
    score_pairs,
    speaker_pairs,
    unit_alignment,
)
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
# The cascade's second stage when the first model is the embedded one (see `PairedRescorer`).
DEFAULT_RESCORER = {"@misc": "spacy-inconsistency.PairedRescorer.v1", "model": MPNET_LORA_MODEL, "first": DEFAULT_MODEL,
                    "cpu_max_batch_size": 16}
logger = logging.getLogger("spacy_inconsistency.pairwise")
logger.addHandler(logging.NullHandler())
# Docs with at least this many units get a progress line in the log.
LONG_DOC_UNITS = 1000
# Defaults shared by `contradiction_detector` and `inconsistency_detector` (values in `defaults.py`).
DEFAULT_SETTINGS: Dict[str, Any] = {
    "window": defaults.WINDOW,
    "max_all_pairs": defaults.MAX_ALL_PAIRS,
    "threshold": None,
    "aggregation": defaults.AGGREGATION,
    "speakers": defaults.SPEAKERS,
    "alignment": defaults.ALIGNMENT,
    "pair_scorer": None,
    "rescore_top_k": defaults.RESCORE_TOP_K,
    "rescore_top_share": defaults.RESCORE_TOP_SHARE,
    "rescore_similar_k": defaults.RESCORE_SIMILAR_K,
    "cascade_threshold": defaults.CASCADE_THRESHOLD,
    "first_stage_directions": defaults.FIRST_STAGE_DIRECTIONS,
    "reverse_top_k": defaults.REVERSE_TOP_K,
    "rescore_reverse_top_k": defaults.RESCORE_REVERSE_TOP_K,
    "doc_score_top_k": defaults.DOC_SCORE_TOP_K,
}
DEFAULT_RULE_THRESHOLD = defaults.RULE_THRESHOLD
CFG_KEYS = ("units_key", "window", "max_all_pairs", "threshold", "aggregation", "speakers", "alignment", "pair_scorer",
            "rescore_top_k", "rescore_top_share", "rescore_similar_k", "cascade_threshold", "first_stage_directions",
            "reverse_top_k", "rescore_reverse_top_k", "doc_score_top_k")


# The settings that decide which pairs a cascade's second stage reads: its fitted document
# threshold applies only to the cascade it was fitted for (`PairScoreModel.document_threshold`).
CASCADE_KEYS = ("rescore_top_k", "rescore_top_share", "rescore_similar_k")


def term_similarities(units: Sequence[Span], pairs: numpy.ndarray) -> numpy.ndarray:
    """The tf-idf cosine of each pair's units over their content words within the Doc
    (`candidates.TermIndex`); 0 for pairs that share no such word.

    units (Sequence[Span]): The Doc's units.
    pairs (numpy.ndarray): int, shape (n, 2), indices into `units`.
    RETURNS (numpy.ndarray): float, shape (n,).
    """
    index = _candidates.TermIndex(_candidates.unit_terms(units), max_df=1.0)
    if index.X is None or not len(pairs):
        return numpy.zeros(len(pairs))
    return numpy.asarray(index.X[pairs[:, 0]].multiply(index.X[pairs[:, 1]]).sum(axis=1)).ravel()


def similar_pairs(units: Sequence[Span], pairs: numpy.ndarray, top: numpy.ndarray, k: int) -> numpy.ndarray:
    """Indices into `pairs` of the `k` pairs outside `top` whose units are most alike
    (`term_similarities`); pairs that share no content word are never chosen. Ties keep
    the earlier pair.

    units (Sequence[Span]): The Doc's units.
    pairs (numpy.ndarray): int, shape (n, 2), indices into `units`.
    top (numpy.ndarray): Indices into `pairs` already chosen.
    k (int): How many more at most.
    RETURNS (numpy.ndarray): int64 indices, most alike first.
    """
    if k < 1 or len(pairs) <= len(top):
        return numpy.zeros(0, dtype=numpy.int64)
    sims = term_similarities(units, pairs)
    sims[top] = 0.0
    order = numpy.argsort(-sims, kind="stable")[:k]
    return order[sims[order] > 0].astype(numpy.int64)


def second_stage_dtype(dtype: str, device: Any) -> str:
    """The dtype of a cascade's second stage for a `dtype` setting. "auto" is "mixed"
    (bf16 matrix products, float32 residual stream, LayerNorm and softmax) where bf16
    is native on `device`, else float32: the second stage decides, and with all its
    weights in bf16 it lost 1.4 points of matched AUC on the behavioural suite, in
    "mixed" 0.4 (docs/speed.md). Others are kept.

    dtype (str): The first model's `dtype` setting.
    device (torch.device): The device both stages run on.
    RETURNS (str): The second stage's `dtype`.
    """
    if dtype != "auto":
        return dtype
    return "mixed" if has_native_bf16(device) else "float32"


@dataclass(frozen=True)
class PairedRescorer:
    """The second stage trained and measured with one first model: an NLI backend
    for `model` when the detector's first model is `first`, else no rescorer.

    The default pairs the embedded first model with "mpnet-lora" (all-mpnet-base-v2
    with the shipped LoRA adapters), so `config={"model": {"model": "my/nli"}}`
    runs that model alone. The second stage runs on the first model's device, with
    its batch sizes and dtype (see `second_stage_dtype`: "auto" gives it "mixed"
    where bf16 is native, else float32), except that on CPU its batches hold at
    most `cpu_max_batch_size` pairs: it reads few pairs per call (8 per Doc, both
    ways), whose lengths vary, and padding them to a batch's longest costs more
    than small batches do (16: 1.5x faster than 64 on news; docs/speed.md).
    """

    model: str = MPNET_LORA_MODEL
    first: str = DEFAULT_MODEL
    cpu_max_batch_size: int = 16

    def resolve(self, first_model: NLIBackend) -> Optional[NLIBackend]:
        """The rescorer for this first model (None when it is not `first`)."""
        if first_model.name != self.first:
            return None
        keep = ("device", "dtype", "max_batch_size", "max_batch_tokens", "local_files_only")
        settings = {k: v for k, v in first_model.settings.items() if k in keep}
        settings["dtype"] = second_stage_dtype(settings["dtype"], first_model.device)
        if first_model.device.type == "cpu":
            settings["max_batch_size"] = min(settings["max_batch_size"], self.cpu_max_batch_size)
        return NLIBackend(self.model, **settings)


@registry.misc("spacy-inconsistency.PairedRescorer.v1")
def make_paired_rescorer(
    model: str = MPNET_LORA_MODEL, first: str = DEFAULT_MODEL, cpu_max_batch_size: int = 16
) -> PairedRescorer:
    """Create a `PairedRescorer` (the default `rescorer` of the detectors)."""
    if cpu_max_batch_size < 1:
        raise ValueError(Errors.E006.format(name="cpu_max_batch_size", expected="at least 1", value=cpu_max_batch_size))
    return PairedRescorer(model=model, first=first, cpu_max_batch_size=cpu_max_batch_size)


class _Rescored(NamedTuple):
    """One Doc in the cascade's second stage: its top pairs and what the rescorer read."""

    scores: PairScores  # the first stage's
    top: numpy.ndarray  # indices of the rescored pairs into `scores.pairs`
    pairs: numpy.ndarray  # scores.pairs[top]
    unit_texts: List[str]
    facts: Optional[list]  # alignment facts for the learned score, else None
    forward: numpy.ndarray  # (n, 3) probabilities, text order
    backward: numpy.ndarray  # (n, 3), reverse order (the text order's until read)
    done: numpy.ndarray  # bool (n,): reverse order read


class ContradictionDetector(CfgSerializable, Pipe):
    """Find pairs of statement units that contradict each other.

    Each candidate pair is scored by the NLI backend in both directions. The
    default `learned` pair score combines both directions' probabilities with
    alignment evidence (same subject, another time, a hedge, conflicting
    numbers, dates, names; see `spacy_inconsistency.alignment`) in a
    calibrated logistic regression fitted for the NLI model, so a pair scores
    the same in either order. Pairs at or over the threshold are written to
    `doc._.contradictions`, highest score first. Units without content ("4.",
    "No.") are not paired, and in transcripts two different speakers are not
    paired (`speakers = "same"`): a disagreement is not a self-contradiction.

    nlp (Language): The pipeline.
    name (str): The component name.
    model (NLIBackend): The NLI backend; it must have a contradiction label.
    units_key (str): `doc.spans` key of the units (falls back to sentences).
    window (int): Beyond the pair budget, each unit is paired with this many
        following units (and with the units sharing its rarest words).
    max_all_pairs (int): Pair budget per Doc: a Doc with at most this many
        unit pairs has all of them compared; a longer one this many, chosen
        by `candidates.budget.v1`.
    threshold (Optional[float]): Lowest pair score kept as a contradiction;
        None: the document threshold fitted with the learned pair score, which
        grows with the number of pairs compared (0.5 for the fixed rules).
    aggregation (str): How the two directions combine: "learned" (the pair
        score described above), or P(contradiction)'s "min" (both directions
        must say contradiction), "mean" or "max".
    speakers (str): "same": pair units of one speaker (and units without a
        speaker) only; "all": pair everything.
    alignment (bool): Give the learned pair score the alignment evidence
        (English only: units are parsed with spaCy's English pipeline); False
        uses its NLI-only model, as for other languages.
    pair_scorer (Optional[str]): Path of the learned pair score's JSON file;
        None: `pair_scorer.json` in the NLI model's directory.
    candidates (Optional[CandidateStrategy]): Which unit pairs to score
        (see `spacy_inconsistency.candidates`); None uses the budget rule.
    rescorer (Optional[NLIBackend]): A second, larger NLI model (a cascade;
        by default "mpnet-lora", all-mpnet-base-v2 with the shipped adapters;
        None: the first model alone): the `rescore_top_k` highest-scoring pairs
        of each Doc are scored again by it (both ways where it matters, see
        `rescore_reverse_top_k`), and its own learned pair
        score (`pair_scorer.json` in its directory) and document threshold
        decide (with a fixed rule: the rule on its probabilities); the other
        pairs score 0. A pair is then flagged when the rescorer alone would
        flag it and the first model ranks it among the Doc's top k.
    rescore_top_k (int): Pairs per Doc the rescorer sees.
    rescore_top_share (float): In a long Doc it can see more: its top
        max(`rescore_top_k`, ceil(share x compared pairs)) pairs, never more than
        max(`rescore_top_k`, 32), so that a contradiction the first model ranks
        lower among many pairs still reaches it (at the price of more consistent
        pairs read high; docs/detection.md). 0 (the default): always `rescore_top_k`.
    rescore_similar_k (int): Further pairs per Doc the rescorer sees: of the
        pairs outside the first model's top `rescore_top_k`, those whose units
        share the most rare content words (tf-idf cosine within the Doc), so
        that a contradiction the first model misses in a long Doc can still
        reach the rescorer. 0: none.
    cascade_threshold (bool): With a rescorer's learned score, use its
        `"cascade"` document threshold, fitted on what a cascade of these
        `rescore_top_k` and `rescore_similar_k` reads (lower than the default
        rule for Docs of up to about 10 and of more than 45 pairs), where it has
        one; False: the rule fitted as if the rescorer read every compared pair.
    first_stage_directions (int): With a rescorer, the directions the first
        model scores each pair in: 1 (the earlier unit as premise; the first
        stage only ranks the pairs, its score reads that direction as both,
        and the rescorer reads both) or 2. Without a rescorer always 2.
    reverse_top_k (Optional[int]): With a rescorer and two directions, the
        first model reads every pair in text order and the reverse order only
        of the Doc's `reverse_top_k` pairs that reading ranks highest (never
        fewer than `rescore_top_k`); the others' score reads their one
        direction as both. None: both orders of every pair.
    rescore_reverse_top_k (Optional[int]): The rescorer likewise reads the
        `rescore_top_k` pairs in text order and the reverse order of the
        `rescore_reverse_top_k` of them that reading ranks highest, and of any
        pair that would be flagged without it (a finding always has both
        directions read). None: both orders of every rescored pair (the safe
        setting with `aggregation` "max" or "mean", where a pair read one way
        can score lower than read both ways and so be missed).
    doc_score_top_k (int): A Doc's score (`document_score`): 1 - prod(1 - s)
        over its this many highest pair scores; 1: the highest pair score.
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
        window: int = DEFAULT_SETTINGS["window"],
        max_all_pairs: int = DEFAULT_SETTINGS["max_all_pairs"],
        threshold: Optional[float] = DEFAULT_SETTINGS["threshold"],
        aggregation: str = DEFAULT_SETTINGS["aggregation"],
        speakers: str = DEFAULT_SETTINGS["speakers"],
        alignment: bool = DEFAULT_SETTINGS["alignment"],
        pair_scorer: Optional[str] = DEFAULT_SETTINGS["pair_scorer"],
        candidates: Optional[Callable[[Sequence[Span]], numpy.ndarray]] = None,
        rescorer: Optional[Union[NLIBackend, "PairedRescorer"]] = None,
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
        check_aggregation(aggregation)
        if isinstance(doc_score_top_k, bool) or not isinstance(doc_score_top_k, int) or doc_score_top_k < 1:
            raise ValueError(Errors.E006.format(name="doc_score_top_k", expected="at least 1", value=doc_score_top_k))
        if isinstance(rescore_similar_k, bool) or not isinstance(rescore_similar_k, int) or rescore_similar_k < 0:
            raise ValueError(Errors.E006.format(name="rescore_similar_k", expected="0 or more", value=rescore_similar_k))
        for setting, value in (("reverse_top_k", reverse_top_k), ("rescore_reverse_top_k", rescore_reverse_top_k)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(Errors.E006.format(name=setting, expected="at least 1 or null", value=value))
        if rescore_top_k < 1:
            raise ValueError(Errors.E006.format(name="rescore_top_k", expected="at least 1", value=rescore_top_k))
        if isinstance(rescore_top_share, bool) or not isinstance(rescore_top_share, (int, float)) \
                or not 0.0 <= rescore_top_share <= 1.0:
            raise ValueError(Errors.E006.format(name="rescore_top_share", expected="in [0, 1]", value=rescore_top_share))
        if first_stage_directions not in (1, 2):
            raise ValueError(Errors.E006.format(name="first_stage_directions", expected="1 or 2",
                                                value=first_stage_directions))
        if isinstance(rescorer, PairedRescorer):
            rescorer = rescorer.resolve(model)
        if rescorer is not None:
            if CONTRADICTION not in rescorer.label_index:
                raise ValueError(
                    Errors.E003.format(name=rescorer.name, label=CONTRADICTION, labels=list(rescorer.labels), component=name)
                )
        check_speakers(speakers)
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(Errors.E006.format(name="threshold", expected="in [0, 1] or null", value=threshold))
        if window < 1:
            raise ValueError(Errors.E006.format(name="window", expected="at least 1", value=window))
        if max_all_pairs < 1:
            raise ValueError(Errors.E006.format(name="max_all_pairs", expected="at least 1", value=max_all_pairs))
        if CONTRADICTION not in model.label_index:
            raise ValueError(
                Errors.E003.format(name=model.name, label=CONTRADICTION, labels=list(model.labels), component=name)
            )
        self.name = name
        self.model = model
        self.rescorer = rescorer
        self.scorer = scorer
        self.candidates = candidates
        self._language_warned = False  # W143 / W144 once per component, not once per Doc
        self.cfg: Dict[str, Any] = {
            "units_key": units_key,
            "window": window,
            "max_all_pairs": max_all_pairs,
            "threshold": threshold,
            "aggregation": aggregation,
            "speakers": speakers,
            "alignment": alignment,
            "pair_scorer": pair_scorer,
            "rescore_top_k": rescore_top_k,
            "rescore_top_share": float(rescore_top_share),
            "rescore_similar_k": rescore_similar_k,
            "cascade_threshold": bool(cascade_threshold),
            "first_stage_directions": first_stage_directions,
            "reverse_top_k": reverse_top_k,
            "rescore_reverse_top_k": rescore_reverse_top_k,
            "doc_score_top_k": doc_score_top_k,
        }
        self._pair_scorer: Optional[PairScoreModel] = None
        self._rescorer_pair_scorer: Optional[PairScoreModel] = None
        self._load_pair_scorer()

    def _load_pair_scorer(self) -> None:
        self._rescorer_pair_scorer = None
        if self.rescorer is not None and self.cfg["aggregation"] == LEARNED:
            local = self.rescorer.local_dir
            path = Path(local) / PAIR_SCORER_FILE if local is not None else Path(PAIR_SCORER_FILE)
            if not path.exists():
                raise ValueError(Errors.E193.format(name=self.rescorer.name, path=path))
            self._rescorer_pair_scorer = PairScoreModel.from_disk(path)
            scorer, ours = self._rescorer_pair_scorer, self.cascade_settings()
            if self.cfg["cascade_threshold"] and scorer.cascade_settings is not None \
                    and not scorer.fitted_for_cascade(ours):
                warnings.warn(Warnings.W145.format(name=self.name, fitted=scorer.cascade_settings, ours=ours))
        self._pair_scorer = None
        self._aggregation = self.cfg["aggregation"]
        if self._aggregation != LEARNED:
            return
        path = self.cfg["pair_scorer"]
        if path is not None:
            if not Path(path).exists():
                raise ValueError(Errors.E192.format(name=self.model.name, path=path))
            self._pair_scorer = PairScoreModel.from_disk(path)
            return
        local = self.model.local_dir
        if local is None or not (Path(local) / PAIR_SCORER_FILE).exists():
            # Documented fallback: any NLI model works out of the box, with the fixed rule.
            warnings.warn(Warnings.W003.format(name=self.model.name, threshold=self.threshold))
            self._aggregation = "min"
            return
        self._pair_scorer = PairScoreModel.from_disk(Path(local) / PAIR_SCORER_FILE)

    def _restore(self, cfg: Dict[str, Any]) -> Any:
        super()._restore(cfg)
        self._load_pair_scorer()
        return self

    @property
    def aggregation(self) -> str:
        """The aggregation in use ("min" where "learned" has no pair score for the model)."""
        return self._aggregation

    @property
    def pair_scorer(self) -> Optional[PairScoreModel]:
        """The learned pair score (None with a fixed rule)."""
        return self._pair_scorer

    @property
    def rescorer_pair_scorer(self) -> Optional[PairScoreModel]:
        """The rescorer's learned pair score (None without a rescorer or with a fixed rule)."""
        return self._rescorer_pair_scorer

    @property
    def threshold(self) -> float:
        """The threshold in use: the setting, else the learned score's, else 0.5."""
        if self.cfg["threshold"] is not None:
            return float(self.cfg["threshold"])
        if self._pair_scorer is not None:
            return self._pair_scorer.threshold
        return DEFAULT_RULE_THRESHOLD

    def pair_settings(self) -> PairSettings:
        """How this detector's first stage scores pairs, for scoring outside a Doc."""
        return PairSettings(
            name=self.name, model=self.model, units_key=self.cfg["units_key"], candidates=self.candidates,
            aggregation=self._aggregation, threshold=self.threshold, pair_scorer=self._pair_scorer,
            alignment=bool(self.cfg["alignment"]),
        )

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        for docs in minibatch(stream, size=batch_size):
            self.set_annotations(docs, self.predict(docs))
            yield from docs

    def predict(self, docs: Iterable[Doc]) -> List[PairScores]:
        """Score the candidate pairs of a batch of Docs in one backend call
        (two when the reverse order is read for the top pairs only).

        docs (Iterable[Doc]): The Docs.
        RETURNS (List[PairScores]): One per Doc.
        """
        docs = list(docs)
        per_doc = []
        texts: List[Tuple[str, str]] = []
        reverse_k = self._reverse_top_k()
        # A first stage that only ranks for the rescorer reads each pair in text order first.
        directions = 2 if reverse_k is None else 1
        if not self._language_warned:
            self._language_warned = warn_other_language(self.name, self.model.name, docs)
        for doc in docs:
            units = [u for u in doc_units(doc, self.cfg["units_key"], self.name) if has_content(u)]
            unit_texts = [u.text.strip() for u in units]
            probed = ProbeScores(self.model, unit_texts)
            pairs = speaker_pairs(units, self.unit_pairs(units, scorer=probed), self.cfg["speakers"])
            known, forward, backward = probed.lookup(pairs)
            for i, j in pairs[~known].tolist():
                texts.append((unit_texts[i], unit_texts[j]))
                if directions == 2:
                    texts.append((unit_texts[j], unit_texts[i]))
            per_doc.append((units, unit_texts, pairs, known, forward, backward))
            if len(units) >= LONG_DOC_UNITS:
                logger.info("%s: a Doc of %d units, %d candidate pairs (%d already scored)",
                            self.name, len(units), len(pairs), int(known.sum()))
        start = time.perf_counter()
        probs = self._probabilities(self.model, texts)
        if any(len(units) >= LONG_DOC_UNITS for units, *_ in per_doc):
            logger.info("%s: scored %d NLI inputs in %.0f s", self.name, len(texts), time.perf_counter() - start)
        doc_facts = []
        offset = 0
        learned = self._aggregation == LEARNED
        for units, _, pairs, known, forward, backward in per_doc:
            k = int((~known).sum())
            scores = probs[offset : offset + directions * k]
            offset += directions * k
            forward[~known], backward[~known] = scores[0::directions], scores[directions - 1 :: directions]
            # Only the paired units are parsed: a long Doc's budget touches few of them.
            doc_facts.append(unit_alignment(units, pairs) if learned and self.cfg["alignment"] and len(pairs) else None)
        if reverse_k is not None and reverse_k > 0:
            self._read_reverse(per_doc, doc_facts, reverse_k)
        out = []
        for (units, _, pairs, known, forward, backward), facts in zip(per_doc, doc_facts):
            score = combine(
                forward, backward, pairs, aggregation=self._aggregation,
                pair_scorer=self._pair_scorer, facts=facts,
            )
            out.append(PairScores(
                units, pairs, forward[:, 2].copy(), backward[:, 2].copy(), score,
                probabilities=numpy.stack([forward, backward], axis=1) if learned else None,
                scorer=self._pair_scorer if learned else None, facts=facts,
            ))
        if self.rescorer is not None:
            out = self._rescore(out, doc_facts)
        return out

    def _reverse_top_k(self) -> Optional[int]:
        """How many pairs per Doc the first model reads in reverse order when it reads
        the text order of all of them first: None when it reads both orders of every
        pair at once (no rescorer, or `reverse_top_k` null), 0 with one direction."""
        if self.rescorer is None:
            return None
        if self.cfg["first_stage_directions"] == 1:
            return 0
        if self.cfg["reverse_top_k"] is None:
            return None
        return max(int(self.cfg["reverse_top_k"]), self._max_rescore_k())

    def cascade_settings(self) -> Dict[str, Any]:
        """The settings that decide which pairs the rescorer reads (`CASCADE_KEYS`)."""
        return {key: self.cfg[key] for key in CASCADE_KEYS}

    def _max_rescore_k(self) -> int:
        """The most pairs the rescorer reads in any Doc (see `rescore_k`)."""
        k = int(self.cfg["rescore_top_k"])
        return max(k, defaults.RESCORE_MAX_K) if self.cfg["rescore_top_share"] > 0 else k

    def rescore_k(self, n_pairs: int) -> int:
        """How many of a Doc's highest-ranked pairs the rescorer reads: `rescore_top_k`, more in
        a Doc of many compared pairs (`rescore_top_share` of them, at most 32)."""
        k = int(self.cfg["rescore_top_k"])
        share = math.ceil(self.cfg["rescore_top_share"] * n_pairs - 1e-9)
        return min(max(k, share), self._max_rescore_k())

    def _read_reverse(self, per_doc: list, doc_facts: List[Optional[list]], k: int) -> None:
        """Read the reverse order of each Doc's `k` pairs that rank highest on their
        text order (scored as if both orders read alike); writes their `backward`."""
        requests = []
        for (units, unit_texts, pairs, known, forward, backward), facts in zip(per_doc, doc_facts):
            ranking = combine(forward, backward, pairs, aggregation=self._aggregation,
                              pair_scorer=self._pair_scorer, facts=facts)
            top = numpy.argsort(-ranking, kind="stable")[:k]
            requests.append((unit_texts, pairs, top[~known[top]], backward))
        self._read_reverse_orders(self.model, requests)

    def _read_reverse_orders(self, model: NLIBackend, requests: List[tuple]) -> None:
        """One backend call for all Docs: for each `(unit_texts, pairs, which, backward)`,
        read the reverse order of `pairs[which]` and write it to `backward[which]`."""
        texts = [(unit_texts[j], unit_texts[i]) for unit_texts, pairs, which, _ in requests
                 for i, j in pairs[which].tolist()]
        probs = self._probabilities(model, texts)
        offset = 0
        for _, _, which, backward in requests:
            backward[which] = probs[offset : offset + len(which)]
            offset += len(which)

    @staticmethod
    def _probabilities(model: NLIBackend, texts: List[Tuple[str, str]]) -> numpy.ndarray:
        if not texts:
            return numpy.zeros((0, 3), numpy.float32)
        return stack_probabilities(model.predict(texts), len(texts))

    def _rescore(self, first: List[PairScores], doc_facts: List[Optional[list]]) -> List[PairScores]:
        """The cascade: each Doc's top `rescore_k` pairs scored again by the rescorer.
        The first stage's alignment facts are reused (they cover every paired unit)."""
        reverse_k = self.cfg["rescore_reverse_top_k"]
        at_once = reverse_k is None or reverse_k >= self._max_rescore_k()
        # The rescorer's own pair score decides, even where the first model fell back to `min`.
        aggregation = LEARNED if self._rescorer_pair_scorer is not None else self._aggregation
        learned = aggregation == LEARNED
        docs: List[_Rescored] = []
        texts = []
        for scores, facts in zip(first, doc_facts):
            top = numpy.argsort(-scores.score, kind="stable")[:self.rescore_k(len(scores.pairs))]
            top = numpy.concatenate([top, similar_pairs(scores.units, scores.pairs, top, self.cfg["rescore_similar_k"])])
            pairs = scores.pairs[top]
            if facts is None and learned and self.cfg["alignment"] and len(top):
                facts = unit_alignment(scores.units, pairs)
            unit_texts = [u.text.strip() for u in scores.units]
            for i, j in pairs.tolist():
                texts.append((unit_texts[i], unit_texts[j]))
                if at_once:
                    texts.append((unit_texts[j], unit_texts[i]))
            n = len(top)
            docs.append(_Rescored(scores, top, pairs, unit_texts, facts if learned else None,
                                  numpy.zeros((n, 3), numpy.float32), numpy.zeros((n, 3), numpy.float32),
                                  numpy.full(n, at_once)))
        step = 2 if at_once else 1
        probs = self._probabilities(self.rescorer, texts)
        offset = 0
        for doc in docs:
            block = probs[offset : offset + step * len(doc.top)]
            offset += step * len(doc.top)
            # Read one way only, a pair's score reads that direction as both.
            doc.forward[:], doc.backward[:] = block[0::step], block[step - 1 :: step]

        def rescored(doc: _Rescored) -> numpy.ndarray:
            return combine(doc.forward, doc.backward, doc.pairs, aggregation=aggregation,
                           pair_scorer=self._rescorer_pair_scorer, facts=doc.facts)

        if not at_once:
            # The reverse order of the pairs its text order ranks highest, then of any pair
            # that would be flagged without it: a finding's two directions are both read.
            for pick in (lambda doc: numpy.argsort(-rescored(doc), kind="stable")[:reverse_k],
                         lambda doc: numpy.flatnonzero(rescored(doc) >= self.threshold_for(len(doc.scores.pairs)))):
                requests = []
                for doc in docs:
                    which = pick(doc)
                    which = which[~doc.done[which]]
                    doc.done[which] = True
                    requests.append((doc.unit_texts, doc.pairs, which, doc.backward))
                self._read_reverse_orders(self.rescorer, requests)
        out = []
        for doc in docs:
            scores, top = doc.scores, doc.top
            score = numpy.zeros_like(scores.score)
            score[top] = rescored(doc)
            fwd, bwd = numpy.zeros_like(scores.forward), numpy.zeros_like(scores.backward)
            fwd[top], bwd[top] = doc.forward[:, 2], doc.backward[:, 2]
            probabilities = None
            if learned:
                probabilities = numpy.zeros((len(scores.pairs), 2, 3), numpy.float32)
                probabilities[top, 0], probabilities[top, 1] = doc.forward, doc.backward
            out.append(PairScores(
                scores.units, scores.pairs, fwd, bwd, score, rescored=top, probabilities=probabilities,
                scorer=self._rescorer_pair_scorer if learned else None, facts=doc.facts,
            ))
        return out

    def unit_pairs(self, units: Sequence[Span], scorer: Optional[_candidates.PairScorer] = None) -> numpy.ndarray:
        """The candidate pairs of units: the `candidates` strategy, else the budget rule.

        units (Sequence[Span]): The units.
        scorer (Optional[PairScorer]): For strategies that probe pairs with
            the model; None scores with this detector's model (not remembered).
        RETURNS (numpy.ndarray): int64, shape (k, 2), i < j.
        """
        if self.candidates is not None:
            if scorer is None and _candidates.needs_scorer(self.candidates):
                scorer = ProbeScores(self.model, [u.text.strip() for u in units])
            return _candidates.run_strategy(self.candidates, units, scorer=scorer)
        budget = _candidates.BudgetStrategy(
            max_pairs=self.cfg["max_all_pairs"], window=self.cfg["window"], k=defaults.LEXICAL_PARTNERS
        )
        return budget(units)

    def threshold_for(self, n_pairs: int) -> float:
        """The threshold of a Doc with `n_pairs` compared pairs: the setting when
        given; else the learned score's document threshold, which grows with the
        number of pairs (see `pair_score.DocumentThreshold`); else 0.5."""
        if self.cfg["threshold"] is None and self._rescorer_pair_scorer is not None:
            # The rescorer's threshold for every compared pair, or (`cascade_threshold`) the one
            # fitted on what this cascade reads, where its pair score has one.
            cascade = self.cascade_settings() if self.cfg["cascade_threshold"] else None
            return self._rescorer_pair_scorer.document_threshold(n_pairs, alignment=bool(self.cfg["alignment"]),
                                                                 cascade=cascade)
        if self.cfg["threshold"] is None and self._pair_scorer is not None:
            return self._pair_scorer.document_threshold(n_pairs, alignment=bool(self.cfg["alignment"]))
        return self.threshold

    def document_score(self, scores: PairScores) -> float:
        """A Doc's score from its pair scores: 1 - prod(1 - s) over its `doc_score_top_k`
        highest (the chance that one of them is a contradiction, were they independent),
        so that two Docs sharing their highest pair are told apart by the next ones; in
        [0, 1], never below the highest pair score; 0.0 without pairs."""
        return noisy_or_top(scores.score, self.cfg["doc_score_top_k"])

    def findings(self, scores: PairScores) -> List[Dict[str, Any]]:
        """The pairs at or over the Doc's threshold, as plain dicts, highest score first."""
        keep = numpy.flatnonzero(scores.score >= self.threshold_for(len(scores.pairs)))
        keep = keep[numpy.argsort(-scores.score[keep], kind="stable")]
        found = []
        for k in keep.tolist():
            i, j = scores.pairs[k].tolist()
            found.append(pair_finding(scores, k, [unit_record(scores.units[i]), unit_record(scores.units[j])]))
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
        **DEFAULT_SETTINGS,
        "candidates": None,
        "rescorer": DEFAULT_RESCORER,
        "scorer": {"@scorers": "spacy-inconsistency.contradiction_scorer.v1"},
    },
    default_score_weights={"contradiction_f": 1.0, "contradiction_p": 0.0, "contradiction_r": 0.0},
)
def make_contradiction_detector(
    nlp: Language,
    name: str,
    model: Union[NLIBackend, str],
    units_key: str,
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
) -> ContradictionDetector:
    """Create a `contradiction_detector` (see `ContradictionDetector`)."""
    require_backend(model, factory="contradiction_detector", backend="spacy-inconsistency.NLIBackend.v1")
    require_backend(rescorer, factory="contradiction_detector", backend="spacy-inconsistency.NLIBackend.v1",
                    setting="rescorer")
    return ContradictionDetector(
        nlp, name, model=model, units_key=units_key, window=window,
        max_all_pairs=max_all_pairs, threshold=threshold, aggregation=aggregation,
        speakers=speakers, alignment=alignment, pair_scorer=pair_scorer, candidates=candidates,
        rescorer=rescorer, rescore_top_k=rescore_top_k, rescore_top_share=rescore_top_share,
        rescore_similar_k=rescore_similar_k, cascade_threshold=cascade_threshold,
        first_stage_directions=first_stage_directions, reverse_top_k=reverse_top_k,
        rescore_reverse_top_k=rescore_reverse_top_k, doc_score_top_k=doc_score_top_k, scorer=scorer,
    )
