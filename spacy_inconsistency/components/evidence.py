"""`evidence_extractor`: redact-and-retry evidence extraction (seed `redact-and-retry-evidence-extraction.txt`).

The judge (any `LLMClient`: an HTTP endpoint, a local causal LM or the
offline NLI judge) is asked the paper's prompts (Appendix I). Strategies
(the paper's shorthands in brackets):

- "direct" (DP): one call; its judgement and evidence.
- "self_consistency" (S-con): `n_samples` answers at `temperature`; "yes"
  when more than half of the samples say yes (an unreadable sample is not a
  yes vote), and then the union of the evidence of the "yes" samples
  (sentences compared case- and punctuation-blind).
- "self_criticism" (S-cri, If-or-Else): the direct answer, then the review
  prompt with that answer; the reviewed answer is final (the first one is
  kept when the review cannot be read).
- "rnr" (Algorithm 1): the direct prompt on the Doc's text; while the
  answer is "yes", redact the sentences of its evidence (the remaining
  units, joined by spaces, order kept) and ask again; ŷ is the first judgement,
  Ê the union of the evidence. The loop stops at "no", at `max_retries`
  calls, when a redaction removes nothing (the same document would be asked
  again) or when every sentence is redacted.
- "rnr_uf" / "rnr_cf": RnR, then one filter call over the union (only when
  ŷ is "yes" and the union is non-empty). Unconstrained: an empty answer
  turns ŷ to "no". Constrained: an empty answer (which breaks the
  constraint) keeps the union.

Sentences are matched (redaction, evidence units) by TF-IDF cosine >=
`match_threshold` (0.8 in the paper). An answer that cannot be read counts
as "no" with no evidence (for a filter: the union is kept); it is recorded
in the trace and counted, never raised. A call that raises (the client gave
up after its retries, a prompt too long for a local model) ends that Doc's
run only: the Doc gets an error record, the others keep their results.
"""
import logging
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

import numpy
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import minibatch, registry

from ..backends.llm import LLMClient, redact_secrets
from ..backends.loading import warn_other_language
from ..backends.llm_parse import DEFAULT_PROMPTS, PLACEHOLDERS, ParsedAnswer, fill_prompt, format_sentences, parse_answer
from ..errors import Errors, Warnings
from ..extensions import EVIDENCE, EVIDENCE_ERROR, EVIDENCE_TRACE, HAS_INCONSISTENCY, UNITS_KEY, install_extensions
from ..metrics.evidence import evidence_metrics, tfidf_cosine, unique_sentences
from ..segment import Segmenter
from ..serialize import CfgSerializable

logger = logging.getLogger("spacy_inconsistency.evidence")
logger.addHandler(logging.NullHandler())

STRATEGIES = ("direct", "self_consistency", "self_criticism", "rnr", "rnr_uf", "rnr_cf")
# The paper's shorthands, for tables.
SHORTHANDS = {
    "direct": "DP", "self_consistency": "S-con", "self_criticism": "S-cri",
    "rnr": "RnR", "rnr_uf": "RnR+UF", "rnr_cf": "RnR+CF",
}
CFG_KEYS = (
    "strategy", "n_samples", "temperature", "max_retries", "match_threshold",
    "max_tokens", "seed", "prompts", "system_prompt", "units_key",
)
# Longest error message kept in an error record.
MAX_ERROR_CHARS = 1000
ERROR_CODE_RE = re.compile(r"\[([EW]\d{3})\]")


def _check_prompts(prompts: Optional[Dict[str, str]]) -> Dict[str, str]:
    merged = dict(DEFAULT_PROMPTS)
    for key, template in (prompts or {}).items():
        if key not in DEFAULT_PROMPTS:
            problem = "unknown key"
        elif not isinstance(template, str):
            problem = "not a string"
        else:
            missing = [p for p in PLACEHOLDERS[key] if "{" + p + "}" not in template]
            problem = f"missing {missing}" if missing else ""
        if problem:
            raise ValueError(Errors.E129.format(key=key, problem=problem, keys=sorted(DEFAULT_PROMPTS),
                                                placeholders=PLACEHOLDERS.get(key, ())))
        merged[key] = template
    return merged


