"""Read documents from text and JSONL files without losing or hiding anything."""
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple


@dataclass
class InputRecord:
    """One document to process, or the reason a line could not be read.

    source (str): The file it came from.
    line (Optional[int]): 1-based line number for JSONL input.
    id (str): The record's `id` field, else "source" or "source:line".
    text (str): The text ("" when `error` is set).
    error (Optional[str]): Why the line could not be read.
    warnings (List[str]): Problems that did not stop reading (e.g. bad bytes).
    meta (Dict[str, Any]): Other fields of the JSONL object.
    """

    source: str
    line: Optional[int]
    id: str
    text: str = ""
    error: Optional[str] = None
    warnings: List[str] = field(default_factory=list)
    meta: Dict[str, Any] = field(default_factory=dict)


def decode_utf8(data: bytes) -> Tuple[str, int]:
    """Decode UTF-8, replacing invalid bytes with U+FFFD.

    data (bytes): The raw bytes.
    RETURNS (Tuple[str, int]): The text and the number of invalid byte runs replaced.
    """
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    clean = data.decode("utf-8", errors="ignore")
    return text, len(text) - len(clean)


def _bad_bytes_warning(n: int) -> str:
    return f"{n} invalid UTF-8 byte sequence(s) replaced with U+FFFD"


def read_text_file(path: Path) -> InputRecord:
    """A whole file as one document."""
    text, n_bad = decode_utf8(path.read_bytes())
    record = InputRecord(source=str(path), line=None, id=str(path), text=text)
    if n_bad:
        record.warnings.append(_bad_bytes_warning(n_bad))
    return record


def read_jsonl_file(path: Path, *, text_field: str = "text") -> Iterator[InputRecord]:
    """One document per line (`{"text": ...}`); blank lines are skipped.

    A line that is not a JSON object with a string `text_field` becomes a
    record with `error` set, so the caller can report it and go on.
    """
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            line, n_bad = decode_utf8(raw)
            if not line.strip():
                continue
            record = InputRecord(source=str(path), line=number, id=f"{path}:{number}")
            if n_bad:
                record.warnings.append(_bad_bytes_warning(n_bad))
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                record.error = f"malformed JSON: {err.msg} (column {err.colno})"
                yield record
                continue
            if not isinstance(obj, dict):
                record.error = f"expected a JSON object, got {type(obj).__name__}"
            elif not isinstance(obj.get(text_field), str):
                record.error = f"missing or non-string field '{text_field}'"
            else:
                record.text = obj.pop(text_field)
                if "id" in obj:
                    record.id = str(obj.pop("id"))
                record.meta = obj
            yield record


def read_inputs(paths: List[Path], *, text_field: str = "text") -> Iterator[InputRecord]:
    """Documents from each path: `.jsonl` files line by line, other files whole."""
    for path in paths:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            yield from read_jsonl_file(path, text_field=text_field)
        else:
            yield read_text_file(path)
