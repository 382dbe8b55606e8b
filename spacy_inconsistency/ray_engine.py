"""The detector over corpora as a Ray Data job that loses nothing.

`detect_dataset` runs the pipeline in `map_batches` on a pool of actors (one
loaded pipeline per actor, `nlp.pipe` inside) and turns every input row into
exactly one output row: the findings, or an `error` saying why there are none.
`detect_files` adds the files around it: it reads text/JSONL/Parquet inputs
with `io.read_inputs`, splits the records into numbered shards of
`shard_size`, puts each shard still to do into Ray's object store as it is
read (so the driver holds one shard at a time, not the corpus; the store
spills to disk when full), writes one JSONL output shard per input shard (to
a temporary name, then renamed, so that a killed run never leaves a half
shard that counts as done),
skips the shards an earlier run already wrote, and ends with `manifest.json`.

Ray is an optional extra (`pip install -e ".[ray]"`); this module imports it
only when a function runs.
"""
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .errors import Errors
from .io import InputRecord, read_inputs

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

MANIFEST = "manifest.json"
RUN_FILE = "run.json"
SHARD_DIR = "shards"
SHARD_PATTERN = "part-{index:05d}.jsonl"
TMP_SUFFIX = ".tmp"
# Columns that order the rows of `detect_files`; carried through the actors.
SHARD_COLUMN = "_shard"
SEQ_COLUMN = "_seq"
# Finite by default, so that a document that kills every actor it reaches
# fails the job after a few tries instead of restarting actors for ever.
DEFAULT_MAX_RESTARTS = 3
DEFAULT_MAX_TASK_RETRIES = 3
# Settings that may change between a run and its resumption (they do not
# change the result).
RESUMABLE_CHANGES = ("num_actors", "batch_size", "num_cpus_per_actor", "num_gpus_per_actor", "address", "num_cpus")


def import_ray() -> Any:
    """Ray with Ray Data, or an ImportError that names the extra.

    RETURNS (module): The `ray` module (with `ray.data` imported).
    """
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as err:
        raise ImportError(Errors.E240.format(err=err)) from err
    return ray


