"""Read documents from text, JSONL and Parquet files without losing or hiding anything.

Every readable record becomes exactly one `InputRecord`, in input order: the
text, or `error` saying why it cannot be processed. What is repaired rather
than refused is counted in `warnings`: invalid UTF-8 bytes and unpaired
surrogates (both replaced with U+FFFD), a UTF-8 byte-order mark (removed).
Lines end at LF, CRLF or a lone CR.
"""
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Tuple

UTF8_BOM = b"\xef\xbb\xbf"
REPLACEMENT = "\ufffd"
# Unpaired UTF-16 surrogates: valid in JSON (`"\ud800"`) and in Python
# strings, but not encodable as UTF-8, so spaCy's tokenizer and every
# writer would fail on them.
SURROGATE_RE = re.compile("[\ud800-\udfff]")
LINE_END_RE = re.compile(rb"\r\n|\r|\n")
# A text with a larger share of replaced bytes and control characters is
# refused as not text (random bytes give ~0.6; text with a few bad bytes
# or a stray control character far less).
MAX_NON_TEXT_SHARE = 0.2
MIN_CHARS_FOR_NON_TEXT_CHECK = 20
READ_CHUNK = 1 << 20


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


def repair_text(text: str) -> Tuple[str, int]:
    """Replace unpaired surrogates, which no UTF-8 writer or tokenizer accepts, with U+FFFD.

    Use it before `nlp(text)` on text from sources that may hold them (JSON
    with `\\ud800` escapes, strings decoded with "surrogateescape").

    text (str): The text.
    RETURNS (Tuple[str, int]): The repaired text and the number of surrogates replaced.
    """
    return SURROGATE_RE.subn(REPLACEMENT, text)


def non_text_share(text: str) -> float:
    """The share of characters that are U+FFFD or control characters other than whitespace.

    text (str): The text.
    RETURNS (float): Between 0 and 1 (0 for the empty text).
    """
    if not text:
        return 0.0
    bad = sum(1 for ch in text if ch == REPLACEMENT or (unicodedata.category(ch) == "Cc" and ch not in "\t\n\r\f\v"))
    return bad / len(text)


def _non_text_error(text: str) -> Optional[str]:
    if len(text) < MIN_CHARS_FOR_NON_TEXT_CHECK:
        return None
    share = non_text_share(text)
    if share <= MAX_NON_TEXT_SHARE:
        return None
    return (
        f"not text: {share:.0%} of its {len(text):,} characters are undecodable bytes or "
        f"control characters (more than {MAX_NON_TEXT_SHARE:.0%}); is it UTF-8 text?"
    )


def _bad_bytes_warning(n: int) -> str:
    return f"{n} invalid UTF-8 byte sequence(s) replaced with U+FFFD"


def _surrogates_warning(n: int) -> str:
    return f"{n} unpaired surrogate(s) replaced with U+FFFD"


def _repair_value(value: Any, counter: List[int]) -> Any:
    """`value` with unpaired surrogates replaced in every string it holds."""
    if isinstance(value, str):
        fixed, n = repair_text(value)
        counter[0] += n
        return fixed
    if isinstance(value, list):
        return [_repair_value(v, counter) for v in value]
    if isinstance(value, dict):
        return {_repair_value(k, counter): _repair_value(v, counter) for k, v in value.items()}
    return value


def read_text_file(path: Path) -> InputRecord:
    """A whole file as one document."""
    data = path.read_bytes()
    record = InputRecord(source=str(path), line=None, id=str(path))
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
        record.warnings.append("UTF-8 byte-order mark removed")
    text, n_bad = decode_utf8(data)
    if n_bad:
        record.warnings.append(_bad_bytes_warning(n_bad))
    error = _non_text_error(text)
    if error is not None:
        record.error = error
    else:
        record.text = text
    return record


