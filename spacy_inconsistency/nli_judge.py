"""The offline NLI judge: the contradiction detector's pair scoring answering an LLM's prompts.

`NLIJudgeClient` is an `LLMClient` that needs no LLM: it splits a document
into units with the `inconsistency_segmenter` rules, scores candidate pairs
in both directions with the NLI backend and combines them as
`contradiction_detector` does (`spacy_inconsistency.pair_scoring`), then
answers the evidence-extraction prompts in their JSON format. It sits at the
pair-scoring layer, above `backends/` (which holds no spaCy code), and is
registered as `spacy-inconsistency.NLIJudge.v1`.
"""
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.util import registry

from .backends.llm import LLMClient, _check_messages, _check_sampling
from .backends.llm_parse import (
    CONSTRAINED_CLAUSE,
    MARK_DOCUMENT,
    MARK_PREVIOUS,
    MARK_SENTENCES,
    MARK_TASK,
    format_answer,
    parse_answer,
)
from .errors import Errors


def _section(text: str, marker: str, next_markers: Sequence[str] = ()) -> Optional[str]:
    """The body of a prompt section: after `marker`, up to the first of `next_markers`; None without it."""
    at = text.find(marker + "\n")
    if at == -1:
        return None
    body = text[at + len(marker) + 1:]
    ends = [body.find("\n\n" + m) for m in next_markers]
    ends = [e for e in ends if e != -1]
    return body[: min(ends)] if ends else body