def init_ray(*, address: Optional[str] = None, num_cpus: Optional[int] = None) -> Any:
    """Connect to a Ray cluster, or start Ray on this machine.

    A session that is already running is used as it is.

    address (Optional[str]): The cluster's address ("auto", "ray://host:10001", ...);
        None starts Ray locally.
    num_cpus (Optional[int]): CPUs of the local Ray (None: all); ignored with `address`.
    RETURNS (module): The `ray` module.
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    if address:
        ray.init(address=address, ignore_reinit_error=True)
    else:
        ray.init(num_cpus=num_cpus, ignore_reinit_error=True, include_dashboard=False)
    return ray


def _record_columns() -> Tuple[List[Tuple[str, Any]], List[Tuple[str, Any]]]:
    """The columns a record has before and after its findings (or its text), in and out."""
    import pyarrow as pa

    head = [("id", pa.string()), ("source", pa.string()), ("line", pa.int64())]
    tail = [("warnings", pa.list_(pa.string())), ("error", pa.string()), ("meta", pa.string())]
    return head, tail


def _output_schema() -> Any:
    import pyarrow as pa

    head, tail = _record_columns()
    return pa.schema(head + [
        ("has_inconsistency", pa.bool_()),
        ("inconsistency_score", pa.float64()),
        ("n_units", pa.int64()),
        # JSON text, so that the column's type does not depend on what was found.
        ("inconsistencies", pa.string()),
    ] + tail)


# Input columns the actors read; every other column is passed through.
CONSUMED_COLUMNS = ("id", "text", "source", "line", "error", "warnings", "meta")


class PipelineActor:
    """One loaded pipeline that turns batches of records into result rows.

    make_pipeline (Callable[..., Language]): Builds the pipeline from `settings`
        (e.g. `spacy_inconsistency.cli.build_pipeline`); module-level, so that it pickles.
    settings (Dict[str, Any]): Keyword arguments of `make_pipeline`.
    batch_size (int): Documents per `nlp.pipe` batch.
    """

    def __init__(self, make_pipeline: Callable[..., Any], settings: Dict[str, Any], batch_size: int) -> None:
        started = time.perf_counter()
        self.nlp = make_pipeline(**settings)
        self.batch_size = batch_size
        logger.info("pipeline loaded in %.1fs (pid %d)", time.perf_counter() - started, os.getpid())

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        records = batch.select([c for c in CONSUMED_COLUMNS if c in batch.column_names]).to_pylist()
        rows = self.process(records)
        table = pa.Table.from_pylist(rows, schema=_output_schema())
        for name in batch.column_names:
            if name not in CONSUMED_COLUMNS:
                table = table.append_column(name, batch.column(name))
        return table

    def process(self, records: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """One result row per record, in order.

        records (List[Dict[str, Any]]): Rows with `id` and `text` (and optionally
            `source`, `line`, `error`, `warnings`, `meta`).
        RETURNS (List[Dict[str, Any]]): The rows of the output schema.
        """
        rows = [_base_row(r) for r in records]
        todo = []
        for i, (record, row) in enumerate(zip(records, rows)):
            text = record.get("text")
            if row["error"] is not None:
                continue
            if not isinstance(text, str):
                row["error"] = f"expected a string text, got {type(text).__name__}"
            elif len(text) > self.nlp.max_length:
                row["error"] = (
                    f"text of {len(text):,} characters is longer than the "
                    f"limit of {self.nlp.max_length:,} (raise it with --max-chars)"
                )
            else:
                todo.append(i)
        try:
            docs = list(self.nlp.pipe((records[i]["text"] for i in todo), batch_size=self.batch_size))
        except Exception as err:  # a bad document must not take its batch with it
            logger.warning("batch of %d failed (%s); processing its documents one by one", len(todo), err)
            docs = []
            for i in todo:
                try:
                    docs.append(self.nlp(records[i]["text"]))
                except Exception as one_err:
                    docs.append(None)
                    rows[i]["error"] = f"detector failed: {type(one_err).__name__}: {one_err}"
        for i, doc in zip(todo, docs):
            if doc is not None:
                _fill_findings(rows[i], doc)
        return rows


def _base_row(record: Dict[str, Any]) -> Dict[str, Any]:
    meta = record.get("meta")
    warnings = record.get("warnings")
    return {
        "id": record.get("id"),
        "source": record.get("source"),
        "line": record.get("line"),
        "has_inconsistency": None,
        "inconsistency_score": None,
        "n_units": None,
        "inconsistencies": None,
        "warnings": list(warnings) if warnings is not None else [],
        "error": record.get("error"),
        "meta": meta if meta is None or isinstance(meta, str) else json.dumps(meta, ensure_ascii=False),
    }


def _fill_findings(row: Dict[str, Any], doc: Any) -> None:
    row["has_inconsistency"] = bool(doc._.has_inconsistency)
    score = doc._.inconsistency_score
    row["inconsistency_score"] = None if score is None else float(score)
    row["n_units"] = len(doc.spans.get("inconsistency_units", []))
    row["inconsistencies"] = json.dumps(doc._.inconsistencies, ensure_ascii=False)


def _check_at_least(name: str, value: Optional[float], least: float) -> None:
    if value is not None and value < least:
        raise ValueError(Errors.E243.format(name=name, least=least, value=value))


def detect_dataset(
    ds: Any,
    *,
    make_pipeline: Callable[..., Any],
    pipeline_settings: Dict[str, Any],
    num_actors: int = 1,
    batch_size: int = 16,
    num_cpus_per_actor: float = 1.0,
    num_gpus_per_actor: float = 0.0,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    max_task_retries: int = DEFAULT_MAX_TASK_RETRIES,
) -> Any:
    """The detector's results for every row of a Ray Dataset, one row each.

    The rows need `id` and `text`; `source`, `line`, `error` (a record that
    could not be read: passed on, not processed), `warnings` and `meta` (JSON
    text) are used when present, other columns are passed through. Output
    columns: id, source, line, has_inconsistency, inconsistency_score, n_units,
    inconsistencies (a JSON list), warnings, error, meta. A row whose text
    cannot be processed gets `error` instead of findings.

    ds (ray.data.Dataset): The records.
    make_pipeline (Callable[..., Language]): Builds the pipeline in each actor
        (e.g. `spacy_inconsistency.cli.build_pipeline`).
    pipeline_settings (Dict[str, Any]): Keyword arguments of `make_pipeline`.
    num_actors (int): Actors, each with its own pipeline.
    batch_size (int): Rows per `map_batches` batch and per `nlp.pipe` batch.
    num_cpus_per_actor (float): CPUs reserved per actor.
    num_gpus_per_actor (float): GPUs per actor (set the pipeline's device to "cuda" with it).
    max_restarts (int): Restarts of an actor that died (-1: no limit).
    max_task_retries (int): Retries of a batch whose actor died (-1: no limit).
    RETURNS (ray.data.Dataset): The results (lazy; consume it to run the job).
    """
    ray = import_ray()
    for column in ("id", "text"):
        if column not in ds.columns():
            raise ValueError(Errors.E242.format(column=column))
    _check_at_least("num_actors", num_actors, 1)
    _check_at_least("batch_size", batch_size, 1)
    return ds.map_batches(
        PipelineActor,
        fn_constructor_kwargs={"make_pipeline": make_pipeline, "settings": dict(pipeline_settings), "batch_size": batch_size},
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=num_actors),
        num_cpus=num_cpus_per_actor,
        num_gpus=num_gpus_per_actor or None,
        max_restarts=max_restarts,
        max_task_retries=max_task_retries,
    )


def result_record(row: Dict[str, Any]) -> Dict[str, Any]:
    """A result row as the `detect` command writes it (the same keys, findings as a list).

    row (Dict[str, Any]): A row of `detect_dataset`'s output.
    RETURNS (Dict[str, Any]): The JSON-ready record.
    """
    out: Dict[str, Any] = {"id": row["id"], "source": row["source"]}
    if row.get("line") is not None:
        out["line"] = row["line"]
    if row.get("error") is not None:
        out["error"] = row["error"]
    else:
        out["has_inconsistency"] = row["has_inconsistency"]
        out["inconsistency_score"] = row["inconsistency_score"]
        out["n_units"] = row["n_units"]
        out["inconsistencies"] = json.loads(row["inconsistencies"])
    if row.get("warnings"):
        out["warnings"] = list(row["warnings"])
    if row.get("meta"):
        meta = json.loads(row["meta"])
        if meta:
            out["meta"] = meta
    return out


def _item(record: InputRecord, shard: int, seq: int) -> Dict[str, Any]:
    return {
        SHARD_COLUMN: shard,
        SEQ_COLUMN: seq,
        "id": record.id,
        "source": record.source,
        "line": record.line,
        "text": record.text if record.error is None else "",
        "error": record.error,
        "warnings": list(record.warnings),
        "meta": json.dumps(record.meta, ensure_ascii=False) if record.meta else None,
    }


def _shards(records: Iterator[InputRecord], size: int) -> Iterator[List[InputRecord]]:
    shard: List[InputRecord] = []
    for record in records:
        shard.append(record)
        if len(shard) == size:
            yield shard
            shard = []
    if shard:
        yield shard


def shard_path(output_dir: Path, index: int) -> Path:
    """The output shard of input shard `index`.

    output_dir (Path): The run's output folder.
    index (int): The shard number (0-based).
    RETURNS (Path): Its path.
    """
    return Path(output_dir) / SHARD_DIR / SHARD_PATTERN.format(index=index)


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def _write_atomically(path: Path, lines: Sequence[str]) -> None:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with tmp.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _input_fingerprint(paths: Sequence[Path]) -> List[Dict[str, Any]]:
    # Size and modification time, not a content hash: hashing a corpus would
    # read it once more before any work starts.
    out = []
    for path in paths:
        stat = Path(path).stat()
        out.append({"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    return out


def _run_key(run: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in run.items() if k not in RESUMABLE_CHANGES}


def run_settings(
    paths: Sequence[Path], *, text_field: str, shard_size: int, pipeline_settings: Dict[str, Any],
    make_pipeline: Callable[..., Any], num_actors: int, batch_size: int, num_cpus_per_actor: float,
    num_gpus_per_actor: float, address: Optional[str], num_cpus: Optional[int], **extra: Any,
) -> Dict[str, Any]:
    """A Ray run's settings as `run.json` keeps them (JSON values), `extra` added."""
    run = {
        "inputs": _input_fingerprint(paths),
        "text_field": text_field,
        "shard_size": shard_size,
        "pipeline_settings": {k: v for k, v in sorted(pipeline_settings.items())},
        "make_pipeline": f"{make_pipeline.__module__}.{getattr(make_pipeline, '__qualname__', make_pipeline)}",
        "num_actors": num_actors,
        "batch_size": batch_size,
        "num_cpus_per_actor": num_cpus_per_actor,
        "num_gpus_per_actor": num_gpus_per_actor,
        "address": address,
        "num_cpus": num_cpus,
        **extra,
    }
    return json.loads(json.dumps(run, default=str))


def _check_or_write_run(output_dir: Path, run: Dict[str, Any]) -> None:
    path = output_dir / RUN_FILE
    if path.exists():
        before = json.loads(path.read_text(encoding="utf-8"))
        old, new = _run_key(before), _run_key(run)
        if old != new:
            diff = ", ".join(sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k)))
            raise ValueError(Errors.E241.format(path=output_dir, diff=diff))
        return
    _write_atomically(path, [json.dumps(run, indent=2, sort_keys=True, default=str)])


