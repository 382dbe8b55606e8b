"""ClaimDiff (strengthen / weaken) as pair Docs with rationale spans, and DocBins."""
import json
import random
import warnings
from pathlib import Path
from typing import Any, Dict, List, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin

from ..errors import Errors, Warnings
from ..pairs import make_pair_doc

TASKS = {"S": ("strength", "STRENGTHEN"), "W": ("weak", "WEAKEN")}
OTHER = "OTHER"
# The span group claim_relation_classifier trains on and writes (its RATIONALE_KEY);
# not imported from there so that reading data registers no component.
RATIONALE_KEY = "claim_relation_rationale"


def claimdiff_file(data_dir: Union[str, Path], task: str, split: str) -> Path:
    """The path of one ClaimDiff file.

    data_dir (Union[str, Path]): Folder of the ClaimDiff JSON files.
    task (str): "S" or "W".
    split (str): "train" or "test".
    RETURNS (Path): e.g. ClaimDiff-strength-train.json.
    """
    if task not in TASKS:
        raise ValueError(Errors.E006.format(name="task", expected="'S' or 'W'", value=task))
    path = Path(data_dir) / f"ClaimDiff-{TASKS[task][0]}-{split}.json"
    if not path.is_file():
        raise FileNotFoundError(Errors.E145.format(path=path))
    return path


def read_claimdiff(path: Union[str, Path]) -> List[Dict[str, Any]]:
    """The records of one ClaimDiff file.

    path (Union[str, Path]): A ClaimDiff JSON file.
    RETURNS (List[Dict[str, Any]]): Its `data` records.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
        for r in data:
            r["claim_a"], r["claim_b"], r["relation"], r["rationale"]  # noqa: B018
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(Errors.E152.format(path=path, detail=repr(err))) from err
    return data


def claimdiff_docs(nlp: Language, path: Union[str, Path], *, task: str) -> List[Doc]:
    """Pair Docs (claim A, claim B) with the binary relation and rationale spans.

    Each rationale phrase is located in claim A (first occurrence); phrases
    not found are reported with W120, never silently dropped.

    nlp (Language): Pipeline whose tokenizer is used.
    path (Union[str, Path]): A ClaimDiff JSON file.
    task (str): "S" (STRENGTHEN vs OTHER) or "W" (WEAKEN vs OTHER).
    RETURNS (List[Doc]): Docs with cats and doc.spans[RATIONALE_KEY].
    """
    positive = TASKS[task][1]
    docs = []
    missing = total = 0
    for r in read_claimdiff(path):
        doc = make_pair_doc(nlp, r["claim_a"], r["claim_b"])
        doc.cats = {positive: float(r["relation"] == 1), OTHER: float(r["relation"] != 1)}
        a = doc.spans["inconsistency_pair"][0]
        spans = []
        for phrase in r["rationale"] or []:
            total += 1
            at = r["claim_a"].find(phrase.strip())
            if not phrase.strip() or at < 0:
                missing += 1
                continue
            start = a.start_char + at
            span = doc.char_span(start, start + len(phrase.strip()), alignment_mode="expand")
            spans.append(span)
        doc.spans[RATIONALE_KEY] = spans
        doc.user_data["pair_id"] = r.get("pair_id", "")
        doc.user_data["topic"] = r.get("topic", "")
        docs.append(doc)
    if missing:
        warnings.warn(Warnings.W120.format(n=missing, total=total, path=path))
    return docs


def convert_claimdiff(
    data_dir: Union[str, Path],
    output_dir: Union[str, Path],
    *,
    task: str,
    dev_fraction: float = 0.3,
    seed: int = 0,
    lang: str = "en",
) -> Dict[str, int]:
    """Write train.spacy, dev.spacy (30% of the training issues, as in the paper) and test.spacy.

    data_dir (Union[str, Path]): Folder of the ClaimDiff JSON files.
    output_dir (Union[str, Path]): Where to write.
    task (str): "S" or "W".
    dev_fraction (float): Share of training topics held out as dev.
    seed (int): Seed of the topic draw.
    lang (str): spaCy language of the tokenizer.
    RETURNS (Dict[str, int]): Docs per file.
    """
    import spacy

    nlp = spacy.blank(lang)
    train = claimdiff_docs(nlp, claimdiff_file(data_dir, task, "train"), task=task)
    test = claimdiff_docs(nlp, claimdiff_file(data_dir, task, "test"), task=task)
    topics = sorted({d.user_data["topic"] for d in train})
    dev_topics = set(random.Random(seed).sample(topics, round(dev_fraction * len(topics))))
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = {
        "train.spacy": [d for d in train if d.user_data["topic"] not in dev_topics],
        "dev.spacy": [d for d in train if d.user_data["topic"] in dev_topics],
        "test.spacy": test,
    }
    for name, docs in parts.items():
        DocBin(docs=docs, store_user_data=True).to_disk(out / name)
    return {name: len(docs) for name, docs in parts.items()}
