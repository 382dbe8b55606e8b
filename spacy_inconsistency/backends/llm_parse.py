"""The redact-and-retry prompts (paper, Appendix I) and robust parsing of their JSON answers.

LLMs wrap JSON in code fences, use single quotes, leave trailing commas or
add text before and after it. `parse_answer` tries, in order: strict JSON of
the first balanced ``{...}`` block, the same block as a Python literal
(single quotes, True/False), the block with trailing commas removed, and
finally a regular-expression read of the `judgement` and `evidence` fields.
It never raises on model output: a failure is reported in the result.
"""
import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# The paper's prompts (Appendix I). Placeholders: {document}, {sentences}
# (the list of flagged sentences, as a JSON list), {previous_answer}. They are
# filled by `fill_prompt` in one pass, so text inside a document is never
# read as a placeholder. The section markers ("### document", ...) are also
# how the offline NLI judge finds the document in a prompt.
TASK = (
    "The task is to determine whether the document contains any self-contradictions. "
    "If yes, provide evidence by quoting mutually contradictory sentences in a list of "
    "strings in Python. If no, then give an empty list."
)
JSON_JUDGEMENT = (
    "### JSON format\n{\n\"judgement\": \"yes\" OR \"no\",\n"
    "\"evidence\": [\"sentence1\", \"sentence2\", ..., \"sentenceN\"] OR []\n}"
)
QUOTES = (
    "Strictly follow the double quotation marks and only use single quotations within each sentence."
)
MARK_DOCUMENT = "### document"
MARK_SENTENCES = "### potentially inconsistent list of sentences"
MARK_PREVIOUS = "### Previous answer"
MARK_TASK = "### Task"
CONSTRAINED_CLAUSE = "You must output at least 1 sentence."

DIRECT_PROMPT = (
    f"{TASK} Your response must follow this JSON format (OR options are provided), and "
    f"provide absolutely nothing else. {QUOTES}\n\n{JSON_JUDGEMENT}\n\n{MARK_DOCUMENT}\n{{document}}"
)
_FILTER_HEAD = (
    "You will be given a list of sentences that are flagged to be potentially inconsistent. "
    "Your task is to identify all inconsistent sentences and output them in the following "
    "JSON format, and provide absolutely nothing else."
)
FILTER_UNCONSTRAINED_PROMPT = (
    f"{_FILTER_HEAD} {QUOTES}\n\n### JSON format\n{{\n\"evidence\": [\"sentence1\", "
    f"\"sentence2\", ..., \"sentenceN\"] OR []\n}}\n\n{MARK_SENTENCES}\n{{sentences}}"
)
FILTER_CONSTRAINED_PROMPT = (
    f"{_FILTER_HEAD} {CONSTRAINED_CLAUSE} {QUOTES}\n\n### JSON format\n{{\n\"evidence\": "
    f"[\"sentence1\", \"sentence2\", ..., \"sentenceN\"]\n}}\n\n{MARK_SENTENCES}\n{{sentences}}"
)
SELF_CRITICISM_PROMPT = (
    "Review your previous answer to the task below using the document. If you are very "
    "confident about your answer, maintain your answer. Otherwise, update your answer. "
    "Present your final answer in the following JSON format (OR options are provided), and "
    f"provide absolutely nothing else. {QUOTES}\n\n{JSON_JUDGEMENT}\n\n{MARK_TASK}\n{TASK}\n\n"
    f"{MARK_PREVIOUS}\n{{previous_answer}}\n\n{MARK_DOCUMENT}\n{{document}}"
)
DEFAULT_PROMPTS = {
    "direct": DIRECT_PROMPT,
    "filter_unconstrained": FILTER_UNCONSTRAINED_PROMPT,
    "filter_constrained": FILTER_CONSTRAINED_PROMPT,
    "self_criticism": SELF_CRITICISM_PROMPT,
}
PLACEHOLDERS = {
    "direct": ("document",),
    "filter_unconstrained": ("sentences",),
    "filter_constrained": ("sentences",),
    "self_criticism": ("previous_answer", "document"),
}
_PLACEHOLDER_RE = re.compile(r"\{(document|sentences|previous_answer)\}")


def fill_prompt(template: str, **values: str) -> str:
    """Fill the placeholders of a prompt template in one pass.

    template (str): A prompt with `{document}`, `{sentences}` or
        `{previous_answer}`; other braces (the JSON examples) are kept.
    **values (str): The values.
    RETURNS (str): The prompt.
    """
    return _PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def format_sentences(sentences: List[str]) -> str:
    """The flagged sentences as the filter prompts show them: a JSON list."""
    return json.dumps(list(sentences), ensure_ascii=False)


_FENCE_RE = re.compile(r"```(?:json|JSON|python)?\s*(.*?)```", re.DOTALL)
_JUDGEMENT_RE = re.compile(r"""["']?judge?ment["']?\s*[:=]\s*["']?\s*(yes|no|true|false)\b""", re.IGNORECASE)
_EVIDENCE_RE = re.compile(r"""["']?evidence["']?\s*[:=]\s*\[(.*?)(?:\]|$)""", re.IGNORECASE | re.DOTALL)
_STRING_RE = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'', re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",\s*([\]}])")
_YES = {"yes", "true", "y"}
_NO = {"no", "false", "n"}