def iter_lines(f: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file, without their ends; a line ends at LF, CRLF or a lone CR.

    f (BinaryIO): The file.
    YIELDS (bytes): Each line, including a last one without an end.
    """
    rest = b""
    while True:
        chunk = f.read(READ_CHUNK)
        if not chunk:
            break
        data = rest + chunk
        # A CR at the end of a chunk may be the first half of a CRLF.
        hold = 1 if data.endswith(b"\r") else 0
        pieces = LINE_END_RE.split(data[: len(data) - hold] if hold else data)
        rest = pieces.pop() + (data[-1:] if hold else b"")
        yield from pieces
    if rest:
        pieces = LINE_END_RE.split(rest)
        if pieces and pieces[-1] == b"":
            pieces.pop()
        yield from pieces


def read_jsonl_file(path: Path, *, text_field: str = "text") -> Iterator[InputRecord]:
    """One document per line (`{"text": ...}`); blank lines are skipped.

    A line that is not a JSON object with a string `text_field` becomes a
    record with `error` set (and the object's `id` when it has one), so the
    caller can report it and go on.
    """
    with path.open("rb") as f:
        for number, raw in enumerate(iter_lines(f), start=1):
            record = InputRecord(source=str(path), line=number, id=f"{path}:{number}")
            if number == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM):]
                record.warnings.append("UTF-8 byte-order mark removed")
            line, n_bad = decode_utf8(raw)
            if not line.strip():
                continue
            if n_bad:
                record.warnings.append(_bad_bytes_warning(n_bad))
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                record.error = f"malformed JSON: {err.msg} (column {err.colno})"
                yield record
                continue
            counter = [0]
            obj = _repair_value(obj, counter)
            if counter[0]:
                record.warnings.append(_surrogates_warning(counter[0]))
            if not isinstance(obj, dict):
                record.error = f"expected a JSON object, got {type(obj).__name__}"
                yield record
                continue
            _take_fields(record, obj, text_field)
            yield record


def _take_fields(record: InputRecord, obj: Dict[str, Any], text_field: str) -> None:
    """`record`'s id, text (or the error saying why there is none) and meta from one object.

    obj (Dict[str, Any]): A JSONL object or a Parquet row; emptied of `id` and
        `text_field`, the rest becomes `meta`.
    """
    if "id" in obj:
        record.id = str(obj.pop("id"))
    if not isinstance(obj.get(text_field), str):
        record.error = f"missing or non-string field '{text_field}'"
        return
    text = obj.pop(text_field)
    error = _non_text_error(text)
    if error is not None:
        record.error = error
    else:
        record.text = text
    record.meta = obj


def _json_safe(value: Any) -> Any:
    """A Parquet value as JSON can hold it: bytes, dates and decimals as text."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, bytes):
        return decode_utf8(value)[0]
    return str(value)


def read_parquet_file(path: Path, *, text_field: str = "text", batch_rows: int = 1024) -> Iterator[InputRecord]:
    """One document per row of a Parquet file, read a batch of rows at a time.

    `line` is the 1-based row number, `id` the row's `id` column when there is
    one, other columns go to `meta`. A row whose `text_field` is null or not a
    string gets `error`; a file that cannot be read as Parquet (or a missing
    `text_field` column) gives one record with `error` for the whole file.
    Needs pyarrow (`pip install pyarrow`; the `ray` extra has it).
    """
    try:
        import pyarrow.parquet as pq
    except ImportError:
        yield InputRecord(source=str(path), line=None, id=str(path),
                          error="reading Parquet needs pyarrow: pip install pyarrow")
        return
    try:
        parquet = pq.ParquetFile(path)
        names = parquet.schema_arrow.names
    except Exception as err:  # pyarrow raises several types for a file that is not Parquet
        yield InputRecord(source=str(path), line=None, id=str(path),
                          error=f"not a readable Parquet file: {type(err).__name__}: {err}")
        return
    if text_field not in names:
        yield InputRecord(source=str(path), line=None, id=str(path),
                          error=f"no column '{text_field}' (columns: {', '.join(names)})")
        return
    number = 0
    try:
        for batch in parquet.iter_batches(batch_size=batch_rows):
            for row in batch.to_pylist():
                number += 1
                record = InputRecord(source=str(path), line=number, id=f"{path}:{number}")
                # Parquet strings are valid UTF-8, so there is nothing to repair.
                row = _json_safe(row)
                if row.get("id") is None:  # a null id: the row number names the record
                    row.pop("id", None)
                _take_fields(record, row, text_field)
                yield record
    except Exception as err:  # a corrupt row group: the rows after it cannot be counted
        yield InputRecord(source=str(path), line=None, id=f"{path}:{number + 1}-",
                          error=f"Parquet file unreadable after row {number}: {type(err).__name__}: {err}")


def read_inputs(paths: List[Path], *, text_field: str = "text") -> Iterator[InputRecord]:
    """Documents from each path: `.jsonl` files line by line, `.parquet` files row by row, other files whole."""
    for path in paths:
        suffix = path.suffix.lower()
        if suffix in (".jsonl", ".ndjson"):
            yield from read_jsonl_file(path, text_field=text_field)
        elif suffix in (".parquet", ".pq"):
            yield from read_parquet_file(path, text_field=text_field)
        else:
            yield read_text_file(path)
