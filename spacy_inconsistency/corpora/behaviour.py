"""Behavioural suites of matched documents (see `spacy_inconsistency.metrics.behaviour`).

A suite is one or more JSONL files; each line is a record

    {"id": "negation-t01", "capability": "negation",
     "contradiction": {"text": ..., "pair": [sentence, sentence]},
     "control": {"text": ..., "pair": [sentence, sentence], "kind": "different entity"},
     "domain": "sports"}

where each `pair` holds two different sentences that occur verbatim, exactly
once, in `text` (for transcripts, without the `NAME: ` prefix). The project's
own suites are in `tests/behaviour/` (`test_*.jsonl`, reported; `dev_*.jsonl`,
used for fitting and choosing settings).
"""
import json
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from ..errors import Errors

CharSpan = Tuple[int, int]


def gold_spans(text: str, pair: List[str]) -> Tuple[CharSpan, CharSpan]:
    """Character spans of the two pair sentences in `text`.

    text (str): The document.
    pair (List[str]): Two sentences that occur once each in `text`.
    RETURNS (Tuple[CharSpan, CharSpan]): Their (start, end) offsets, in text order.
    """
    if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
        raise ValueError("'pair' must hold two different sentences")
    spans = []
    for sentence in pair:
        if not isinstance(sentence, str) or not sentence.strip():
            raise ValueError("a pair sentence is empty")
        count = text.count(sentence)
        if count != 1:
            raise ValueError(f"pair sentence occurs {count} times in the text: {sentence[:60]!r}")
        start = text.index(sentence)
        spans.append((start, start + len(sentence)))
    a, b = sorted(spans)
    return a, b


SPLIT_PATTERNS = {"test": "test_*.jsonl", "test2": "test2_*.jsonl", "test3": "test3_*.jsonl",
                  "dev": "dev_*.jsonl", "dev2": "dev2_*.jsonl", "dev3": "dev3_*.jsonl"}


def split_pattern(split: str) -> str:
    """The file pattern of a named split of tests/behaviour ('test', 'dev2', ...); any other
    value is taken as a pattern (comma-separated globs)."""
    return SPLIT_PATTERNS.get(split, split)


def suite_files(folder: Union[str, Path], pattern: str) -> List[Path]:
    """The files of FOLDER that any of the comma-separated globs of PATTERN matches, in name order,
    each once ("train_part0?.jsonl,train_part1[0-6].jsonl" pins a set that later files do not join).

    folder (Union[str, Path]): The folder of the suite files.
    pattern (str): One glob, or several separated by commas.
    RETURNS (List[Path]): The files; a ValueError (E189) when none matches.
    """
    folder = Path(folder)
    paths = sorted({path for glob in pattern.split(",") if glob.strip() for path in folder.glob(glob.strip())})
    if not paths:
        raise ValueError(Errors.E189.format(pattern=pattern, folder=folder))
    return paths


def read_behaviour_suite(folder: Union[str, Path], pattern: str = "test_*.jsonl") -> List[Dict[str, Any]]:
    """Read and check the records of a behavioural suite.

    folder (Union[str, Path]): The folder of the suite files.
    pattern (str): Glob of the files to read, e.g. "test_*.jsonl" or "dev_*.jsonl";
        several globs separated by commas read the files any of them matches
        ("train_part0?.jsonl,train_part1[0-6].jsonl").
    RETURNS (List[Dict[str, Any]]): The records, each with `gold` and
        `control_gold` (character spans of the pairs) added; files in name order.
    """
    records = []
    seen = set()
    for path in suite_files(folder, pattern):
        with path.open(encoding="utf8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    if record["id"] in seen:
                        raise ValueError(f"duplicate id {record['id']!r}")
                    seen.add(record["id"])
                    if not isinstance(record["capability"], str) or not record["capability"]:
                        raise ValueError("'capability' must be a non-empty string")
                    record["gold"] = gold_spans(record["contradiction"]["text"], record["contradiction"]["pair"])
                    record["control_gold"] = gold_spans(record["control"]["text"], record["control"]["pair"])
                    if record["control"]["text"] == record["contradiction"]["text"]:
                        raise ValueError("the control text equals the contradiction text")
                except (ValueError, KeyError, TypeError) as err:
                    raise ValueError(Errors.E188.format(path=path, line=line_no, reason=err)) from err
                records.append(record)
    return records
