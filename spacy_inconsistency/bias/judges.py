"""Validity judges: a backend that says whether premises support a conclusion.

Every judge has a `name` and `judge(arguments) -> List[Verdict]`; a verdict's
`valid` is None when the judge gave no readable answer (an LLM that refused
or rambled), which the scores leave out and count, as the paper does.

- `NLIValidityJudge`: an NLI cross-encoder; valid = entailment (the premises,
  joined into one text, entail the conclusion).
- `PipelineValidityJudge`: any spaCy pipeline that sets `doc.cats` on pair
  Docs (`spacy_inconsistency.pairs.make_pair_doc`), e.g. one with
  `claim_relation_classifier`; a label map says which categories mean valid.
- `LLMValidityJudge`: any chat client with `name` and `chat(messages, *,
  temperature, max_tokens, n, seed) -> List[str]`, prompted with the paper's
  instructions (Tables 21-24), optionally with the paper's few-shot template.
"""
import random
import re
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spacy.util import registry

from ..errors import Errors, Warnings
from .dataset import (
    GENDERS, LEANINGS, VARIATIONS, Argument, conclusion_text, language_config,
    premise_text, _read_tsv,
)


@dataclass
class Verdict:
    """A judge's answer for one argument.

    valid (Optional[bool]): Judged valid / invalid; None when unreadable.
    score (Optional[float]): The judge's confidence that the argument is valid, if it has one.
    label (Optional[str]): The label the judge chose (NLI label, category, parsed word).
    raw (Optional[str]): The raw answer (LLM text), for inspection.
    error (Optional[str]): Why the judge gave no answer (label "error", valid None).
    """

    valid: Optional[bool]
    score: Optional[float] = None
    label: Optional[str] = None
    raw: Optional[str] = None
    error: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def argument_pair(argument: Argument) -> Tuple[str, str]:
    """(premises as one text, conclusion): the input of pair-based judges."""
    return premise_text(argument), conclusion_text(argument)


class NLIValidityJudge:
    """Valid = the NLI model's top label for (premises, conclusion) is entailment.

    backend (Optional[NLIBackend]): A loaded backend; built from `model` when None.
    model (str): NLI model: "default" (embedded), a local directory or a hub id.
    device (str): "auto", "cpu", "cuda" or "cuda:N".
    threshold (Optional[float]): When set, valid = P(entailment) >= threshold
        instead of entailment being the top label.
    max_batch_size (int): Most pairs in one forward pass.
    """

    def __init__(
        self,
        backend: Any = None,
        *,
        model: str = "default",
        device: str = "auto",
        threshold: Optional[float] = None,
        max_batch_size: int = 64,
    ) -> None:
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(Errors.E006.format(name="threshold", expected="in [0, 1] or None", value=threshold))
        if backend is None:
            from ..backends.nli import NLIBackend

            backend = NLIBackend(model, device=device, max_batch_size=max_batch_size)
        from ..backends.nli import ENTAILMENT

        if ENTAILMENT not in backend.label_index:
            raise ValueError(Errors.E003.format(
                name=backend.name, label=ENTAILMENT, labels=list(backend.labels),
                component="NLIValidityJudge",
            ))
        self.backend = backend
        self.threshold = threshold
        self.name = f"nli({backend.name})"
        self._entail_col = backend.label_index[ENTAILMENT]
        self._col_label = {col: label for label, col in backend.label_index.items()}

    def judge(self, arguments: Sequence[Argument]) -> List[Verdict]:
        """Judge each argument.

        arguments (Sequence[Argument]): The arguments.
        RETURNS (List[Verdict]): One verdict each; score = P(entailment).
        """
        if not arguments:
            return []
        probs = self.backend.predict_proba([argument_pair(a) for a in arguments])
        out = []
        for row in probs:
            top = int(row.argmax())
            p_entail = float(row[self._entail_col])
            valid = top == self._entail_col if self.threshold is None else p_entail >= self.threshold
            out.append(Verdict(valid=bool(valid), score=p_entail, label=self._col_label[top]))
        return out


