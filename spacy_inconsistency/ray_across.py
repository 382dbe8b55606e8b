"""Contradictions across sources at scale: `across --engine ray` as Ray Data jobs.

`across_files` finds what `find_contradictions` finds over the statements of
many files, without the driver ever holding the statements, their embeddings
or the candidate pairs. It runs in stages, each a Ray Data job whose output is
written to `output_dir` before the next starts:

1. `inputs`: the driver streams the records (`io.read_inputs`) into numbered
   input shards, one shard in memory at a time.
2. `units`: actors (one pipeline each) split each shard's records into
   statement units as `find_contradictions` does (`compare._prepare`,
   `compare._units`) and keep per unit what later stages need (text, char
   offsets, source label, content words, sentence embedding, alignment facts);
   the driver takes the shards in order, one at a time, gives every unit its
   global id (record order, then unit order: the index `find_contradictions`
   would give it) and its record's document index, and writes the units table
   `units/part-NNNNN.parquet` and the record list `records/part-NNNNN.jsonl`.
3. `probes` (with `hubs`): the seeded probe pairs of `contradiction_hubs`,
   scored by NLI actors; the units with the highest propensity become hubs.
4. `pairs`: candidate actors propose pairs (embedding neighbours from a faiss
   or exact index built in each actor, lexical overlap from a tf-idf matrix
   built in each actor), tasks the others (all pairs, hub rows), and Ray Data
   unions them with the scored probe pairs and drops duplicates (a group-by on
   the pair).
5. `scored`: NLI actors score the pairs both ways and combine the directions
   as `score_pairs` does (learned score and alignment facts included); the
   pairs at or above the threshold are kept.
6. `findings`: Ray sorts them by score and the driver streams them into
   `findings/part-NNNNN.jsonl`, the records `across` writes.

`manifest.json` comes last. Each stage writes to a temporary name and renames
it, and a stage is done when its file in `stages/` exists, so that a new run
with the same arguments starts at the first stage not done (the `units` stage
also keeps the shards already written); other inputs or settings are refused
(E241).

Ray is an optional extra (`pip install -e ".[ray]"`); this module imports it
only when a function runs.
"""
import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
import typing
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy

from .defaults import ANN_MIN_SIZE, HUB_SEED, LEXICAL_MAX_DF, LEXICAL_MIN_SHARED
from .errors import Errors, Warnings
from .io import read_inputs
from .ray_engine import (
    DEFAULT_MAX_RESTARTS,
    DEFAULT_MAX_TASK_RETRIES,
    MANIFEST,
    RUN_FILE,
    TMP_SUFFIX,
    _check_at_least,
    _check_or_write_run,
    _write_atomically,
    import_ray,
    init_ray,
    run_settings,
)

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

INPUT_DIR = "inputs"
RECORD_DIR = "records"
UNIT_DIR = "units"
PROBE_DIR = "probes"
PAIR_DIR = "pairs"
SCORED_DIR = "scored"
FINDING_DIR = "findings"
STAGE_DIR = "stages"
PART = "part-{index:05d}"
STAGES = ("inputs", "units", "probes", "pairs", "scored", "findings")
# Candidate strategies, each a 0/1 column of the pairs table.
STRATEGIES = ("all", "neighbours", "lexical", "hubs")
PROBABILITY_COLUMNS = ("f0", "f1", "f2", "b0", "b1", "b2")
FINDINGS_PER_SHARD = 10_000
# Pairs one candidate task proposes at most (bounds an actor's output block).
PAIRS_PER_TASK = 1_000_000
# Writing Parquet takes no CPU from the actors: with every CPU held by an actor
# pool, a task waiting for one would stall the job. (Reading has a file-listing
# task of one CPU that takes no such setting, so what feeds an actor pool is read
# and materialised first.)
IO_TASK = {"num_cpus": 0}


# ---------------------------------------------------------------------------
# Alignment facts as JSON


def facts_to_json(facts: Any) -> Optional[str]:
    """`alignment.UnitFacts` as JSON text (sets as sorted lists), or None.

    facts (Optional[UnitFacts]): The facts.
    RETURNS (Optional[str]): JSON that `facts_from_json` turns back into equal facts.
    """
    if facts is None:
        return None
    out = {field.name: _to_json_value(getattr(facts, field.name)) for field in dataclasses.fields(facts)}
    return json.dumps(out, ensure_ascii=False, sort_keys=True)


def _to_json_value(value: Any) -> Any:
    """Sets as sorted lists and tuples as lists, at any depth."""
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return [_to_json_value(v) for v in value]
    return value


def _from_json_value(value: Any, annotation: Any) -> Any:
    """What `_to_json_value` wrote, back as the field's annotation says: lists that were
    sets or tuples (``Tuple[X, ...]`` or fixed ``Tuple[X, Y]``) at any depth."""
    origin = typing.get_origin(annotation)
    if origin is frozenset:
        return frozenset(value)
    if origin is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_json_value(v, args[0]) for v in value)
        return tuple(_from_json_value(v, t) for v, t in zip(value, args))
    return value


def facts_from_json(text: Optional[str]) -> Any:
    """The `alignment.UnitFacts` that `facts_to_json` wrote, or None.

    text (Optional[str]): The JSON text.
    RETURNS (Optional[UnitFacts]): The facts.
    """
    from .alignment import UnitFacts

    if text is None:
        return None
    data = json.loads(text)
    values = {}
    for field in dataclasses.fields(UnitFacts):
        if field.name not in data and field.default is not dataclasses.MISSING:
            continue  # written before the field was added: its default
        values[field.name] = _from_json_value(data[field.name], field.type)
    return UnitFacts(**values)


# ---------------------------------------------------------------------------
# Files


def part_path(output_dir: Path, folder: str, index: int, suffix: str) -> Path:
    """The file of shard `index` in a stage folder, e.g. `units/part-00003.parquet`.

    output_dir (Path): The run's output folder.
    folder (str): The stage folder.
    index (int): The shard number (0-based).
    suffix (str): ".parquet", ".jsonl" or ".json".
    RETURNS (Path): Its path.
    """
    return Path(output_dir) / folder / (PART.format(index=index) + suffix)


def _write_parquet_atomically(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(path.name + TMP_SUFFIX)
    pq.write_table(table, tmp)
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _parquet_files(folder: Path) -> List[Path]:
    return sorted(Path(folder).glob("*.parquet"))


def _parquet_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in _parquet_files(folder))


