"""ContraDoc (Li et al., 2024) and ContraDocPaired (redact-and-retry paper, Appendix D).

A record is a plain dict: `id`, `text`, `label` (True = self-contradictory),
`evidence` (list of gold sentences; empty for consistent documents),
`doc_type`, `scope` and, for paired records, `source_ids`.
"""
import json
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Union

from ..errors import Errors, Warnings

POSITIVE = "contradictory"
NEGATIVE = "non_contradictory"
PAIR_SEPARATOR = "\n\n"


def _evidence_list(value: Any) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    return [str(v) for v in value if str(v).strip()]


def evidence_in_text(text: str, evidence: Iterable[str]) -> bool:
    """Whether every evidence sentence occurs in the text (whitespace-normalised)."""
    flat = " ".join(text.split())
    return all(" ".join(e.split()) in flat for e in evidence)


def read_contradoc(path: Union[str, Path], *, keep_missing_evidence: bool = False) -> List[Dict[str, Any]]:
    """Read a ContraDoc JSON file (e.g. `contradiction/contradoc_50.json`).

    The shared copy cuts texts at 2,000 characters, which removes the
    contradicting sentence of some documents; such documents are no longer
    known to be contradictory, so they are left out (warning W110) unless
    `keep_missing_evidence` is set.

    path (Union[str, Path]): The JSON file: a list of records with `id`,
        `text`, `label` ("contradictory" / "non_contradictory"), `evidence`.
    keep_missing_evidence (bool): Keep contradictory documents whose
        evidence is not in the text (flagged `evidence_in_text: False`).
    RETURNS (List[Dict[str, Any]]): The records, in file order.
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(Errors.E130.format(path=path, problem=f"not JSON: {err}")) from err
    if not isinstance(raw, list):
        raise ValueError(Errors.E130.format(path=path, problem=f"top level is {type(raw).__name__}"))
    records, dropped = [], []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not {"id", "text", "label"} <= set(item):
            raise ValueError(Errors.E130.format(path=path, problem=f"record {i} lacks id/text/label"))
        if item["label"] not in (POSITIVE, NEGATIVE):
            raise ValueError(Errors.E130.format(path=path, problem=f"record {i} has label {item['label']!r}"))
        label = item["label"] == POSITIVE
        evidence = _evidence_list(item.get("evidence")) if label else []
        if label and not evidence:
            raise ValueError(Errors.E130.format(path=path, problem=f"contradictory record {i} has no evidence"))
        present = evidence_in_text(item["text"], evidence)
        if label and not present and not keep_missing_evidence:
            dropped.append(str(item["id"]))
            continue
        records.append({
            "id": str(item["id"]), "text": item["text"], "label": label, "evidence": evidence,
            "doc_type": item.get("doc_type", ""), "scope": item.get("scope", ""),
            "evidence_in_text": present,
        })
    if dropped:
        n_pos = sum(1 for item in raw if item.get("label") == POSITIVE)
        warnings.warn(Warnings.W110.format(n=len(dropped), total=n_pos, path=path, ids=", ".join(dropped)))
    return records


def build_contradoc_paired(records: List[Dict[str, Any]], *, separator: str = PAIR_SEPARATOR) -> List[Dict[str, Any]]:
    """ContraDocPaired (Appendix D): pair positives longest-with-shortest; negatives unchanged.

    The positives are sorted by text length (ties by id, so the result is
    deterministic); the longest remaining is joined with the shortest
    remaining (longest first, `separator` between), which minimises the
    longest pair. floor(n/2) pairs are made; with an odd count the middle
    document is left out. Each paired record has both evidence sentences.

    records (List[Dict[str, Any]]): ContraDoc records (`read_contradoc`).
    separator (str): Text between the two documents.
    RETURNS (List[Dict[str, Any]]): The paired positives, then the negatives.
    """
    positives = sorted((r for r in records if r["label"]), key=lambda r: (len(r["text"]), r["id"]))
    negatives = [dict(r) for r in records if not r["label"]]
    paired = []
    lo, hi = 0, len(positives) - 1
    while lo < hi:
        long_, short = positives[hi], positives[lo]
        paired.append({
            "id": f"{long_['id']}+{short['id']}",
            "text": long_["text"] + separator + short["text"],
            "label": True,
            "evidence": list(long_["evidence"]) + list(short["evidence"]),
            "doc_type": "+".join(dict.fromkeys([long_.get("doc_type", ""), short.get("doc_type", "")])),
            "scope": "paired",
            "evidence_in_text": bool(long_.get("evidence_in_text", True) and short.get("evidence_in_text", True)),
            "source_ids": [long_["id"], short["id"]],
        })
        lo += 1
        hi -= 1
    return paired + negatives