class PipelineValidityJudge:
    """Valid according to the top category a spaCy pipeline puts in `doc.cats`.

    The argument becomes a pair Doc (side A: the premises, side B: the
    conclusion) made with `make_pair_doc`; the pipeline runs on it and its top
    category is mapped through `label_map`. A top category missing from the
    map gives a None verdict (counted, with a warning).

    nlp (Language): A pipeline whose components set `doc.cats` on pair Docs.
    label_map (Dict[str, bool]): Category -> valid (True) / invalid (False).
    batch_size (int): Docs per `nlp.pipe` batch.
    name (Optional[str]): Name in reports; default "pipeline(<component names>)".
    """

    def __init__(
        self,
        nlp: Any,
        label_map: Dict[str, bool],
        *,
        batch_size: int = 32,
        name: Optional[str] = None,
    ) -> None:
        if (
            not isinstance(label_map, dict) or not label_map
            or not all(isinstance(v, bool) for v in label_map.values())
            or set(label_map.values()) != {True, False}
        ):
            raise ValueError(Errors.E169.format(label_map=label_map))
        self.nlp = nlp
        self.label_map = dict(label_map)
        self.batch_size = batch_size
        self.name = name or f"pipeline({','.join(nlp.pipe_names)})"

    def judge(self, arguments: Sequence[Argument]) -> List[Verdict]:
        """Judge each argument.

        arguments (Sequence[Argument]): The arguments.
        RETURNS (List[Verdict]): One verdict each; score = summed probability
            of the categories mapped to valid.
        """
        from ..pairs import make_pair_docs

        docs = make_pair_docs(self.nlp, (argument_pair(a) for a in arguments))
        out: List[Verdict] = []
        unmapped: List[str] = []
        for doc in self.nlp.pipe(docs, batch_size=self.batch_size):
            if not doc.cats:
                raise ValueError(Errors.E170.format(names=self.nlp.pipe_names))
            top = max(doc.cats, key=doc.cats.__getitem__)
            score = float(sum(v for k, v in doc.cats.items() if self.label_map.get(k) is True))
            valid = self.label_map.get(top)
            if valid is None:
                unmapped.append(top)
            out.append(Verdict(valid=valid, score=score, label=top))
        if unmapped:
            warnings.warn(Warnings.W132.format(
                n=len(unmapped), total=len(out), labels=sorted(self.label_map), label=unmapped[0],
            ))
        return out


# The paper's few-shot template (Appendix G); the German wording is the one of
# the authors' code (github.com/retoj/llms_partisan_inference, src/helpers.py),
# which the paper does not print.
FEW_SHOT_TEMPLATE = {
    "en": "{instruction}. Here's a couple of examples to help you understand what you should do: {examples} Now, {instruction_lower}",
    "de": "{instruction}. Hier sind einige Beispiele, die Dir dabei helfen, zu verstehen, was Du machen sollst: {examples} Jetzt bist Du dran: {instruction_lower}",
}
EXAMPLE_LABELS = {True: "Valid", False: "Invalid"}
INSTRUCTION_IDS = ("1", "3-dedform-onlyval", "4-prco-onlyval")


def instruction(lang: str, kind: str, instruction_id: str = "1") -> str:
    """The paper's instruction (Tables 21-24) for a language and kind of inference.

    lang (str): "en" or "de".
    kind (str): "formal" or "material".
    instruction_id (str): "1", "3-dedform-onlyval" or "4-prco-onlyval".
    RETURNS (str): The instruction text (with its `**valid**` markers).
    """
    name = language_config(lang)["instructions"][kind]
    table = {r["Instruction-ID"]: r["Instruction"] for r in _read_tsv(name)}
    if instruction_id not in table:
        raise ValueError(Errors.E171.format(value=instruction_id, lang=lang, kind=kind, options=", ".join(table)))
    return table[instruction_id].strip()


def build_prompt(
    argument: Argument,
    *,
    instruction_id: str = "1",
    examples: Sequence[Argument] = (),
) -> str:
    """The user message for one argument: "<instruction>: <argument text>".

    With examples, the paper's few-shot template: the instruction, the
    examples as "<argument>: Valid;" / "<argument>: Invalid;", then the
    instruction again and the argument.

    argument (Argument): The argument to judge.
    instruction_id (str): Which instruction of Tables 21-24.
    examples (Sequence[Argument]): Few-shot examples (same language and kind).
    RETURNS (str): The prompt.
    """
    text = instruction(argument.language, argument.kind, instruction_id)
    if examples:
        shots = " ".join(f"{e.text}: {EXAMPLE_LABELS[e.valid]};" for e in examples)
        lower = text[:1].lower() + text[1:] if argument.language == "en" else text
        text = FEW_SHOT_TEMPLATE[argument.language].format(
            instruction=text, examples=shots, instruction_lower=lower,
        )
    return f"{text}: {argument.text}"