def read_units(output_dir: Path, columns: Sequence[str]) -> Any:
    """Columns of the units table, in id order (a pyarrow Table).

    output_dir (Path): The run's output folder.
    columns (Sequence[str]): The columns to read ("id" is always read and checked).
    RETURNS (pyarrow.Table): One row per unit; row i is the unit with id i.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(output_dir) / UNIT_DIR
    names = ["id"] + [c for c in columns if c != "id"]
    tables = [pq.read_table(p, columns=names) for p in _parquet_files(folder)]
    table = pa.concat_tables(tables).combine_chunks() if tables else _units_schema().empty_table().select(names)
    ids = table.column("id").to_numpy()
    if not numpy.array_equal(ids, numpy.arange(len(ids))):
        raise RuntimeError(Errors.E245.format(path=folder, n=len(ids)))
    return table


def _replace_folder(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def _fresh_folder(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


# ---------------------------------------------------------------------------
# Schemas


def _segment_fields() -> List[Tuple[str, Any]]:
    import pyarrow as pa

    return [
        ("record", pa.string()),
        ("source", pa.string()),
        ("start_char", pa.int64()),
        ("end_char", pa.int64()),
        ("text", pa.string()),
        ("speaker", pa.string()),
        ("terms", pa.list_(pa.string())),
        ("vector", pa.list_(pa.float32())),
        ("facts", pa.string()),
    ]


def _segments_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("local", pa.int64()), ("local_doc", pa.int64())] + _segment_fields())


def _units_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("doc", pa.int64())] + _segment_fields() + [("shard", pa.int64())])


def _pairs_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("i", pa.int64()), ("j", pa.int64())]
        + [(f"s_{name}", pa.int8()) for name in STRATEGIES]
        + [("same_doc", pa.int8()), ("probed", pa.int8())]
        + [(name, pa.float32()) for name in PROBABILITY_COLUMNS]
    )


def _scored_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("score", pa.float64()), ("i", pa.int64()), ("j", pa.int64()), ("finding", pa.string())])


def _pairs_table(pairs: numpy.ndarray, strategy: str, same_doc: numpy.ndarray,
                 probabilities: Optional[Tuple[numpy.ndarray, numpy.ndarray]] = None) -> Any:
    """Rows of the pairs schema for (k, 2) pairs proposed by one strategy."""
    import pyarrow as pa

    k = len(pairs)
    columns: Dict[str, Any] = {"i": pa.array(pairs[:, 0], pa.int64()), "j": pa.array(pairs[:, 1], pa.int64())}
    for name in STRATEGIES:
        columns[f"s_{name}"] = pa.array(numpy.full(k, int(name == strategy), dtype=numpy.int8))
    columns["same_doc"] = pa.array(same_doc.astype(numpy.int8))
    columns["probed"] = pa.array(numpy.full(k, int(probabilities is not None), dtype=numpy.int8))
    for n, name in enumerate(PROBABILITY_COLUMNS):
        if probabilities is None:
            columns[name] = pa.nulls(k, pa.float32())
        else:
            columns[name] = pa.array(probabilities[n // 3][:, n % 3].astype(numpy.float32))
    return pa.table(columns, schema=_pairs_schema())


# ---------------------------------------------------------------------------
# Actors and tasks


class UnitActor:
    """Splits input shards into statement units, as `find_contradictions` does.

    Per unit it keeps its text and char offsets (`unit_record`), its record's id
    and source label, and what the later stages need: content words (lexical
    overlap), the sentence embedding of `embedding_neighbours`' encoder, the
    alignment facts of the learned pair score (all units of the shard read at
    once, pronoun subjects resolved within each record, as JSON).

    make_pipeline (Callable[..., Language]): Builds the pipeline (module-level, so that it pickles).
    settings (Dict[str, Any]): Keyword arguments of `make_pipeline`.
    output_dir (str): The run's output folder.
    with_terms (bool): Keep each unit's content words (for lexical overlap).
    with_vectors (bool): Keep each unit's sentence embedding (for neighbours).
    encoder_device (str): Device of the sentence encoder.
    """

    def __init__(self, make_pipeline: Callable[..., Any], settings: Dict[str, Any], output_dir: str,
                 with_terms: bool, with_vectors: bool, encoder_device: str = "cpu") -> None:
        from .compare import get_detector

        started = time.perf_counter()
        self.nlp = make_pipeline(**settings)
        self.detector = get_detector(self.nlp)
        self.uses_alignment = self.detector.pair_settings().uses_alignment
        self.output_dir = Path(output_dir)
        self.with_terms = with_terms
        self.encoder = None
        if with_vectors:
            from .backends.embeddings import SentenceEncoder

            self.encoder = SentenceEncoder(device=encoder_device)
        logger.info("unit actor ready in %.1fs (pid %d)", time.perf_counter() - started, os.getpid())

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        rows = [self.process_shard(int(item["shard"])) for item in batch.to_pylist()]
        return pa.Table.from_pylist(rows)

    def _docs(self, texts: List[str]) -> Tuple[List[Any], List[Optional[str]]]:
        """The prepared Docs of `texts`, or the error of each one that fails."""
        from .compare import _prepare

        try:
            return _prepare(self.nlp, texts, self.detector), [None] * len(texts)
        except Exception as err:  # a bad record must not take its shard with it
            logger.warning("shard batch failed (%s); processing its records one by one", err)
        docs, errors = [], []
        for text in texts:
            try:
                docs.append(_prepare(self.nlp, [text], self.detector)[0])
                errors.append(None)
            except Exception as err:
                docs.append(None)
                errors.append(f"segmentation failed: {type(err).__name__}: {err}")
        return docs, errors

    def process_shard(self, shard: int) -> Dict[str, Any]:
        """The units and the record list of one input shard, and its counts.

        shard (int): The input shard's number.
        RETURNS (Dict[str, Any]): `shard`, `records`, `documents`, `units`, `errors`,
            `warnings`, `unit_table` (the units with their positions in the shard, an
            Arrow stream) and `record_lines` (one JSON line per record, in order).
        """
        import pyarrow as pa

        from .candidates import _content_terms
        from .compare import _units
        from .extensions import unit_record
        from .pair_scoring import unit_alignment

        path = part_path(self.output_dir, INPUT_DIR, shard, ".jsonl")
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        limit = self.nlp.max_length
        for record in records:
            if record["error"] is None and len(record["text"]) > limit:
                record["error"] = f"text of {len(record['text']):,} characters is longer than the limit of {limit:,}"
        todo = [k for k, r in enumerate(records) if r["error"] is None]
        docs, errors = self._docs([records[k]["text"] for k in todo])
        doc_of = dict(zip(todo, docs))
        for k, error in zip(todo, errors):
            records[k]["error"] = error
        rows: List[Dict[str, Any]] = []
        spans = []
        lines = []
        n_docs = 0
        lemmas: Dict[int, bool] = {}
        for k, record in enumerate(records):
            line: Dict[str, Any] = {"id": record["id"], "source": record["source"], "line": record["line"]}
            if record["error"] is not None:
                line["error"] = record["error"]
            else:
                doc = doc_of[k]
                units = _units(doc, self.detector)
                if id(doc) not in lemmas:
                    lemmas[id(doc)] = doc.has_annotation("LEMMA")
                for unit in units:
                    row = unit_record(unit)
                    row.update({
                        "local": len(rows), "local_doc": n_docs, "record": record["id"], "source": record["label"],
                        "terms": sorted(set(_content_terms(unit, lemmas[id(doc)]))) if self.with_terms else None,
                        "vector": None, "facts": None,
                    })
                    rows.append(row)
                    spans.append(unit)
                line["n_units"] = len(units)
                n_docs += 1
            if record["warnings"]:
                line["warnings"] = record["warnings"]
            lines.append(json.dumps(line, ensure_ascii=False))
        if spans and self.uses_alignment:
            # All units of the shard at once: Docs stay apart (pronoun subjects are
            # resolved within each Doc), and the parser sees one stream.
            facts = unit_alignment(spans)
            if facts is not None:
                for row, f in zip(rows, facts):
                    row["facts"] = facts_to_json(f)
        if spans and self.encoder is not None:
            vectors = self.encoder.encode([u.text.strip() for u in spans])
            for row, vector in zip(rows, vectors):
                row["vector"] = vector.tolist()
        summary = {
            "shard": shard, "records": len(records), "documents": n_docs, "units": len(rows),
            "errors": sum(r["error"] is not None for r in records),
            "warnings": sum(bool(r["warnings"]) for r in records),
        }
        # The driver writes the shard (it knows the units before it): the units as an
        # Arrow stream, the record lines as text.
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, _segments_schema()) as writer:
            writer.write_table(pa.Table.from_pylist(rows, schema=_segments_schema()))
        return {**summary, "unit_table": sink.getvalue().to_pybytes(), "record_lines": "\n".join(lines)}


def _numbered_units(table: Any, *, shard: int, unit_offset: int, doc_offset: int) -> Any:
    """A shard's units with their global ids and document indices."""
    import pyarrow as pa

    local = table.column("local").to_numpy()
    if not numpy.array_equal(local, numpy.arange(len(table))):  # pragma: no cover - a bug above
        raise RuntimeError(f"the units of shard {shard} are out of order")
    columns = {
        "id": pa.array(unit_offset + local, pa.int64()),
        "doc": pa.array(doc_offset + table.column("local_doc").to_numpy(), pa.int64()),
    }
    for name, _ in _segment_fields():
        columns[name] = table.column(name)
    columns["shard"] = pa.array(numpy.full(len(table), shard, dtype=numpy.int64))
    return pa.table(columns, schema=_units_schema())