class _Run:
    """The calls made for one Doc, recorded for the trace."""

    def __init__(self, extractor: "EvidenceExtractor") -> None:
        self.x = extractor
        self.calls: List[Dict[str, Any]] = []
        self.n_parse_errors = 0
        # The step being asked, for the error record when the call raises.
        self.step = ""

    def ask(self, step: str, prompt: str, *, need_judgement: bool = True, n: int = 1,
            temperature: float = 0.0) -> List[ParsedAnswer]:
        cfg = self.x.cfg
        messages = []
        if cfg["system_prompt"]:
            messages.append({"role": "system", "content": cfg["system_prompt"]})
        messages.append({"role": "user", "content": prompt})
        seed = cfg["seed"] if cfg["seed"] is None else int(cfg["seed"]) + len(self.calls)
        self.step = step
        answers = self.x.client.chat(messages, temperature=temperature, max_tokens=cfg["max_tokens"], n=n, seed=seed)
        parsed = [parse_answer(a, need_judgement=need_judgement) for a in answers]
        self.n_parse_errors += sum(1 for p in parsed if not p.ok)
        self.calls.append({
            "step": step, "prompt": prompt, "temperature": float(temperature), "n": int(n),
            "answers": [str(a) for a in answers], "parsed": [p.to_dict() for p in parsed],
        })
        return parsed


def _judgement(answer: ParsedAnswer) -> bool:
    return bool(answer.ok and answer.judgement)