_BOLD = re.compile(r"\*\*\s*(in|un)?\s*(valid|gültig)\s*\*\*", re.IGNORECASE)
_NEGATED = r"(?:not|nicht|kein(?:e|en)?)\s+(?:[\w-]+\s+){0,2}?(?:valid|gültig)"
_WORDS = re.compile(
    r"(?P<neg>\b" + _NEGATED + r"\b)|(?P<inv>\b(?:invalid|ungültig)\b)|(?P<val>\b(?:valid|gültig)\b)",
    re.IGNORECASE,
)
# "either **valid** or **invalid**": the task repeated, not an answer.
_ECHO = re.compile(
    r"(\*\*\s*)?\b(?:in|un)?(?:valid|gültig)\b(\s*\*\*)?\s+(?:or|oder)\s+"
    r"(\*\*\s*)?\b(?:in|un)?(?:valid|gültig)\b(\s*\*\*)?",
    re.IGNORECASE,
)


def parse_validity(answer: Optional[str]) -> Optional[bool]:
    """Read an LLM answer as valid (True), invalid (False) or unreadable (None).

    The instructions ask the model to end with **valid** / **invalid**
    (**gültig** / **ungültig**): the last such bold marker decides. Without
    one, the last plain mention decides ("not valid", "nicht gültig" and
    "invalid" count as invalid). "valid or invalid" (the task repeated) is
    ignored; an answer with nothing else (a refusal, say) is unreadable.

    answer (Optional[str]): The model's text.
    RETURNS (Optional[bool]): The verdict.
    """
    if not answer or not answer.strip():
        return None
    text = _ECHO.sub(" ", answer)
    bold = list(_BOLD.finditer(text))
    if bold:
        return bold[-1].group(1) is None
    matches = list(_WORDS.finditer(text))
    if not matches:
        return None
    return matches[-1].lastgroup == "val"


def few_shot_examples(
    arguments: Sequence[Argument],
    *,
    kind: str,
    language: str,
    n: int = 8,
    seed: int = 0,
) -> List[Argument]:
    """Pick the paper's balanced few-shot examples (Appendix G) for one kind.

    8 shots: 4 valid / 4 invalid, each 2 female / 2 male, each 1 left / 1
    right; the four left-leaning ones first, then the right-leaning ones (the
    paper's order). 32 shots: the same cells x
    the four variations, in random order.

    arguments (Sequence[Argument]): Pool to draw from.
    kind (str): "formal" or "material".
    language (str): "en" or "de".
    n (int): 8 or 32.
    seed (int): Random seed of the draw.
    RETURNS (List[Argument]): The examples (remove them from the test set).
    """
    if n not in (8, 32):
        raise ValueError(Errors.E006.format(name="n", expected="8 or 32", value=n))
    rng = random.Random(seed)
    pool = [a for a in arguments if a.kind == kind and a.language == language]
    chosen: List[Argument] = []
    for valid in (True, False):
        for gender in GENDERS:
            for leaning in LEANINGS:
                variations = VARIATIONS if n == 32 else (None,)
                for variation in variations:
                    cell = [
                        a for a in pool
                        if a.valid == valid and a.gender == gender and a.leaning == leaning
                        and (variation is None or a.variation == variation)
                    ]
                    if cell:
                        chosen.append(rng.choice(cell))
    if n == 32:
        rng.shuffle(chosen)
    else:
        # "We present the left leaning examples followed by the right leaning examples."
        chosen.sort(key=lambda a: LEANINGS.index(a.leaning))
    return chosen