class NLIJudgeClient(LLMClient):
    """An offline stand-in for an LLM: answers the paper's prompts with NLI contradiction scores.

    It reads the prompt kind from the section markers of the paper's prompts
    (custom prompts must keep them) and answers in the prompts' JSON format:

    - judgement prompt ("### document"): the document is split into
      sentences (`inconsistency_segmenter` rules); candidate pairs (all
      pairs up to `max_all_pairs`, else a `window`) are scored in both
      directions by the NLI backend and combined as in
      `contradiction_detector` (by default the learned pair score). "yes" with the two sentences of the best
      pair when its score is at least the threshold, else "no" and []. At
      temperature > 0 each of the `n` answers draws its pair among the
      pairs over the threshold with probability softmax(score / temperature)
      (seeded), which is what gives self-consistency a union to take.
    - filter prompts ("### potentially inconsistent list of sentences"): all
      pairs of the listed sentences are scored; every sentence in a pair at
      or over the threshold is kept. Unconstrained: possibly none.
      Constrained ("You must output at least 1 sentence."): the best pair
      when none reaches the threshold.
    - self-criticism ("### Previous answer"): the previous answer is kept
      when the judge agrees with it (a "yes" whose quoted sentences include
      a pair at or over the threshold; a "no" when the document has no such
      pair), otherwise the judge's own answer is given. For the judge's own
      previous answer this always keeps it, so S-cri equals DP here.

    Pair scores are cached by sentence text, so redacted retries and the
    other strategies re-use them.

    model (str): NLI model for `NLIBackend` ("default": the embedded one).
    threshold (Optional[float]): Lowest pair score that is "yes"; None: the
        learned pair score's document threshold, which grows with the number
        of pairs judged (0.5 for min/mean/max).
    aggregation (str): "learned" (both directions' NLI probabilities and
        alignment evidence, see `spacy_inconsistency.pair_score`), or "min",
        "mean" or "max" of the two directions' P(contradiction).
    window (int): Pairs per sentence when not all pairs are compared.
    max_all_pairs (int): Up to this many pairs, all pairs are compared.
    lang (str): spaCy language of the tokenizer used to split sentences.
    device (str): Device of the NLI backend.
    dtype (str): Number format of its forward passes ("auto": bfloat16 on CPUs
        with native bf16, see `NLIBackend`).
    """

    def __init__(
        self,
        model: str = "default",
        *,
        threshold: Optional[float] = None,
        aggregation: str = "learned",
        window: int = 8,
        max_all_pairs: int = 1000,
        lang: str = "en",
        device: str = "auto",
        dtype: str = "auto",
    ) -> None:
        import spacy

        from .backends.nli import CONTRADICTION, NLIBackend
        from .pair_score import find_pair_scorer
        from .pair_scoring import LEARNED, check_aggregation
        from .segment import Segmenter

        check_aggregation(aggregation)
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(Errors.E006.format(name="threshold", expected="in [0, 1] or null", value=threshold))
        self._settings = dict(threshold=threshold, aggregation=aggregation, window=window,
                              max_all_pairs=max_all_pairs, lang=lang, device=device, dtype=dtype)
        self.model_name = model
        self.name = f"nli-judge({model})"
        self.backend = NLIBackend(model, device=device, dtype=dtype, truncation="warn")
        if CONTRADICTION not in self.backend.label_index:
            raise ValueError(Errors.E003.format(name=model, label=CONTRADICTION, labels=list(self.backend.labels),
                                                component="NLIJudgeClient"))
        self.aggregation = aggregation
        self.pair_scorer = (
            find_pair_scorer(self.backend.local_dir, model_name=model) if aggregation == LEARNED else None
        )
        # None: the learned score's document threshold, by the number of pairs judged.
        self.threshold = threshold
        self.window = window
        self.max_all_pairs = max_all_pairs
        self.nlp = spacy.blank(lang)
        self.nlp.max_length = 10_000_000
        self.segmenter = Segmenter()
        # Label probabilities per (premise, hypothesis), and alignment facts per sentence.
        self._probs: Dict[Tuple[str, str], numpy.ndarray] = {}
        self._facts: Dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:
        return {"model": self.model_name, **self._settings}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        self.__init__(state.pop("model"), **state)  # type: ignore[misc]

    def sentences(self, text: str) -> List[str]:
        """Split a text into sentences as the judge sees them."""
        from .pair_scoring import has_content

        doc = self.segmenter(self.nlp.make_doc(text))
        return [u.text.strip() for u in doc.spans[self.segmenter.units_key] if has_content(u)]

    def pair_scores(self, sentences: List[str], *, all_pairs: bool = False) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """Aggregated contradiction scores of the candidate pairs of `sentences`.

        sentences (List[str]): The sentences.
        all_pairs (bool): Compare all pairs whatever their number.
        RETURNS (Tuple[numpy.ndarray, numpy.ndarray]): Pairs (k, 2) and scores (k,).
        """
        from .alignment import facts_of_texts, language_supported
        from .pair_score import stack_probabilities
        from .pair_scoring import LEARNED, candidate_pairs, combine

        limit = len(sentences) ** 2 if all_pairs else self.max_all_pairs
        pairs = candidate_pairs(len(sentences), window=self.window, max_all_pairs=limit)
        if not len(pairs):
            return pairs, numpy.zeros(0)
        wanted = []
        for i, j in pairs.tolist():
            for key in ((sentences[i], sentences[j]), (sentences[j], sentences[i])):
                if key not in self._probs:
                    wanted.append(key)
        wanted = list(dict.fromkeys(wanted))
        facts = None
        with self._lock:
            if wanted:
                probs = stack_probabilities(self.backend.predict(wanted), len(wanted))
                self._probs.update(zip(wanted, probs))
            if self.aggregation == LEARNED and language_supported(self.nlp.lang):
                new = [s for s in dict.fromkeys(sentences) if s not in self._facts]
                self._facts.update(zip(new, facts_of_texts(new)))
                facts = [self._facts[s] for s in sentences]
        forward = numpy.stack([self._probs[(sentences[i], sentences[j])] for i, j in pairs.tolist()])
        backward = numpy.stack([self._probs[(sentences[j], sentences[i])] for i, j in pairs.tolist()])
        scores = combine(forward, backward, pairs, aggregation=self.aggregation, pair_scorer=self.pair_scorer, facts=facts)
        return pairs, scores.astype(float)

    @property
    def threshold(self) -> Optional[float]:
        """The fixed threshold set, or None: the document threshold of the learned score."""
        return self._threshold

    @threshold.setter
    def threshold(self, value: Optional[float]) -> None:
        self._threshold = None if value is None else float(value)

    def threshold_for(self, n_pairs: int) -> float:
        """The threshold for `n_pairs` judged pairs: the fixed one if set, else the learned
        score's document threshold (see `ContradictionDetector.threshold_for`), else 0.5."""
        from .alignment import language_supported

        if self._threshold is not None:
            return self._threshold
        if self.pair_scorer is not None:
            return self.pair_scorer.document_threshold(n_pairs, alignment=language_supported(self.nlp.lang))
        return 0.5

    def judge(self, document: str, *, temperature: float = 0.0, rng: Optional[numpy.random.Generator] = None) -> Tuple[bool, List[str], float]:
        """Answer the direct prompt for a document.

        document (str): The document text.
        temperature (float): 0 takes the best pair; more draws a pair.
        rng (Optional[numpy.random.Generator]): For drawing.
        RETURNS (Tuple[bool, List[str], float]): Judgement, evidence and the best score.
        """
        sentences = self.sentences(document)
        pairs, scores = self.pair_scores(sentences)
        cut = self.threshold_for(len(pairs))
        if not len(scores) or scores.max() < cut:
            return False, [], float(scores.max()) if len(scores) else 0.0
        best = int(numpy.argmax(scores))
        if temperature > 0:
            over = numpy.flatnonzero(scores >= cut)
            weights = numpy.exp((scores[over] - scores[over].max()) / temperature)
            rng = rng or numpy.random.default_rng()
            best = int(rng.choice(over, p=weights / weights.sum()))
        i, j = pairs[best].tolist()
        return True, [sentences[i], sentences[j]], float(scores.max())

    def filter(self, sentences: List[str], *, constrained: bool) -> List[str]:
        """Answer a filter prompt: the listed sentences that are in a contradicting pair."""
        sentences = list(dict.fromkeys(s for s in sentences if s.strip()))
        if len(sentences) < 2:
            return sentences if constrained else []
        pairs, scores = self.pair_scores(sentences, all_pairs=True)
        cut = self.threshold_for(len(pairs))
        keep = set()
        for (i, j), s in zip(pairs.tolist(), scores.tolist()):
            if s >= cut:
                keep.update((i, j))
        if not keep and constrained:
            keep.update(pairs[int(numpy.argmax(scores))].tolist())
        return [s for k, s in enumerate(sentences) if k in keep]

    def chat(
        self,
        messages: List[Dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        n: int = 1,
        seed: Optional[int] = None,
    ) -> List[str]:
        _check_messages(messages)
        _check_sampling(temperature, max_tokens, n)
        prompt = messages[-1]["content"]
        if MARK_SENTENCES + "\n" in prompt:
            listed = parse_answer('{"evidence": ' + (_section(prompt, MARK_SENTENCES) or "[]").strip() + "}",
                                  need_judgement=False)
            kept = self.filter(listed.evidence, constrained=CONSTRAINED_CLAUSE in prompt)
            return [format_answer(None, kept)] * n
        document = _section(prompt, MARK_DOCUMENT)
        if document is None:
            raise ValueError(Errors.E126.format(markers=[MARK_DOCUMENT, MARK_SENTENCES, MARK_PREVIOUS]))
        if MARK_PREVIOUS + "\n" in prompt:
            previous = parse_answer(_section(prompt, MARK_PREVIOUS, [MARK_DOCUMENT, MARK_TASK]) or "")
            judgement, evidence, _ = self.judge(document)
            if previous.ok and previous.judgement is not None:
                if previous.judgement and len(previous.evidence) >= 2:
                    quoted = self.filter(previous.evidence, constrained=False)
                    if quoted:
                        return [format_answer(True, previous.evidence)] * n
                elif not previous.judgement and not judgement:
                    return [format_answer(False, [])] * n
            return [format_answer(judgement, evidence)] * n
        if temperature <= 0:
            judgement, evidence, _ = self.judge(document)
            return [format_answer(judgement, evidence)] * n
        rng = numpy.random.default_rng(seed)
        answers = []
        for _ in range(n):
            judgement, evidence, _ = self.judge(document, temperature=temperature, rng=rng)
            answers.append(format_answer(judgement, evidence))
        return answers


@registry.misc("spacy-inconsistency.NLIJudge.v1")
def make_nli_judge(
    model: str = "default",
    threshold: Optional[float] = None,
    aggregation: str = "learned",
    window: int = 8,
    max_all_pairs: int = 1000,
    lang: str = "en",
    device: str = "auto",
) -> NLIJudgeClient:
    """An `NLIJudgeClient`: the offline judge (see the class for the settings)."""
    return NLIJudgeClient(model, threshold=threshold, aggregation=aggregation, window=window,
                          max_all_pairs=max_all_pairs, lang=lang, device=device)