@dataclass
class ParsedAnswer:
    """What could be read from one model answer.

    judgement (Optional[bool]): True for "yes", False for "no", None when
        the answer has no readable judgement.
    evidence (List[str]): The quoted sentences (stripped, empty ones dropped).
    ok (bool): Whether every field the prompt asked for was read.
    method (str): How it was read: "json", "literal", "json-repaired",
        "regex" or "" when nothing was.
    error (str): Why the answer could not be read completely ("" if ok).
    """

    judgement: Optional[bool] = None
    evidence: List[str] = field(default_factory=list)
    ok: bool = False
    method: str = ""
    error: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return {
            "judgement": self.judgement,
            "evidence": list(self.evidence),
            "ok": self.ok,
            "method": self.method,
            "error": self.error,
        }


def _balanced_block(text: str) -> Optional[str]:
    """The first balanced ``{...}`` block, respecting quoted strings."""
    start = text.find("{")
    while start != -1:
        depth = 0
        quote = ""
        escaped = False
        for i in range(start, len(text)):
            ch = text[i]
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = ""
                continue
            if ch == '"':
                quote = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def _read_judgement(value: Any) -> Optional[bool]:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        key = value.strip().strip(".").lower()
        if key in _YES:
            return True
        if key in _NO:
            return False
    return None


def _read_evidence(value: Any) -> Optional[List[str]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            if isinstance(item, str) and item.strip():
                out.append(item.strip())
            elif isinstance(item, dict):
                # Some models answer [{"sentence": "..."}].
                out.extend(str(v).strip() for v in item.values() if isinstance(v, str) and v.strip())
        return out
    return None


def _from_mapping(obj: Any, need_judgement: bool, method: str) -> Optional[ParsedAnswer]:
    if not isinstance(obj, dict):
        return None
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    judgement = _read_judgement(lowered.get("judgement", lowered.get("judgment")))
    evidence = _read_evidence(lowered.get("evidence"))
    missing = []
    if need_judgement and judgement is None:
        missing.append("judgement")
    if evidence is None or ("evidence" not in lowered and not need_judgement):
        missing.append("evidence")
    return ParsedAnswer(
        judgement=judgement,
        evidence=evidence or [],
        ok=not missing,
        method=method,
        error=f"missing or unreadable field(s): {', '.join(missing)}" if missing else "",
    )


def _unescape(text: str) -> str:
    try:
        return json.loads(f'"{text}"')
    except ValueError:
        return text.replace("\\'", "'").replace('\\"', '"')


def parse_answer(text: Optional[str], *, need_judgement: bool = True) -> ParsedAnswer:
    """Read `judgement` and `evidence` from a model answer.

    text (Optional[str]): The raw completion.
    need_judgement (bool): Whether the prompt asked for a judgement (the
        filter prompts ask only for evidence).
    RETURNS (ParsedAnswer): What was read; `ok` is False (with `error`) when
        a requested field could not be read. Never raises on bad text.
    """
    if text is None or not str(text).strip():
        return ParsedAnswer(error="empty answer")
    text = str(text)
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    best: Optional[ParsedAnswer] = None
    for candidate in candidates:
        block = _balanced_block(candidate)
        if block is None:
            continue
        attempts = (
            ("json", lambda b: json.loads(b)),
            ("literal", lambda b: ast.literal_eval(b)),
            ("json-repaired", lambda b: json.loads(_TRAILING_COMMA_RE.sub(r"\1", b))),
            ("literal", lambda b: ast.literal_eval(_TRAILING_COMMA_RE.sub(r"\1", b))),
        )
        for method, load in attempts:
            try:
                obj = load(block)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            parsed = _from_mapping(obj, need_judgement, method)
            if parsed is not None and parsed.ok:
                return parsed
            if parsed is not None and best is None:
                best = parsed
    regex = _parse_regex(text, need_judgement)
    if regex.ok or best is None:
        return regex
    return best


def _parse_regex(text: str, need_judgement: bool) -> ParsedAnswer:
    judgement_match = _JUDGEMENT_RE.search(text)
    judgement = _read_judgement(judgement_match.group(1)) if judgement_match else None
    evidence_match = _EVIDENCE_RE.search(text)
    evidence: Optional[List[str]] = None
    if evidence_match:
        evidence = []
        body = evidence_match.group(1)
        for m in _STRING_RE.finditer(body):
            if body[m.end():].lstrip().startswith(":"):
                continue  # a key of a nested object, not a quoted sentence
            raw = m.group(1) if m.group(1) is not None else m.group(2)
            value = _unescape(raw).strip()
            if value:
                evidence.append(value)
    elif need_judgement and judgement is False:
        # "no" needs no evidence list.
        evidence = []
    missing = []
    if need_judgement and judgement is None:
        missing.append("judgement")
    if evidence is None:
        missing.append("evidence")
    found = judgement is not None or evidence is not None
    return ParsedAnswer(
        judgement=judgement,
        evidence=evidence or [],
        ok=not missing,
        method="regex" if found else "",
        error=f"missing or unreadable field(s): {', '.join(missing)}" if missing else "",
    )


def format_answer(judgement: Optional[bool], evidence: List[str]) -> str:
    """Write an answer in the prompts' JSON format (used by the offline judge).

    judgement (Optional[bool]): None writes only the `evidence` field (the
        filter prompts' format).
    evidence (List[str]): The quoted sentences.
    RETURNS (str): The JSON text.
    """
    if judgement is None:
        return json.dumps({"evidence": list(evidence)}, ensure_ascii=False)
    return json.dumps(
        {"judgement": "yes" if judgement else "no", "evidence": list(evidence)}, ensure_ascii=False
    )