def detect_files(
    inputs: Sequence[Path],
    output_dir: Path,
    *,
    make_pipeline: Callable[..., Any],
    pipeline_settings: Dict[str, Any],
    text_field: str = "text",
    shard_size: int = 1000,
    num_actors: int = 1,
    batch_size: int = 16,
    num_cpus_per_actor: float = 1.0,
    num_gpus_per_actor: float = 0.0,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    max_task_retries: int = DEFAULT_MAX_TASK_RETRIES,
    address: Optional[str] = None,
    num_cpus: Optional[int] = None,
    progress: bool = False,
    on_shard_written: Optional[Callable[[int], None]] = None,
) -> Dict[str, Any]:
    """Run the detector over text/JSONL files on Ray, in shards that a new run resumes.

    Input record i (in `read_inputs` order, unreadable lines included) goes to
    shard i // shard_size; each shard becomes `shards/part-NNNNN.jsonl` with
    one line per record, in input order, as `detect` writes it. Shards already
    in `output_dir` are skipped, so a run that was killed ends, when started
    again with the same arguments, as an uninterrupted run would have.

    inputs (Sequence[Path]): Text files (one document each) or JSONL files.
    output_dir (Path): Folder for the shards, `run.json` and `manifest.json`.
    make_pipeline (Callable[..., Language]): Builds the pipeline in each actor.
    pipeline_settings (Dict[str, Any]): Keyword arguments of `make_pipeline`.
    text_field (str): The JSONL field holding the text.
    shard_size (int): Records per shard.
    num_actors (int): Actors, each with its own pipeline.
    batch_size (int): Documents per batch.
    num_cpus_per_actor (float): CPUs reserved per actor.
    num_gpus_per_actor (float): GPUs per actor.
    max_restarts (int): Restarts of an actor that died.
    max_task_retries (int): Retries of a batch whose actor died.
    address (Optional[str]): Address of a Ray cluster; None runs Ray locally.
    num_cpus (Optional[int]): CPUs of the local Ray.
    progress (bool): Show a progress bar of the records written.
    on_shard_written (Optional[Callable[[int], None]]): Called with each shard's
        number after it is written.
    RETURNS (Dict[str, Any]): The manifest.
    """
    _check_at_least("shard_size", shard_size, 1)
    ray = import_ray()
    output_dir = Path(output_dir)
    shard_dir = output_dir / SHARD_DIR
    shard_dir.mkdir(parents=True, exist_ok=True)
    paths = [Path(p) for p in inputs]
    run = run_settings(
        paths, text_field=text_field, shard_size=shard_size, pipeline_settings=pipeline_settings,
        make_pipeline=make_pipeline, num_actors=num_actors, batch_size=batch_size,
        num_cpus_per_actor=num_cpus_per_actor, num_gpus_per_actor=num_gpus_per_actor, address=address,
        num_cpus=num_cpus,
    )
    _check_or_write_run(output_dir, run)
    for stale in shard_dir.glob("*" + TMP_SUFFIX):
        # Left by a run killed while writing; its shard is written again.
        stale.unlink()

    # Each shard to do goes into Ray's object store as it is read, so that the
    # driver holds one shard, not the corpus (and a cluster's nodes need no
    # access to the driver's files).
    refs: List[Any] = []
    sizes: Dict[int, int] = {}
    n_in = 0
    skipped = 0
    for index, shard in enumerate(_shards(read_inputs(paths, text_field=text_field), shard_size)):
        n_in += len(shard)
        path = shard_path(output_dir, index)
        if path.exists():
            if _count_lines(path) == len(shard):
                skipped += 1
                continue
            logger.warning("%s has the wrong number of lines; writing it again", path)
        sizes[index] = len(shard)
        if not refs:
            init_ray(address=address, num_cpus=num_cpus)
        refs.append(ray.put(_input_table(index, shard)))
    n_shards = skipped + len(sizes)
    # Shards of an earlier, longer input cannot be part of this run's result.
    extra = sorted(p for p in shard_dir.glob("part-*.jsonl") if int(p.stem.split("-")[1]) >= n_shards)
    for path in extra:
        logger.warning("removing %s: no input shard has its number", path)
        path.unlink()

    started = time.perf_counter()
    if refs:
        _run_shards(
            ray, refs, sizes, output_dir,
            make_pipeline=make_pipeline, pipeline_settings=pipeline_settings, num_actors=num_actors,
            batch_size=batch_size, num_cpus_per_actor=num_cpus_per_actor, num_gpus_per_actor=num_gpus_per_actor,
            max_restarts=max_restarts, max_task_retries=max_task_retries, progress=progress,
            on_shard_written=on_shard_written,
        )
    seconds = time.perf_counter() - started
    manifest = _manifest(output_dir, n_shards, n_in, run)
    manifest.update({"shards_skipped": skipped, "shards_written": len(sizes), "seconds": round(seconds, 3)})
    _write_atomically(output_dir / MANIFEST, [json.dumps(manifest, indent=2, sort_keys=True)])
    return manifest