class CandidateActor:
    """Proposes candidate pairs for row ranges of the units table.

    The indexes a strategy needs (the embeddings in a faiss or exact index, the
    tf-idf matrix of content words, the probe permutations) are built once per
    actor from the units table, on first use.

    output_dir (str): The run's output folder.
    n_units (int): Units in the table.
    neighbours (int): Embedding neighbours per unit.
    lexical (int): Lexical-overlap partners per unit.
    probes (int): Probe partners per unit (`contradiction_hubs`).
    hubs (List[int]): The hub units (paired with every unit).
    """

    def __init__(self, output_dir: str, n_units: int, neighbours: int = 0, lexical: int = 0, probes: int = 0,
                 hubs: Optional[List[int]] = None) -> None:
        self.output_dir = Path(output_dir)
        self.n = n_units
        self.neighbours = neighbours
        self.lexical = lexical
        self.probes = probes
        self.hubs = numpy.asarray(hubs or [], dtype=numpy.int64)
        self._doc: Optional[numpy.ndarray] = None
        self._vectors: Optional[numpy.ndarray] = None
        self._ann: Any = None
        self._lexical: Any = None
        self._partners: Optional[numpy.ndarray] = None

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        tables = [self.pairs(item["kind"], int(item["start"]), int(item["end"])) for item in batch.to_pylist()]
        return pa.concat_tables(tables)

    @property
    def doc(self) -> numpy.ndarray:
        if self._doc is None:
            self._doc = read_units(self.output_dir, ["doc"]).column("doc").to_numpy()
        return self._doc

    def pairs(self, kind: str, start: int, end: int) -> Any:
        """The pairs one strategy proposes for the units start..end-1 (as first unit), i < j.

        kind (str): "all", "neighbours", "lexical", "probes" or "hub_rows".
        start (int): First unit of the range.
        end (int): End of the range.
        RETURNS (pyarrow.Table): Rows of the pairs schema.
        """
        if kind == "all":
            pairs, strategy = _all_pairs_rows(self.n, start, end), "all"
        elif kind == "neighbours":
            pairs, strategy = self._neighbour_rows(start, end), "neighbours"
        elif kind == "lexical":
            pairs, strategy = self._lexical_rows(start, end), "lexical"
        elif kind == "probes":
            pairs, strategy = self._probe_rows(start, end), "hubs"
        elif kind == "hub_rows":
            units = numpy.arange(start, end, dtype=numpy.int64)
            rows = numpy.stack([numpy.repeat(self.hubs, len(units)), numpy.tile(units, len(self.hubs))], axis=1)
            pairs, strategy = numpy.sort(rows[rows[:, 0] != rows[:, 1]], axis=1), "hubs"
        else:  # pragma: no cover - the driver makes the items
            raise ValueError(f"unknown candidate kind {kind!r}")
        pairs = numpy.asarray(pairs, dtype=numpy.int64).reshape(-1, 2)
        same = self.doc[pairs[:, 0]] == self.doc[pairs[:, 1]] if len(pairs) else numpy.zeros(0, dtype=bool)
        return _pairs_table(pairs, strategy, same)

    def _neighbour_rows(self, start: int, end: int) -> numpy.ndarray:
        """`embedding_neighbours`: each unit with its k nearest, as `nearest_neighbours` finds them."""
        from .backends.embeddings import block_rows

        if self._vectors is None:
            column = read_units(self.output_dir, ["vector"]).column("vector").combine_chunks()
            flat = column.flatten().to_numpy(zero_copy_only=False).astype(numpy.float32)
            self._vectors = flat.reshape(len(column), -1) if len(column) else numpy.zeros((0, 1), numpy.float32)
        vectors = self._vectors
        n = len(vectors)
        k = min(self.neighbours, n - 1)
        if k <= 0:
            return numpy.zeros((0, 2), dtype=numpy.int64)
        if n >= ANN_MIN_SIZE:
            found = self._ann_rows(start, end, k)
        else:
            # The blocks of `exact_neighbours` (the ranges start on its block
            # boundaries), so that every row sees the same arithmetic.
            block = block_rows(n)
            parts = []
            for s in range(start, end, block):
                sims = vectors[s : min(s + block, end)] @ vectors.T
                rows = numpy.arange(len(sims))
                sims[rows, rows + s] = -numpy.inf
                part = numpy.argpartition(-sims, k - 1, axis=1)[:, :k]
                order = numpy.argsort(-numpy.take_along_axis(sims, part, axis=1), axis=1, kind="stable")
                parts.append(numpy.take_along_axis(part, order, axis=1))
            found = numpy.concatenate(parts)
        i = numpy.repeat(numpy.arange(start, end), found.shape[1])
        j = found.reshape(-1)
        keep = (j >= 0) & (j != i)
        return numpy.sort(numpy.stack([i[keep], j[keep]], axis=1), axis=1)

    def _ann_rows(self, start: int, end: int, k: int, *, m: int = 32, ef_construction: int = 200,
                  ef_search: int = 128) -> numpy.ndarray:
        """`ann_neighbours` for a range of rows: the same HNSW index, searched for these rows."""
        try:
            import faiss
        except ImportError as err:
            raise ImportError(Errors.E181) from err
        vectors = self._vectors
        if self._ann is None:
            index = faiss.IndexHNSWFlat(vectors.shape[1], m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = ef_construction
            index.hnsw.efSearch = max(ef_search, k + 1)
            index.add(numpy.ascontiguousarray(vectors, dtype=numpy.float32))
            self._ann = index
        _, found = self._ann.search(numpy.ascontiguousarray(vectors[start:end], dtype=numpy.float32), k + 1)
        out = numpy.full((end - start, k), -1, dtype=numpy.int64)
        for r, row in enumerate(range(start, end)):
            hits = [j for j in found[r].tolist() if j != row and j >= 0][:k]
            out[r, : len(hits)] = hits
        return out

    def _lexical_rows(self, start: int, end: int) -> numpy.ndarray:
        """`lexical_overlap`: each unit with the k sharing the most rare content words (tf-idf cosine)."""
        from .candidates import TermIndex

        if self._lexical is None:
            terms = read_units(self.output_dir, ["terms"]).column("terms").to_pylist()
            self._lexical = TermIndex([t or () for t in terms], max_df=LEXICAL_MAX_DF)
        return self._lexical.partners(start, end, k=self.lexical, min_shared=LEXICAL_MIN_SHARED)[0]

    def _probe_rows(self, start: int, end: int) -> numpy.ndarray:
        """`ContradictionHubs.probe_pairs` for the units start..end-1 (the same seeded partners)."""
        n = self.n
        if self.probes >= n - 1:
            return _all_pairs_rows(n, start, end)
        if self._partners is None:
            rng = numpy.random.default_rng(HUB_SEED)
            self._partners = numpy.stack([rng.permutation(n) for _ in range(self.probes)], axis=1)
        i = numpy.repeat(numpy.arange(start, end), self.probes)
        j = self._partners[start:end].ravel()
        pairs = numpy.stack([i, j], axis=1)
        return numpy.sort(pairs[i != j], axis=1)


def _candidate_task(batch: Any, **settings: Any) -> Any:
    """`CandidateActor`'s pairs in a task, for the strategies that build no index."""
    return CandidateActor(**settings)(batch)


def _all_pairs_rows(n: int, start: int, end: int) -> numpy.ndarray:
    """Every pair (i, j), i < j, with i in start..end-1."""
    rows = numpy.arange(start, min(end, n), dtype=numpy.int64)
    counts = n - 1 - rows
    total = int(counts.sum())
    if total <= 0:
        return numpy.zeros((0, 2), dtype=numpy.int64)
    i = numpy.repeat(rows, counts)
    first = numpy.cumsum(counts) - counts
    j = numpy.arange(total, dtype=numpy.int64) - numpy.repeat(first, counts) + numpy.repeat(rows + 1, counts)
    return numpy.stack([i, j], axis=1)


class PairScoringActor:
    """Scores batches of pairs with the detector's first NLI model, as `find_contradictions` does.

    mode "probes" returns both directions' label probabilities of each pair
    (the probe scores of `contradiction_hubs`); mode "findings" returns the
    pairs whose score reaches the detector's threshold, each with its finding
    record as `across` writes it.

    make_pipeline (Callable[..., Language]): Builds the pipeline.
    settings (Dict[str, Any]): Keyword arguments of `make_pipeline`.
    output_dir (str): The run's output folder (the units table is read from it).
    mode (str): "probes" or "findings".
    within_docs (bool): Score pairs of units of the same record ("findings" mode).
    chunk_size (int): Pairs sent to the model at once.
    """

    def __init__(self, make_pipeline: Callable[..., Any], settings: Dict[str, Any], output_dir: str, mode: str,
                 within_docs: bool = True, chunk_size: int = 4096) -> None:
        from .alignment import language_supported
        from .compare import get_detector

        started = time.perf_counter()
        self.nlp = make_pipeline(**settings)
        self.settings = get_detector(self.nlp).pair_settings()
        self.mode = mode
        self.within_docs = within_docs
        self.chunk_size = chunk_size
        # `unit_alignment` gives no facts for a language without alignment features.
        self.uses_facts = self.settings.uses_alignment and language_supported(self.nlp.lang)
        columns = ["text", "doc"]
        if mode == "findings":
            columns += ["start_char", "end_char", "speaker", "source", "record"] + (["facts"] if self.uses_facts else [])
        self.units = read_units(Path(output_dir), columns)
        logger.info("scoring actor ready in %.1fs (pid %d)", time.perf_counter() - started, os.getpid())

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        pairs = numpy.stack([batch.column("i").to_numpy(), batch.column("j").to_numpy()], axis=1).astype(numpy.int64)
        if self.mode == "probes":
            return self.probe(pairs)
        keep = numpy.ones(len(pairs), dtype=bool)
        if not self.within_docs:
            keep = batch.column("same_doc").to_numpy() == 0
        known = batch.column("probed").to_numpy()[keep] == 1
        probabilities = [batch.column(c).to_numpy(zero_copy_only=False)[keep] for c in PROBABILITY_COLUMNS]
        rows = self.score(pairs[keep], known, numpy.stack(probabilities[:3], axis=1),
                          numpy.stack(probabilities[3:], axis=1))
        return pa.Table.from_pylist(rows, schema=_scored_schema())

    def _local(self, pairs: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray, List[str]]:
        units, inverse = numpy.unique(pairs.reshape(-1), return_inverse=True)
        texts = [t.strip() for t in self.units.column("text").take(units).to_pylist()]
        return units, inverse.reshape(-1, 2), texts

    def probe(self, pairs: numpy.ndarray) -> Any:
        """Both directions' probabilities of the pairs (as `ProbeScores` gets them)."""
        from .pair_scoring import nli_probabilities

        if not len(pairs):
            return _pairs_schema().empty_table()
        _, local, texts = self._local(pairs)
        forward, backward = nli_probabilities(self.settings.model, texts, local, chunk_size=self.chunk_size)
        doc = self.units.column("doc").to_numpy()
        return _pairs_table(pairs, "hubs", doc[pairs[:, 0]] == doc[pairs[:, 1]], (forward, backward))

    def score(self, pairs: numpy.ndarray, known: numpy.ndarray, forward: numpy.ndarray,
              backward: numpy.ndarray) -> List[Dict[str, Any]]:
        """The findings among `pairs`: rows with `score`, `i`, `j` and `finding` (JSON).

        pairs (numpy.ndarray): int64, (k, 2), global unit ids, i < j.
        known (numpy.ndarray): bool, (k,): pairs whose probabilities the probes gave.
        forward (numpy.ndarray): float32, (k, 3): those probabilities, unit i as premise.
        backward (numpy.ndarray): float32, (k, 3): the other direction.
        RETURNS (List[Dict[str, Any]]): One row per pair at or above the threshold.
        """
        from .pair_scoring import ProbeScores, pair_finding, score_pairs

        if not len(pairs):
            return []
        settings = self.settings
        units, local, texts = self._local(pairs)
        probed = None
        if known.any():
            # What `find_contradictions` reuses from the probes, keyed as `ProbeScores` keys them.
            probed = ProbeScores(settings.model, texts, chunk_size=self.chunk_size)
            keys = local[known, 0] * len(texts) + local[known, 1]
            order = numpy.argsort(keys, kind="stable")
            probed.keys = keys[order]
            probed.forward = forward[known][order].astype(numpy.float32)
            probed.backward = backward[known][order].astype(numpy.float32)
        facts = None
        if self.uses_facts:
            facts = [facts_from_json(f) for f in self.units.column("facts").take(units).to_pylist()]
            if any(f is None for f in facts):  # pragma: no cover - the units stage writes them all
                raise RuntimeError("a unit of the units table has no alignment facts")
        cut = settings.threshold
        scores = score_pairs(
            settings.model, texts, local, probed=probed, aggregation=settings.aggregation, threshold=cut,
            chunk_size=self.chunk_size, pair_scorer=settings.pair_scorer, facts=facts,
        )
        kept = numpy.flatnonzero(scores.score >= cut)
        if not len(kept):
            return []
        needed = numpy.unique(pairs[kept].reshape(-1))
        meta = self.units.take(needed).to_pylist()
        where = {int(u): m for u, m in zip(needed.tolist(), meta)}
        rows = []
        for k in kept.tolist():
            i, j = pairs[k].tolist()
            finding = pair_finding(scores, k, [_unit_record(where[u]) for u in (i, j)])
            rows.append({"score": float(scores.score[k]), "i": i, "j": j,
                         "finding": json.dumps(finding, ensure_ascii=False)})
        return rows


def _unit_record(unit: Dict[str, Any]) -> Dict[str, Any]:
    """A unit of a finding, keys as `across` writes them (`unit_record`, then source, doc, id)."""
    return {
        "start_char": unit["start_char"], "end_char": unit["end_char"], "text": unit["text"],
        "speaker": unit["speaker"], "source": unit["source"], "doc": unit["doc"], "id": unit["record"],
    }


def _probe_contributions(batch: Any) -> Any:
    """Each probe pair as two rows (unit, its mean P(contradiction) both ways, 1)."""
    import pyarrow as pa

    i = batch.column("i").to_numpy()
    j = batch.column("j").to_numpy()
    both = (batch.column("f2").to_numpy().astype(numpy.float64) + batch.column("b2").to_numpy().astype(numpy.float64)) / 2
    return pa.table({"unit": numpy.concatenate([i, j]), "both": numpy.concatenate([both, both]),
                     "count": numpy.ones(2 * len(i), dtype=numpy.int64)})


def _no_contributions(batch: Any) -> Any:
    """Every unit once with nothing, so that a unit without probe pairs has propensity 0."""
    import pyarrow as pa

    unit = batch.column("id").to_numpy().astype(numpy.int64)
    return pa.table({"unit": unit, "both": numpy.zeros(len(unit)), "count": numpy.zeros(len(unit), dtype=numpy.int64)})


def _ranked(unit: numpy.ndarray, propensity: numpy.ndarray) -> numpy.ndarray:
    """Positions by propensity, highest first, ties by unit (as `argsort(-propensity, kind="stable")`)."""
    return numpy.lexsort((unit, -propensity))


def _best_propensity(batch: Any, *, k: int) -> Any:
    """The k units of a block with the highest mean P(contradiction) over their probe pairs."""
    import pyarrow as pa

    unit = batch.column("unit").to_numpy()
    total = batch.column("sum(both)").to_numpy()
    count = batch.column("sum(count)").to_numpy()
    propensity = total / numpy.maximum(count, 1)
    best = _ranked(unit, propensity)[:k]
    return pa.table({"unit": unit[best], "propensity": propensity[best]})


# ---------------------------------------------------------------------------
# The run


def _column_sums(folder: Path, columns: List[str]) -> Dict[str, int]:
    """Sums of small integer columns of a Parquet folder, read a batch at a time."""
    import pyarrow.parquet as pq

    sums = {c: 0 for c in columns}
    for path in _parquet_files(folder):
        for batch in pq.ParquetFile(path).iter_batches(columns=columns, batch_size=1 << 16):
            for c in columns:
                sums[c] += int(batch.column(c).to_numpy(zero_copy_only=False).sum(dtype=numpy.int64))
    return sums


def _ranges(n: int, size: int) -> List[Tuple[int, int]]:
    size = max(1, size)
    return [(s, min(s + size, n)) for s in range(0, n, size)]


class _AcrossRun:
    """The stages of one `across_files` call (see the module docstring)."""

    def __init__(self, paths: List[Path], output_dir: Path, run: Dict[str, Any], *, make_pipeline: Callable[..., Any],
                 pipeline_settings: Dict[str, Any], text_field: str, source_field: Optional[str], within_docs: bool,
                 neighbours: int, lexical: int, hubs: float, probes: int, max_hubs: Optional[int], shard_size: int,
                 num_actors: int, batch_size: int, num_cpus_per_actor: float, num_gpus_per_actor: float,
                 max_restarts: int, max_task_retries: int, address: Optional[str], num_cpus: Optional[int],
                 on_stage_done: Optional[Callable[[str, Dict[str, Any]], None]]) -> None:
        self.paths = paths
        self.out = output_dir
        self.run = run
        self.make_pipeline = make_pipeline
        self.pipeline_settings = dict(pipeline_settings)
        self.text_field = text_field
        self.source_field = source_field
        self.within_docs = within_docs
        self.neighbours = neighbours
        self.lexical = lexical
        self.hubs = hubs
        self.probes = probes
        self.max_hubs = max_hubs
        self.shard_size = shard_size
        self.num_actors = num_actors
        self.batch_size = batch_size
        self.num_cpus_per_actor = num_cpus_per_actor
        self.num_gpus_per_actor = num_gpus_per_actor
        self.max_restarts = max_restarts
        self.max_task_retries = max_task_retries
        self.address = address
        self.num_cpus = num_cpus
        self.on_stage_done = on_stage_done
        self.counts: Dict[str, Dict[str, Any]] = {}
        self.ray: Any = None

    # -- helpers

    def _ray(self) -> Any:
        if self.ray is None:
            self.ray = init_ray(address=self.address, num_cpus=self.num_cpus)
        return self.ray

    def _actor_args(self, kwargs: Dict[str, Any], *, gpus: bool = True) -> Dict[str, Any]:
        ray = self._ray()
        return dict(
            fn_constructor_kwargs=kwargs,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=self.num_actors),
            num_cpus=self.num_cpus_per_actor,
            num_gpus=(self.num_gpus_per_actor or None) if gpus else None,
            max_restarts=self.max_restarts,
            max_task_retries=self.max_task_retries,
        )

    def _items(self, items: List[Dict[str, Any]]) -> Any:
        return self._ray().data.from_items(items, override_num_blocks=max(1, len(items)))

    def _stage_file(self, stage: str) -> Path:
        return self.out / STAGE_DIR / f"{stage}.json"

    def _candidate_kwargs(self, hubs: Optional[List[int]] = None) -> Dict[str, Any]:
        return {"output_dir": str(self.out), "n_units": self.counts["units"]["units"], "neighbours": self.neighbours,
                "lexical": self.lexical, "probes": self.probes, "hubs": hubs or []}

    def _scoring_kwargs(self, mode: str) -> Dict[str, Any]:
        return {"make_pipeline": self.make_pipeline, "settings": self.pipeline_settings, "output_dir": str(self.out),
                "mode": mode, "within_docs": self.within_docs, "chunk_size": self.batch_size}

    def _dedup(self, ds: Any) -> Any:
        """One row per pair: the strategies that proposed it, its probe probabilities if any."""
        from ray.data.aggregate import Max

        columns = [f"s_{s}" for s in STRATEGIES] + ["same_doc", "probed"] + list(PROBABILITY_COLUMNS)
        grouped = ds.groupby(["i", "j"]).aggregate(*[Max(c) for c in columns])
        return grouped.rename_columns({f"max({c})": c for c in columns})

    def _read(self, folder: str, columns: Optional[List[str]] = None) -> Any:
        # Named `num_cpus` and `select_columns`: Ray 2.64 removes the readers' `ray_remote_args`
        # and `columns=`. (write_parquet and the actors' max_restarts / max_task_retries have no
        # named replacement in Ray 2.60 and keep `ray_remote_args`.)
        ds = self._ray().data.read_parquet(str(self.out / folder), num_cpus=IO_TASK["num_cpus"])
        return ds.select_columns(columns) if columns is not None else ds

    def _write_dataset(self, ds: Any, folder: str) -> int:
        tmp = self.out / (folder + TMP_SUFFIX)
        if tmp.exists():
            shutil.rmtree(tmp)
        ds.write_parquet(str(tmp), ray_remote_args=IO_TASK)
        tmp.mkdir(exist_ok=True)  # an empty dataset writes no file
        _replace_folder(tmp, self.out / folder)
        return _parquet_rows(self.out / folder)

    # -- stages

    def stages(self) -> List[str]:
        return [s for s in STAGES if s != "probes" or self.hubs]

    def execute(self) -> Tuple[List[str], List[str]]:
        """Run the stages not done yet, in order. RETURNS: (stages skipped, stages run)."""
        (self.out / STAGE_DIR).mkdir(parents=True, exist_ok=True)
        skipped, done = [], []
        rerun = False
        for stage in self.stages():
            path = self._stage_file(stage)
            if path.exists() and not rerun:
                self.counts[stage] = json.loads(path.read_text(encoding="utf-8"))
                skipped.append(stage)
                continue
            # A stage run again makes every later one stale.
            rerun = True
            for later in STAGES[STAGES.index(stage):]:
                stale = self._stage_file(later)
                if stale.exists():
                    stale.unlink()
            started = time.perf_counter()
            counts = getattr(self, f"_stage_{stage}")()
            counts["seconds"] = round(time.perf_counter() - started, 3)
            self.counts[stage] = counts
            _write_atomically(path, [json.dumps(counts, indent=2, sort_keys=True)])
            done.append(stage)
            logger.info("stage %s done in %.1fs: %s", stage, counts["seconds"], counts)
            if self.on_stage_done is not None:
                self.on_stage_done(stage, counts)
        return skipped, done

    def _stage_inputs(self) -> Dict[str, Any]:
        """Stream the records into input shards; count the unreadable ones."""
        folder = _fresh_folder(self.out / INPUT_DIR)
        n = errors = missing = 0
        example = None
        shard: List[str] = []
        n_shards = 0
        for record in read_inputs(self.paths, text_field=self.text_field):
            label = None
            if record.error is not None:
                errors += 1
            elif self.source_field is None:
                label = record.id
            elif self.source_field in record.meta:
                label = str(record.meta[self.source_field])
            else:
                missing += 1
                example = example or record.id
            shard.append(json.dumps({
                "seq": n, "id": record.id, "source": record.source, "line": record.line, "text": record.text,
                "error": record.error, "warnings": list(record.warnings), "label": label,
            }, ensure_ascii=False))
            n += 1
            if len(shard) == self.shard_size:
                _write_atomically(folder / (PART.format(index=n_shards) + ".jsonl"), shard)
                n_shards += 1
                shard = []
        if shard:
            _write_atomically(folder / (PART.format(index=n_shards) + ".jsonl"), shard)
            n_shards += 1
        if missing:
            # Nothing of this run is kept, so that the same folder takes the corrected input.
            shutil.rmtree(folder)
            (self.out / RUN_FILE).unlink()
            raise ValueError(Errors.E244.format(n=missing, field=self.source_field, example=example))
        return {"records_in": n, "unreadable": errors, "input_shards": n_shards}

    def _stage_units(self) -> Dict[str, Any]:
        """The units of every shard, numbered in shard order (shards written by an earlier run are kept).

        Actors segment the shards; the driver takes their results in shard order,
        one shard at a time, gives the units their global ids and writes the shard.
        """
        n_shards = self.counts["inputs"]["input_shards"]
        for folder in (UNIT_DIR, RECORD_DIR):
            (self.out / folder).mkdir(exist_ok=True)
            for stale in (self.out / folder).glob("*" + TMP_SUFFIX):
                stale.unlink()
        done = {i for i in range(n_shards) if part_path(self.out, UNIT_DIR, i, ".json").exists()}
        results: Iterator[Dict[str, Any]] = iter(())
        if len(done) < n_shards:
            kwargs = {"make_pipeline": self.make_pipeline, "settings": self.pipeline_settings, "output_dir": str(self.out),
                      "with_terms": bool(self.lexical), "with_vectors": bool(self.neighbours),
                      "encoder_device": "cuda" if self.num_gpus_per_actor else "cpu"}
            ds = self._items([{"shard": i} for i in range(n_shards) if i not in done]).map_batches(
                UnitActor, batch_size=1, **self._actor_args(kwargs))
            results = (row for batch in ds.iter_batches(batch_format="pyarrow", batch_size=1)
                       for row in batch.to_pylist())
        totals = {"records": 0, "documents": 0, "units": 0, "errors": 0, "warnings": 0}
        for i in range(n_shards):
            if i in done:
                summary = json.loads(part_path(self.out, UNIT_DIR, i, ".json").read_text(encoding="utf-8"))
            else:
                summary = self._write_shard(next(results), unit_offset=totals["units"], doc_offset=totals["documents"])
                if summary["shard"] != i:  # pragma: no cover - Ray Data keeps the order
                    raise RuntimeError(f"expected the units of shard {i}, got shard {summary['shard']}")
            for key in totals:
                totals[key] += summary[key]
        totals.update({"shards_written": n_shards - len(done), "shards_kept": len(done)})
        written = _parquet_rows(self.out / UNIT_DIR)
        if written != totals["units"]:  # pragma: no cover - a bug above
            raise RuntimeError(Errors.E245.format(path=self.out / UNIT_DIR, n=totals["units"]))
        return totals

    def _write_shard(self, result: Dict[str, Any], *, unit_offset: int, doc_offset: int) -> Dict[str, Any]:
        import pyarrow as pa

        shard = int(result["shard"])
        with pa.ipc.open_stream(result["unit_table"]) as reader:
            table = reader.read_all()
        units = _numbered_units(table, shard=shard, unit_offset=unit_offset, doc_offset=doc_offset)
        _write_parquet_atomically(units, part_path(self.out, UNIT_DIR, shard, ".parquet"))
        lines = result["record_lines"].split("\n") if result["record_lines"] else []
        _write_atomically(part_path(self.out, RECORD_DIR, shard, ".jsonl"), lines)
        summary = {k: result[k] for k in ("shard", "records", "documents", "units", "errors", "warnings")}
        # Written last: the shard counts as done once it exists.
        _write_atomically(part_path(self.out, UNIT_DIR, shard, ".json"), [json.dumps(summary)])
        return summary

    def _stage_probes(self) -> Dict[str, Any]:
        """`contradiction_hubs`' probe pairs scored, and its hubs (the most contradiction-prone units)."""
        from ray.data.aggregate import Sum

        from .candidates import ContradictionHubs

        ray = self._ray()
        n = self.counts["units"]["units"]
        strategy = ContradictionHubs(probes=self.probes, hub_share=self.hubs, max_hubs=self.max_hubs, seed=HUB_SEED)
        n_hubs = strategy.n_hubs(n) if n >= 2 else 0
        items = [{"kind": "probes", "start": s, "end": e} for s, e in _ranges(n, PAIRS_PER_TASK // max(self.probes, 1))]
        if n < 2:
            items = []
        if not items:
            _fresh_folder(self.out / PROBE_DIR)
            return {"probe_pairs": 0, "hubs": [], "n_hubs": 0}
        probes = self._items(items).map_batches(_candidate_task, batch_size=1, batch_format="pyarrow",
                                                 fn_kwargs=self._candidate_kwargs())
        # Materialised apart from the scoring pool, which would hold the CPUs the tasks need.
        scored = self._dedup(probes).materialize().map_batches(
            PairScoringActor, batch_size=self.batch_size, **self._actor_args(self._scoring_kwargs("probes")))
        n_probes = self._write_dataset(scored, PROBE_DIR)
        contributions = self._read(PROBE_DIR, columns=["i", "j", "f2", "b2"]).map_batches(
            _probe_contributions, batch_format="pyarrow")
        everyone = ray.data.range(n).map_batches(_no_contributions, batch_format="pyarrow")
        # Each block's best n_hubs; the driver picks the best of those (blocks x n_hubs rows).
        best = (contributions.union(everyone).groupby("unit").aggregate(Sum("both"), Sum("count"))
                .map_batches(_best_propensity, batch_format="pyarrow", fn_kwargs={"k": n_hubs})).take_all()
        unit = numpy.asarray([r["unit"] for r in best], dtype=numpy.int64)
        propensity = numpy.asarray([r["propensity"] for r in best], dtype=numpy.float64)
        top = unit[_ranked(unit, propensity)[:n_hubs]]
        return {"probe_pairs": n_probes, "hubs": top.tolist(), "n_hubs": n_hubs}

    def _stage_pairs(self) -> Dict[str, Any]:
        """The candidate pairs of every strategy, unioned and de-duplicated by Ray Data."""
        from .backends.embeddings import block_rows

        n = self.counts["units"]["units"]
        items: List[Dict[str, Any]] = []
        if n >= 2:
            if not (self.neighbours or self.lexical or self.hubs):
                total = n * (n - 1) // 2
                if total > 100_000:
                    warnings.warn(Warnings.W142.format(n=total, units=n))
                start = budget = 0
                for i in range(n):
                    budget += n - 1 - i
                    if budget >= PAIRS_PER_TASK:
                        items.append({"kind": "all", "start": start, "end": i + 1})
                        start, budget = i + 1, 0
                if start < n:
                    items.append({"kind": "all", "start": start, "end": n})
            # Ranges on the blocks of the local strategies, several blocks per task.
            block = block_rows(n)
            for kind, k in (("neighbours", self.neighbours), ("lexical", self.lexical)):
                if k:
                    blocks = min(math.ceil(n / block / (4 * self.num_actors)), (PAIRS_PER_TASK // k) // block)
                    items.extend({"kind": kind, "start": s, "end": e} for s, e in _ranges(n, block * max(1, blocks)))
        hubs = self.counts.get("probes", {}).get("hubs", [])
        if hubs:
            items.extend({"kind": "hub_rows", "start": s, "end": e}
                         for s, e in _ranges(n, max(1, PAIRS_PER_TASK // len(hubs))))
        parts = []
        # Neighbours and lexical overlap in actors (each builds its index once);
        # all pairs and hub rows need no index, so tasks propose them.
        indexed = [item for item in items if item["kind"] in ("neighbours", "lexical")]
        plain = [item for item in items if item["kind"] not in ("neighbours", "lexical")]
        if indexed:
            parts.append(self._items(indexed).map_batches(
                CandidateActor, batch_size=1, **self._actor_args(self._candidate_kwargs(hubs), gpus=False)))
        if plain:
            parts.append(self._items(plain).map_batches(_candidate_task, batch_size=1, batch_format="pyarrow",
                                                        fn_kwargs=self._candidate_kwargs(hubs)))
        if self.hubs and _parquet_files(self.out / PROBE_DIR):
            parts.append(self._read(PROBE_DIR).materialize())
        if not parts:
            _fresh_folder(self.out / PAIR_DIR)
            n_pairs = 0
        else:
            ds = parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])
            n_pairs = self._write_dataset(self._dedup(ds), PAIR_DIR)
        sums = _column_sums(self.out / PAIR_DIR, [f"s_{s}" for s in STRATEGIES] + ["same_doc", "probed"])
        return {
            "candidates": {s: sums[f"s_{s}"] for s in STRATEGIES},
            "candidate_pairs": n_pairs,
            "same_doc_pairs": sums["same_doc"],
            "from_probes": sums["probed"],
            "pairs_to_score": n_pairs if self.within_docs else n_pairs - sums["same_doc"],
        }

    def _stage_scored(self) -> Dict[str, Any]:
        """Every candidate pair scored; those at or above the threshold kept."""
        if not self.counts["pairs"]["candidate_pairs"]:
            _fresh_folder(self.out / SCORED_DIR)
            return {"findings": 0}
        ds = self._read(PAIR_DIR).materialize().map_batches(
            PairScoringActor, batch_size=self.batch_size,
            **self._actor_args(self._scoring_kwargs("findings")))
        return {"findings": self._write_dataset(ds, SCORED_DIR)}

    def _stage_findings(self) -> Dict[str, Any]:
        """The findings, highest score first (ties by pair), streamed into JSONL shards."""
        folder = _fresh_folder(self.out / FINDING_DIR)
        written = shards = 0
        if self.counts["scored"]["findings"]:
            ds = self._read(SCORED_DIR)
            ordered = ds.sort(["score", "i", "j"], descending=[True, False, False])
            lines: List[str] = []
            for batch in ordered.iter_batches(batch_format="pyarrow", batch_size=None):
                for line in batch.column("finding").to_pylist():
                    lines.append(line)
                    if len(lines) == FINDINGS_PER_SHARD:
                        _write_atomically(folder / (PART.format(index=shards) + ".jsonl"), lines)
                        written += len(lines)
                        shards += 1
                        lines = []
            if lines:
                _write_atomically(folder / (PART.format(index=shards) + ".jsonl"), lines)
                written += len(lines)
                shards += 1
        return {"findings": written, "finding_shards": shards}

    # -- manifest

    def manifest(self, skipped: List[str], done: List[str], seconds: float) -> Dict[str, Any]:
        """Counts read back from the files, so that they say what is there."""
        records = errors = warned = 0
        for i in range(self.counts["inputs"]["input_shards"]):
            with part_path(self.out, RECORD_DIR, i, ".jsonl").open(encoding="utf-8") as f:
                for line in f:
                    record = json.loads(line)
                    records += 1
                    errors += "error" in record
                    warned += "warnings" in record
        units = _parquet_rows(self.out / UNIT_DIR)
        finding_files = sorted((self.out / FINDING_DIR).glob("part-*.jsonl"))
        findings = 0
        digest = hashlib.sha256()
        for path in finding_files:
            data = path.read_bytes()
            digest.update(data)
            findings += data.count(b"\n")
        pairs = self.counts["pairs"]
        complete = (
            all(self._stage_file(s).exists() for s in self.stages())
            and records == self.counts["inputs"]["records_in"]
            and records - errors == self.counts["units"]["documents"]
            and units == self.counts["units"]["units"]
            and findings == self.counts["scored"]["findings"]
        )
        try:
            import ray

            version = ray.__version__
        except ImportError:  # pragma: no cover
            version = None
        return {
            "records_in": self.counts["inputs"]["records_in"],
            "records_out": records,
            "errors": errors,
            "warnings": warned,
            "documents": self.counts["units"]["documents"],
            "units": units,
            "probe_pairs": self.counts.get("probes", {}).get("probe_pairs", 0),
            "hubs": self.counts.get("probes", {}).get("hubs", []),
            "candidates": pairs["candidates"],
            "candidate_pairs": pairs["candidate_pairs"],
            "pairs_scored": pairs["pairs_to_score"],
            "pairs_from_probes": pairs["from_probes"],
            "findings": findings,
            "finding_files": [str(p.relative_to(self.out)) for p in finding_files],
            "complete": complete,
            "stages": {s: self.counts[s] for s in self.stages()},
            "stages_skipped": skipped,
            "stages_run": done,
            "seconds": round(seconds, 3),
            "config": self.run,
            "ray_version": version,
            "digest": digest.hexdigest(),
        }


def across_files(
    inputs: Sequence[Path],
    output_dir: Path,
    *,
    make_pipeline: Callable[..., Any],
    pipeline_settings: Dict[str, Any],
    text_field: str = "text",
    source_field: Optional[str] = None,
    within_docs: bool = True,
    neighbours: int = 0,
    lexical: int = 0,
    hubs: float = 0.0,
    probes: int = 8,
    max_hubs: Optional[int] = 100,
    shard_size: int = 1000,
    num_actors: int = 1,
    batch_size: int = 1024,
    num_cpus_per_actor: float = 1.0,
    num_gpus_per_actor: float = 0.0,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    max_task_retries: int = DEFAULT_MAX_TASK_RETRIES,
    address: Optional[str] = None,
    num_cpus: Optional[int] = None,
    progress: bool = False,
    on_stage_done: Optional[Callable[[str, Dict[str, Any]], None]] = None,
) -> Dict[str, Any]:
    """Contradictions among the statements of all inputs, as `across` finds them, on Ray.

    The same units, candidate pairs and scores as `find_contradictions` over
    the readable records (the first NLI model; no second stage), in stages
    whose outputs are written to `output_dir` (see the module docstring), so
    that the driver's memory does not grow with the corpus. The findings are
    `findings/part-NNNNN.jsonl`, highest score first, one `across` record a
    line; `records/part-NNNNN.jsonl` lists every input record once (its
    number of units, or the `error` that kept it out).

    inputs (Sequence[Path]): Text files (one record each) or JSONL files.
    output_dir (Path): Folder of the stages' outputs, `run.json` and `manifest.json`.
    make_pipeline (Callable[..., Language]): Builds the pipeline in each actor
        (e.g. `spacy_inconsistency.cli.build_pipeline`); module-level, so that it pickles.
    pipeline_settings (Dict[str, Any]): Keyword arguments of `make_pipeline`
        (the model, `threshold`, `lang`, ...; no `candidates`: the strategy is
        given by `neighbours`, `lexical` and `hubs`; with `build_pipeline` give
        `rescorer=None`, as `across` does, so that no actor loads the unused second stage).
    text_field (str): The JSONL field holding the text.
    source_field (Optional[str]): JSONL field with each record's source label;
        None labels by record id.
    within_docs (bool): Also compare units of the same record.
    neighbours (int): Embedding neighbours per unit (`embedding_neighbours`); 0: off.
    lexical (int): Lexical-overlap partners per unit (`lexical_overlap`); 0: off.
    hubs (float): Share of units paired with all others (`contradiction_hubs`); 0: off.
    probes (int): Random probe partners per unit for `hubs`.
    max_hubs (Optional[int]): Cap on the hubs.
    shard_size (int): Records per input shard (the unit of resuming the units stage).
    num_actors (int): Actors per pool (each scoring or unit actor loads the pipeline).
    batch_size (int): Pairs per NLI batch.
    num_cpus_per_actor (float): CPUs reserved per actor.
    num_gpus_per_actor (float): GPUs per pipeline actor (set the pipeline's device to
        "cuda" with it; the sentence encoder then runs on "cuda" too).
    max_restarts (int): Restarts of an actor that died.
    max_task_retries (int): Retries of a batch whose actor died.
    address (Optional[str]): Address of a Ray cluster; None runs Ray locally.
    num_cpus (Optional[int]): CPUs of the local Ray.
    progress (bool): Show Ray Data's progress bars.
    on_stage_done (Optional[Callable[[str, Dict[str, Any]], None]]): Called with
        each stage's name and counts after it is written.
    RETURNS (Dict[str, Any]): The manifest.
    """
    from .candidates import make_hub_strategy

    ray = import_ray()
    if pipeline_settings.get("candidates") is not None:
        raise ValueError(Errors.E246)
    _check_at_least("shard_size", shard_size, 1)
    _check_at_least("num_actors", num_actors, 1)
    _check_at_least("batch_size", batch_size, 1)
    _check_at_least("neighbours", neighbours, 0)
    _check_at_least("lexical", lexical, 0)
    if hubs:
        make_hub_strategy(probes=probes, hub_share=hubs, max_hubs=max_hubs)  # checks the settings
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    paths = [Path(p) for p in inputs]
    run = run_settings(
        paths, text_field=text_field, shard_size=shard_size, pipeline_settings=pipeline_settings,
        make_pipeline=make_pipeline, num_actors=num_actors, batch_size=batch_size,
        num_cpus_per_actor=num_cpus_per_actor, num_gpus_per_actor=num_gpus_per_actor, address=address,
        num_cpus=num_cpus, command="across", source_field=source_field, within_docs=within_docs,
        strategy={"neighbours": neighbours, "lexical": lexical, "hubs": hubs,
                  "probes": probes if hubs else None, "max_hubs": max_hubs if hubs else None},
    )
    _check_or_write_run(output_dir, run)
    job = _AcrossRun(
        paths, output_dir, run, make_pipeline=make_pipeline, pipeline_settings=pipeline_settings,
        text_field=text_field, source_field=source_field, within_docs=within_docs, neighbours=neighbours,
        lexical=lexical, hubs=hubs, probes=probes, max_hubs=max_hubs, shard_size=shard_size, num_actors=num_actors,
        batch_size=batch_size, num_cpus_per_actor=num_cpus_per_actor, num_gpus_per_actor=num_gpus_per_actor,
        max_restarts=max_restarts, max_task_retries=max_task_retries, address=address, num_cpus=num_cpus,
        on_stage_done=on_stage_done,
    )
    context = ray.data.DataContext.get_current()
    saved = (context.execution_options.preserve_order, context.enable_progress_bars,
             getattr(context, "shuffle_strategy", None))
    # In order, so that a stage's batches (and their float rounding) are the same
    # in every run; the sort-based shuffle starts in a fraction of the time of
    # the hash shuffle's aggregator actors on small data.
    context.execution_options.preserve_order = True
    context.enable_progress_bars = progress
    if saved[2] is not None:
        from ray.data.context import ShuffleStrategy

        context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    started = time.perf_counter()
    try:
        skipped, done = job.execute()
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved[:2]
        if saved[2] is not None:
            context.shuffle_strategy = saved[2]
    manifest = job.manifest(skipped, done, time.perf_counter() - started)
    _write_atomically(output_dir / MANIFEST, [json.dumps(manifest, indent=2, sort_keys=True)])
    return manifest


def iter_findings(output_dir: Path) -> Iterator[Dict[str, Any]]:
    """The findings of a finished run, highest score first, one at a time.

    output_dir (Path): The run's output folder.
    YIELDS (Dict[str, Any]): Each finding as `across` writes it.
    """
    for path in sorted((Path(output_dir) / FINDING_DIR).glob("part-*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)


def iter_records(output_dir: Path) -> Iterator[Dict[str, Any]]:
    """Every input record of a run once, in input order: `n_units`, or the `error` that kept it out.

    output_dir (Path): The run's output folder.
    YIELDS (Dict[str, Any]): `id`, `source`, `line`, then `n_units` or `error` (and `warnings`).
    """
    for path in sorted((Path(output_dir) / RECORD_DIR).glob("part-*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)