class LLMValidityJudge:
    """Valid according to an LLM prompted with the paper's instructions.

    client (Any): Has `name` and `chat(messages, *, temperature, max_tokens,
        n, seed) -> List[str]` (e.g. the clients in `backends/llm.py`).
    instruction_id (str): Instruction of Tables 21-24 ("1", "3-dedform-onlyval",
        "4-prco-onlyval"); formal and material arguments get their own table.
    examples (Optional[Sequence[Argument]]): Few-shot examples; those of the
        argument's language and kind are put in its prompt.
    temperature (float): Sampling temperature (0 = greedy).
    max_tokens (int): Longest answer.
    seed (Optional[int]): Sampling seed passed to the client.
    """

    def __init__(
        self,
        client: Any,
        *,
        instruction_id: str = "1",
        examples: Optional[Sequence[Argument]] = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: Optional[int] = None,
    ) -> None:
        if not callable(getattr(client, "chat", None)) or not isinstance(getattr(client, "name", None), str):
            raise TypeError(Errors.E173.format(client=client))
        if instruction_id not in INSTRUCTION_IDS:
            raise ValueError(Errors.E171.format(value=instruction_id, lang="any", kind="any", options=", ".join(INSTRUCTION_IDS)))
        self.client = client
        self.instruction_id = instruction_id
        self.examples = list(examples or [])
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        shots = f", {len(self.examples)} shots" if self.examples else ""
        self.name = f"llm({client.name}, instruction {instruction_id}{shots})"
        self.n_unparseable = 0
        self.n_failed = 0

    def prompt(self, argument: Argument) -> str:
        """The prompt sent for one argument."""
        examples = [
            e for e in self.examples if e.language == argument.language and e.kind == argument.kind
        ]
        return build_prompt(argument, instruction_id=self.instruction_id, examples=examples)

    def judge(self, arguments: Sequence[Argument]) -> List[Verdict]:
        """Judge each argument (one chat call each).

        A call that fails for good (the client's retries spent) gives that
        argument a verdict with label "error" and `error` set, and the others
        are still judged (warning W201); like unreadable answers, it is left
        out of the bias scores.

        arguments (Sequence[Argument]): The arguments.
        RETURNS (List[Verdict]): One verdict each; `raw` holds the answer.
        """
        out = []
        unreadable = 0
        failed: List[str] = []
        for argument in arguments:
            try:
                answers = self.client.chat(
                    [{"role": "user", "content": self.prompt(argument)}],
                    temperature=self.temperature, max_tokens=self.max_tokens, n=1, seed=self.seed,
                )
            except Exception as err:  # noqa: BLE001 - one failed call must not lose the others' verdicts
                # The clients redact secrets from their own messages.
                message = f"{type(err).__name__}: {err}"
                failed.append(message)
                out.append(Verdict(valid=None, label="error", error=message))
                continue
            if not isinstance(answers, list) or len(answers) != 1:
                raise ValueError(Errors.E174.format(n=len(answers) if isinstance(answers, list) else answers, expected=1))
            valid = parse_validity(answers[0])
            unreadable += valid is None
            label = None if valid is None else ("valid" if valid else "invalid")
            out.append(Verdict(valid=valid, label=label, raw=answers[0]))
        self.n_unparseable += unreadable
        self.n_failed += len(failed)
        if unreadable:
            warnings.warn(Warnings.W130.format(n=unreadable, total=len(out), judge=self.name))
        if failed:
            warnings.warn(Warnings.W201.format(n=len(failed), total=len(out), judge=self.name, error=failed[0][:300]))
        return out


@registry.misc("spacy-inconsistency.NLIValidityJudge.v1")
def make_nli_validity_judge(
    model: str = "default",
    device: str = "auto",
    threshold: Optional[float] = None,
    max_batch_size: int = 64,
) -> NLIValidityJudge:
    """An NLI validity judge (see `NLIValidityJudge`)."""
    return NLIValidityJudge(model=model, device=device, threshold=threshold, max_batch_size=max_batch_size)


@registry.misc("spacy-inconsistency.PipelineValidityJudge.v1")
def make_pipeline_validity_judge(
    pipeline: str,
    label_map: Dict[str, bool],
    batch_size: int = 32,
) -> PipelineValidityJudge:
    """A validity judge from a saved spaCy pipeline (see `PipelineValidityJudge`).

    pipeline (str): Path or package name for `spacy.load`.
    label_map (Dict[str, bool]): Category -> valid / invalid.
    batch_size (int): Docs per batch.
    """
    import spacy

    return PipelineValidityJudge(spacy.load(pipeline), label_map, batch_size=batch_size)


@registry.misc("spacy-inconsistency.LLMValidityJudge.v1")
def make_llm_validity_judge(
    client: Any,
    instruction_id: str = "1",
    temperature: float = 0.0,
    max_tokens: int = 512,
    seed: Optional[int] = None,
) -> LLMValidityJudge:
    """An LLM validity judge around a registered chat client (see `LLMValidityJudge`)."""
    return LLMValidityJudge(
        client, instruction_id=instruction_id, temperature=temperature,
        max_tokens=max_tokens, seed=seed,
    )