def _input_schema() -> Any:
    import pyarrow as pa

    head, tail = _record_columns()
    return pa.schema([(SHARD_COLUMN, pa.int64()), (SEQ_COLUMN, pa.int64())] + head + [("text", pa.string())] + tail)


def _input_table(index: int, shard: List[InputRecord]) -> Any:
    """Shard `index`'s records as an Arrow table."""
    import pyarrow as pa

    return pa.Table.from_pylist([_item(record, index, seq) for seq, record in enumerate(shard)],
                                schema=_input_schema())


def _run_shards(
    ray: Any,
    refs: List[Any],
    sizes: Dict[int, int],
    output_dir: Path,
    *,
    progress: bool,
    on_shard_written: Optional[Callable[[int], None]],
    **settings: Any,
) -> None:
    from tqdm import tqdm

    context = ray.data.DataContext.get_current()
    preserve = context.execution_options.preserve_order
    # In input order, shards complete one after another and the driver holds
    # about one shard of results; correctness does not depend on it (rows are
    # grouped by shard and sorted by position below).
    context.execution_options.preserve_order = True
    # About one block per batch (a shard is one block, which one actor alone
    # would process), cut before the actor pool starts: the cut's tasks would
    # otherwise wait for CPUs the actors hold.
    blocks = max(1, -(-sum(sizes.values()) // settings["batch_size"]))
    records = ray.data.from_arrow_refs(refs).repartition(blocks).materialize()
    results = detect_dataset(records, **settings)
    pending: Dict[int, List[Dict[str, Any]]] = {}
    bar = tqdm(total=sum(sizes.values()), unit="doc", disable=not progress, desc="detect (ray)")
    try:
        for batch in results.iter_batches(batch_format="pyarrow", batch_size=None):
            for row in batch.to_pylist():
                index = row[SHARD_COLUMN]
                rows = pending.setdefault(index, [])
                rows.append(row)
                if len(rows) == sizes[index]:
                    rows.sort(key=lambda r: r[SEQ_COLUMN])
                    lines = [json.dumps(result_record(r), ensure_ascii=False) for r in rows]
                    _write_atomically(shard_path(output_dir, index), lines)
                    del pending[index]
                    bar.update(len(lines))
                    if on_shard_written is not None:
                        on_shard_written(index)
    finally:
        bar.close()
        context.execution_options.preserve_order = preserve
    if pending:  # pragma: no cover - would be a bug in Ray or above
        raise RuntimeError(f"shards {sorted(pending)} are incomplete after the job ended")


def _manifest(output_dir: Path, n_shards: int, n_in: int, run: Dict[str, Any]) -> Dict[str, Any]:
    """Counts read back from the shards on disk, so that they say what is there."""
    out = errors = flagged = 0
    for index in range(n_shards):
        with shard_path(output_dir, index).open(encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                out += 1
                errors += "error" in record
                flagged += bool(record.get("has_inconsistency"))
    try:
        import ray

        version = ray.__version__
    except ImportError:  # pragma: no cover
        version = None
    return {
        "records_in": n_in,
        "records_out": out,
        "errors": errors,
        "flagged": flagged,
        "shards": n_shards,
        "shard_files": [str(shard_path(output_dir, i).relative_to(output_dir)) for i in range(n_shards)],
        "complete": out == n_in,
        "config": run,
        "ray_version": version,
        "digest": _digest(output_dir, n_shards),
    }


def _digest(output_dir: Path, n_shards: int) -> str:
    """SHA-256 of the shards in order: equal for two runs with the same result."""
    h = hashlib.sha256()
    for index in range(n_shards):
        h.update(shard_path(output_dir, index).read_bytes())
    return h.hexdigest()