class EvidenceExtractor(CfgSerializable, Pipe):
    """Judge a whole Doc for self-contradiction and extract the evidence sentences.

    Writes `doc._.has_inconsistency` (ŷ), `doc._.inconsistency_evidence`
    (one dict per extracted sentence: `quote` as the judge wrote it, the
    matched unit's `start_char` / `end_char` / `text` and the TF-IDF
    `similarity`; offsets are None when the quote matches no unit at the
    threshold) and the trace `doc.user_data["inconsistency_evidence_trace"]`
    (`strategy`, `client`, `judgement`, `evidence`, `calls` with every
    prompt, raw answer and parse, `n_calls`, `n_retries` (the paper's
    "#retries": the number of calls), `n_parse_errors`, `stop_reason`,
    `error`).

    A Doc whose judge raised (e.g. E120: the HTTP client gave up after its
    retries) gets `doc._.inconsistency_evidence_error`, a dict with
    `component`, `client`, `step` (the call that failed), `n_calls` (calls
    made before it), `type` (the exception class), `code` (e.g. "E120", or
    None) and `message` (secrets redacted); its `has_inconsistency` and
    `inconsistency_evidence` are None, its trace has the calls made, the
    same record as `error` and `stop_reason` "error". The other Docs of the
    batch keep their results (their error is None); W200 says how many failed.

    nlp (Language): The pipeline.
    name (str): The component name.
    client (LLMClient): The judge.
    strategy (str): One of `STRATEGIES` (see the module docstring).
    n_samples (int): Samples of self-consistency.
    temperature (float): Sampling temperature of self-consistency (all
        other calls use 0, as in the paper).
    max_retries (int): Most judgement calls of the redact-and-retry loop.
    match_threshold (float): TF-IDF cosine for two sentences to match.
    max_tokens (int): Most tokens per answer.
    seed (Optional[int]): Base sampling seed (each call adds its index).
    prompts (Optional[Dict[str, str]]): Replacements for the paper's
        prompts, keys as in `DEFAULT_PROMPTS`.
    system_prompt (Optional[str]): A system message before every prompt
        (the paper uses none).
    units_key (str): `doc.spans` key of the sentences; else the Doc's
        sentences; else the `inconsistency_segmenter` rules.
    scorer (Optional[Callable]): The scoring method.
    """

    cfg_keys = CFG_KEYS

    def __init__(
        self,
        nlp: Language,
        name: str = "evidence_extractor",
        *,
        client: LLMClient,
        strategy: str = "rnr_cf",
        n_samples: int = 5,
        temperature: float = 0.5,
        max_retries: int = 10,
        match_threshold: float = 0.8,
        max_tokens: int = 512,
        seed: Optional[int] = 0,
        prompts: Optional[Dict[str, str]] = None,
        system_prompt: Optional[str] = None,
        units_key: str = UNITS_KEY,
        scorer: Optional[Callable] = None,
    ) -> None:
        install_extensions()
        if strategy not in STRATEGIES:
            raise ValueError(Errors.E127.format(value=strategy, options=list(STRATEGIES)))
        for key, value, ok, expected in (
            ("n_samples", n_samples, n_samples >= 1, "at least 1"),
            ("temperature", temperature, temperature >= 0, "0 or more"),
            ("max_retries", max_retries, max_retries >= 1, "at least 1"),
            ("match_threshold", match_threshold, 0 < match_threshold <= 1, "in (0, 1]"),
            ("max_tokens", max_tokens, max_tokens >= 1, "at least 1"),
        ):
            if not ok:
                raise ValueError(Errors.E006.format(name=key, expected=expected, value=value))
        _check_prompts(prompts)
        self.name = name
        self.client = client
        self.scorer = scorer
        self._language_warned = False  # W143 / W144 once per component
        self.segmenter = Segmenter(units_key=units_key)
        self.cfg: Dict[str, Any] = {
            "strategy": strategy, "n_samples": n_samples, "temperature": temperature,
            "max_retries": max_retries, "match_threshold": match_threshold, "max_tokens": max_tokens,
            "seed": seed, "prompts": dict(prompts or {}), "system_prompt": system_prompt,
            "units_key": units_key,
        }

    @property
    def prompts(self) -> Dict[str, str]:
        return _check_prompts(self.cfg["prompts"])

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        for docs in minibatch(stream, size=batch_size):
            self.set_annotations(docs, self.predict(docs))
            yield from docs

    def units(self, doc: Doc) -> List[Dict[str, Any]]:
        """The Doc's sentences as `{start_char, end_char, text}` (units with no letter or digit left out)."""
        key = self.cfg["units_key"]
        if key in doc.spans:
            spans = list(doc.spans[key])
        elif len(doc) and doc.has_annotation("SENT_START"):
            spans = list(doc.sents)
        else:
            spans = self.segmenter.segment(doc)[0] if len(doc) else []
        return [
            {"start_char": s.start_char, "end_char": s.end_char, "text": s.text.strip()}
            # Every sentence the model is shown, however short ("Intro."): the
            # detectors' stricter `has_content` is about which pairs to score.
            for s in spans if any(ch.isalnum() for ch in s.text)
        ]

    def predict(self, docs: Iterable[Doc]) -> List[Dict[str, Any]]:
        """Run the strategy on each Doc (`client.max_concurrency` Docs at a time).

        docs (Iterable[Doc]): The Docs.
        RETURNS (List[Dict[str, Any]]): One trace per Doc (see the class docstring).
        """
        docs = list(docs)
        if not docs:
            return []
        # The offline NLI judge runs a shipped English-only NLI model; an LLM client has no such model.
        judge_model = getattr(self.client, "model_name", None)
        if not self._language_warned and isinstance(judge_model, str):
            self._language_warned = warn_other_language(self.name, judge_model, docs)
        jobs = [(doc.text, self.units(doc)) for doc in docs]
        workers = max(1, int(getattr(self.client, "max_concurrency", 1)))
        if workers == 1 or len(jobs) == 1:
            traces = [self.run(text, units) for text, units in jobs]
        else:
            with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
                traces = list(pool.map(lambda job: self.run(*job), jobs))
        failed = [t["error"] for t in traces if t["error"]]
        if failed:
            warnings.warn(Warnings.W200.format(
                n=len(failed), total=len(traces), client=failed[0]["client"], component=self.name,
                error=failed[0]["code"] or failed[0]["type"],
            ))
        return traces

    def run(self, text: str, units: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The strategy on one text with its units (see the module docstring)."""
        strategy = self.cfg["strategy"]
        run = _Run(self)
        stop_reason = ""
        error = None
        try:
            if not text.strip() or not units:
                judgement, evidence, stop_reason = False, [], "empty"
            elif strategy == "direct":
                (answer,) = run.ask("direct", self._direct(text))
                judgement, evidence = _judgement(answer), list(answer.evidence)
            elif strategy == "self_consistency":
                judgement, evidence = self._self_consistency(run, text)
            elif strategy == "self_criticism":
                judgement, evidence = self._self_criticism(run, text)
            else:
                judgement, evidence, stop_reason = self._redact_and_retry(run, text, units)
        except Exception as err:  # noqa: BLE001 (one Doc's failure must not lose the others)
            error = self.error_record(err, run)
            judgement, evidence, stop_reason = False, [], "error"
            logger.warning("%s: no answer for a Doc at step '%s' after %d call(s): %s",
                           self.name, error["step"], error["n_calls"], error["message"])
        # The evidence is a set: a sentence quoted twice counts once.
        evidence = self._union([], evidence) if judgement else []
        return {
            "strategy": strategy,
            "client": self._client_name(),
            "judgement": bool(judgement),
            "evidence": evidence,
            "calls": run.calls,
            "n_calls": len(run.calls),
            "n_retries": len(run.calls),
            "n_parse_errors": run.n_parse_errors,
            "stop_reason": stop_reason,
            "error": error,
        }

    def _client_name(self) -> str:
        return str(getattr(self.client, "name", type(self.client).__name__))

    def error_record(self, err: Exception, run: _Run) -> Dict[str, Any]:
        """The error record of a Doc whose run raised (see the class docstring).

        err (Exception): What the client (or a step) raised.
        run (_Run): The Doc's calls so far.
        RETURNS (Dict[str, Any]): `component`, `client`, `step`, `n_calls`,
            `type`, `code` and the redacted `message`.
        """
        message = str(err) or repr(err)
        redact = getattr(self.client, "redact", None)
        # The client knows its own key; the patterns catch the rest.
        message = redact(message) if callable(redact) else redact_secrets(message)
        code = ERROR_CODE_RE.search(message)
        return {
            "component": self.name,
            "client": self._client_name(),
            "step": run.step,
            "n_calls": len(run.calls),
            "type": type(err).__name__,
            "code": code.group(1) if code else None,
            "message": message[:MAX_ERROR_CHARS],
        }

    def _direct(self, text: str) -> str:
        return fill_prompt(self.prompts["direct"], document=text)

    @staticmethod
    def _union(evidence: List[str], more: Iterable[str]) -> List[str]:
        """`evidence` plus the sentences of `more` not yet in it, compared case- and punctuation-blind.

        Not by TF-IDF: a sentence and its negation ("The door is (not)
        open.") have a TF-IDF cosine over 0.8, and both must be kept.
        """
        return unique_sentences(list(evidence) + list(more))

    def _self_consistency(self, run: _Run, text: str) -> Any:
        n = self.cfg["n_samples"]
        answers = run.ask("sample", self._direct(text), n=n, temperature=self.cfg["temperature"])
        yes = [a for a in answers if _judgement(a)]
        if len(yes) * 2 <= n:
            return False, []
        evidence: List[str] = []
        for answer in yes:
            evidence = self._union(evidence, answer.evidence)
        return True, evidence

    def _self_criticism(self, run: _Run, text: str) -> Any:
        (first,) = run.ask("direct", self._direct(text))
        prompt = fill_prompt(self.prompts["self_criticism"], document=text,
                             previous_answer=run.calls[-1]["answers"][0].strip())
        (review,) = run.ask("review", prompt)
        final = review if review.ok else first
        return _judgement(final), list(final.evidence)

    def _redact_and_retry(self, run: _Run, text: str, units: List[Dict[str, Any]]) -> Any:
        threshold = self.cfg["match_threshold"]
        remaining = [u["text"] for u in units]
        # x(1) = x: the first call is exactly the direct prompt (Algorithm 1, line 3).
        (answer,) = run.ask("judge", self._direct(text))
        first = _judgement(answer)
        evidence: List[str] = []
        stop_reason = "no"
        while _judgement(answer):
            evidence = self._union(evidence, answer.evidence)
            if len(run.calls) >= self.cfg["max_retries"]:
                stop_reason = "max_retries"
                break
            if answer.evidence:
                sim = tfidf_cosine(remaining, answer.evidence)
                kept = [s for s, row in zip(remaining, sim) if row.max() < threshold]
            else:
                kept = remaining
            if len(kept) == len(remaining):
                stop_reason = "nothing_redacted"
                break
            if not kept:
                stop_reason = "all_redacted"
                break
            remaining = kept
            (answer,) = run.ask("retry", self._direct(" ".join(remaining)))
        if not answer.ok:
            stop_reason = "unreadable"
        strategy = self.cfg["strategy"]
        if strategy in ("rnr_uf", "rnr_cf") and first and evidence:
            constrained = strategy == "rnr_cf"
            key = "filter_constrained" if constrained else "filter_unconstrained"
            prompt = fill_prompt(self.prompts[key], sentences=format_sentences(evidence))
            (filtered,) = run.ask("filter", prompt, need_judgement=False)
            if filtered.ok and filtered.evidence:
                evidence = list(filtered.evidence)
            elif filtered.ok and not constrained:
                first, evidence = False, []
        return first, evidence, stop_reason

    def evidence_records(self, units: List[Dict[str, Any]], quotes: List[str]) -> List[Dict[str, Any]]:
        """Match each quote to its most similar unit (TF-IDF cosine >= `match_threshold`)."""
        records = []
        sim = tfidf_cosine(quotes, [u["text"] for u in units])
        for q, quote in enumerate(quotes):
            best = int(numpy.argmax(sim[q])) if units else -1
            score = float(sim[q, best]) if units else 0.0
            matched = best >= 0 and score >= self.cfg["match_threshold"]
            records.append({
                "quote": quote,
                "start_char": int(units[best]["start_char"]) if matched else None,
                "end_char": int(units[best]["end_char"]) if matched else None,
                "text": units[best]["text"] if matched else "",
                "similarity": score,
            })
        return records

    def set_annotations(self, docs: Iterable[Doc], traces: List[Dict[str, Any]]) -> None:
        """Write each trace's judgement, evidence (or error record) and the trace to its Doc.

        docs (Iterable[Doc]): The Docs.
        traces (List[Dict[str, Any]]): The traces of `predict`.
        """
        for doc, trace in zip(docs, traces):
            error = trace.get("error")
            setattr(doc._, EVIDENCE_ERROR, error)
            if error:
                # Not judged, which differs from judged consistent.
                setattr(doc._, HAS_INCONSISTENCY, None)
                setattr(doc._, EVIDENCE, None)
            else:
                setattr(doc._, HAS_INCONSISTENCY, trace["judgement"])
                setattr(doc._, EVIDENCE, self.evidence_records(self.units(doc), trace["evidence"]))
            doc.user_data[EVIDENCE_TRACE] = trace

def evidence_spans(doc: Doc) -> List[Span]:
    """The evidence of `doc._.inconsistency_evidence` that matched a unit, as Spans."""
    spans = []
    for item in getattr(doc._, EVIDENCE) or []:
        if item.get("start_char") is not None:
            spans.append(doc.char_span(item["start_char"], item["end_char"], alignment_mode="expand"))
    return spans


def score_evidence(examples: Iterable[Example], *, threshold: float = 0.8, **kwargs: Any) -> Dict[str, Optional[float]]:
    """The paper's metrics for `evidence_extractor` output.

    The reference Docs carry the gold label in `doc._.has_inconsistency`
    and the gold evidence sentences as the `quote`s (or `text`s) of
    `doc._.inconsistency_evidence`; references without a label are skipped.

    examples (Iterable[Example]): The examples.
    threshold (float): TF-IDF cosine for a match.
    RETURNS (Dict[str, Optional[float]]): `evidence_` + accuracy, precision,
        recall, f1, ehr, ehrc, epr, eprc, err, errc (None when undefined).
    """
    gold_labels, gold_evidence, pred_labels, pred_evidence = [], [], [], []
    for eg in examples:
        label = getattr(eg.reference._, HAS_INCONSISTENCY)
        if label is None:
            continue
        gold_labels.append(bool(label))
        gold_evidence.append([e.get("quote") or e.get("text", "") for e in getattr(eg.reference._, EVIDENCE) or []])
        pred_labels.append(bool(getattr(eg.predicted._, HAS_INCONSISTENCY)))
        pred_evidence.append([e["quote"] for e in getattr(eg.predicted._, EVIDENCE) or []])
    keys = ("accuracy", "precision", "recall", "f1", "EHR", "EHRC", "EPR", "EPRC", "ERR", "ERRC")
    if not gold_labels:
        return {f"evidence_{k.lower()}": None for k in keys}
    metrics = evidence_metrics(gold_labels, gold_evidence, pred_labels, pred_evidence, threshold=threshold)
    return {f"evidence_{k.lower()}": (None if numpy.isnan(metrics[k]) else float(metrics[k])) for k in keys}


@registry.scorers("spacy-inconsistency.evidence_scorer.v1")
def make_evidence_scorer() -> Callable[..., Dict[str, Optional[float]]]:
    return score_evidence


@Language.factory(
    "evidence_extractor",
    assigns=[f"doc._.{HAS_INCONSISTENCY}", f"doc._.{EVIDENCE}", f"doc._.{EVIDENCE_ERROR}"],
    default_config={
        "client": {"@misc": "spacy-inconsistency.NLIJudge.v1"},
        "strategy": "rnr_cf",
        "n_samples": 5,
        "temperature": 0.5,
        "max_retries": 10,
        "match_threshold": 0.8,
        "max_tokens": 512,
        "seed": 0,
        "prompts": None,
        "system_prompt": None,
        "units_key": UNITS_KEY,
        "scorer": {"@scorers": "spacy-inconsistency.evidence_scorer.v1"},
    },
    default_score_weights={
        "evidence_ehrc": 0.5, "evidence_eprc": 0.5, "evidence_accuracy": None, "evidence_precision": None,
        "evidence_recall": None, "evidence_f1": None, "evidence_ehr": None, "evidence_epr": None,
        "evidence_err": None, "evidence_errc": None,
    },
)
def make_evidence_extractor(
    nlp: Language,
    name: str,
    client: LLMClient,
    strategy: str,
    n_samples: int,
    temperature: float,
    max_retries: int,
    match_threshold: float,
    max_tokens: int,
    seed: Optional[int],
    prompts: Optional[Dict[str, str]],
    system_prompt: Optional[str],
    units_key: str,
    scorer: Optional[Callable],
) -> EvidenceExtractor:
    """Create an `evidence_extractor` (see `EvidenceExtractor`)."""
    return EvidenceExtractor(
        nlp, name, client=client, strategy=strategy, n_samples=n_samples, temperature=temperature,
        max_retries=max_retries, match_threshold=match_threshold, max_tokens=max_tokens, seed=seed,
        prompts=prompts, system_prompt=system_prompt, units_key=units_key, scorer=scorer,
    )
