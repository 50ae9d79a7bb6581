"""Readers and writers for stage outputs: atomic parquet shards, sorted runs, manifests and resumable work units.

Nothing here knows about a stage's logic. Every path may be local or a URL (`s3://`, `gs://`, ...: see
`ground.storage`). Every write goes to a unique temporary name in the target folder and is renamed into
place, so a killed run leaves either a whole file or none under the final name. A stage is finished when
its `manifest.json` exists with the expected key; the manifest is written last and lists the stage's
files, and readers of a finished stage read only the files it lists (`shard_files`), never whatever else
lies in the folder. Finished work units inside an unfinished stage are the part files already in `parts/`.
"""

from __future__ import annotations

import hashlib
import heapq
import io
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from ground.errors import DamagedOutput
from ground.storage import MANIFEST, TEMP_SUFFIX, StorePath, as_path, is_url, put_bytes, put_file
from schemas.base import arrow_schema, from_row, to_table
from schemas.manifest import FileDigest, InputFile, Manifest

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


PathLike = str | os.PathLike | StorePath


def open_input(path: PathLike):
    """A binary handle on a local path, or on `s3://`, `gs://`, ... through Beam's FileSystems."""
    path = as_path(path)
    return path.open_input() if isinstance(path, StorePath) else open(path, "rb")


def file_size(path: PathLike) -> int:
    path = as_path(path)
    return path.size() if isinstance(path, StorePath) else path.stat().st_size


def sha256_file(path: PathLike, chunk: int = 1 << 20) -> str:
    """The file's checksum, streamed (local or object storage): memory holds one chunk."""
    return file_digest(path, chunk).sha256


def file_digest(path: PathLike, chunk: int = 1 << 20) -> FileDigest:
    """The file's size and checksum, streamed (local or object storage): memory holds one chunk."""
    digest, size = hashlib.sha256(), 0
    with open_input(path) as handle:
        while block := handle.read(chunk):
            digest.update(block)
            size += len(block)
    return FileDigest(bytes=size, sha256=digest.hexdigest())


def describe_input(path: PathLike) -> InputFile:
    return InputFile(path=str(path), sha256=sha256_file(path), bytes=file_size(path))


# `stable_hash`'s JSON: `json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)`, without building an
# encoder per call (the question stage hashes every plan's seed)
_HASH_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)


def stable_hash(*parts: Any, length: int = 16) -> str:
    """A short deterministic hash of JSON-serialisable parts (ids, cache keys, manifest keys)."""
    return hashlib.sha256(_HASH_ENCODER.encode(parts).encode()).hexdigest()[:length]


def _atomic_target(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    if is_url(path):
        put_bytes(as_path(path), data)
        return
    path = Path(path)
    fd, tmp = _atomic_target(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_table(table: pa.Table, path: PathLike, row_group_rows: int | None = None) -> None:
    """Write an Arrow table as one parquet file, atomically (row groups of `row_group_rows`, when given,
    let a reader hold fewer rows at a time)."""
    if is_url(path):
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd", row_group_size=row_group_rows)
        put_bytes(as_path(path), buffer.getvalue())
        return
    path = Path(path)
    fd, tmp = _atomic_target(path)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=row_group_rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_records(model: type[BaseModel], records: Iterable[BaseModel], path: PathLike,
                  row_group_rows: int | None = None) -> int:
    """Write records of one type to a parquet shard with the schema derived from `model`."""
    table = to_table(model, records)
    write_table(table, path, row_group_rows)
    return table.num_rows


def write_table_stream(schema: pa.Schema, tables: Iterable[pa.Table], path: PathLike) -> int:
    """Write tables to one parquet file, each one row group, atomically."""
    tables = iter(tables)
    first = next(tables, None)
    if first is None:
        return 0

    def write(tmp: str) -> int:
        written = 0
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for table in itertools.chain([first], tables):
                writer.write_table(table)
                written += table.num_rows
        return written

    return _write_streamed(path, write)


RUN_COMPRESSION = "lz4"  # a run is scratch, written and read once per merge level: fast beats small


def write_run(schema: pa.Schema, tables: Iterable[pa.Table], path: PathLike, batch_rows: int) -> int:
    """Write tables to one run, an Arrow IPC stream in batches of `batch_rows`, atomically (as
    `write_table_stream`); a run of no rows is written too. A run is read a batch at a time (`run_batches`)
    and has no footer, unlike a parquet file, whose reader holds its whole footer (~1 KB per column and row
    group): so a merge holds one batch per run however long its runs are. Returns the number written."""
    def write(tmp: str) -> int:
        written = 0
        # one thread: a batch's buffers are small, and handing each to Arrow's pool cost more than compressing
        # it (a 64-row batch of relations: 0.23 CPU-s a 34,000-row run with the pool, 0.08 without)
        options = pa.ipc.IpcWriteOptions(compression=RUN_COMPRESSION, use_threads=False)
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_stream(sink, schema, options=options) as writer:
            for table in tables:
                writer.write_table(table, max_chunksize=batch_rows)
                written += table.num_rows
        return written

    return _write_streamed(path, write)


_RUN_READ_OPTIONS = pa.ipc.IpcReadOptions(use_threads=False)  # as written: one thread (0.15 -> 0.03 CPU-s a run)


def run_batches(path: PathLike) -> Iterator[pa.RecordBatch]:
    """The record batches of a run (`write_run`), one at a time, streamed from local or object storage."""
    path = as_path(path)
    source = pa.PythonFile(path.open_input(), mode="r") if isinstance(path, StorePath) else pa.OSFile(str(path))
    with source, pa.ipc.open_stream(source, options=_RUN_READ_OPTIONS) as reader:
        yield from reader


def _write_streamed(path: PathLike, write: Callable[[str], int]) -> int:
    """`write(temporary path)` renamed into place at `path` once it has returned; on object storage the
    file is built in a local temporary file, then uploaded streamed (`put_file`). Returns what it returns."""
    remote = as_path(path) if is_url(path) else None
    target = Path(tempfile.gettempdir()) / f"hopsmith-upload{PurePosixPath(str(path)).suffix}" if remote \
        else Path(path)
    fd, tmp = _atomic_target(target)
    os.close(fd)
    try:
        written = write(tmp)
        if remote is not None:
            put_file(remote, tmp)
        else:
            os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return written


def merge_sorted_batches(schema: pa.Schema, streams: list[Iterable[pa.RecordBatch]],
                         sort_keys: Callable[[pa.RecordBatch], list], group_rows: int) -> Iterator[pa.Table]:
    """Streams of record batches, each sorted by `sort_keys` (a batch's rows -> their keys) -> their rows
    merged in order, in tables of `group_rows`. Rows stay Arrow: only their keys reach Python, and a table
    is assembled with `take` from the batches its rows came from, so no row is decoded into a record.
    Memory holds one batch per stream and one output table. Equal keys keep the order of their streams."""
    def keyed_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[Any, pa.RecordBatch, int]]:
        for batch in batches:
            for row, key in enumerate(sort_keys(batch)):
                yield key, batch, row

    merged = heapq.merge(*(keyed_rows(stream) for stream in streams), key=lambda keyed: keyed[0])
    for group in iter(lambda: list(itertools.islice(merged, group_rows)), []):
        yield _take_rows(schema, group)


def gather_tables(tables: Iterable[pa.Table], min_bytes: int) -> Iterator[pa.Table]:
    """Consecutive tables concatenated into tables of at least `min_bytes` decoded (the last may be less),
    so that each becomes a row group of a useful size whatever its rows' width."""
    gathered: list[pa.Table] = []
    size = 0
    for table in tables:
        gathered.append(table)
        size += table.nbytes
        if size >= min_bytes:
            yield pa.concat_tables(gathered).combine_chunks()
            gathered, size = [], 0
    if gathered:
        yield pa.concat_tables(gathered).combine_chunks()


def _take_rows(schema: pa.Schema, rows: list[tuple[Any, pa.RecordBatch, int]]) -> pa.Table:
    """The table of the (key, batch, row) `rows`, in their order, copied out of their batches."""
    offsets: dict[int, int] = {}  # by id: every batch stays alive in `rows` meanwhile
    batches: list[pa.RecordBatch] = []
    total = 0
    for _, batch, _ in rows:
        if id(batch) not in offsets:
            offsets[id(batch)], total = total, total + batch.num_rows
            batches.append(batch)
    indices = [offsets[id(batch)] + row for _, batch, row in rows]
    return pa.Table.from_batches(batches, schema=schema).take(indices).combine_chunks()


RUN_BATCH_ROWS = 64  # rows per batch of a run: the merge holds one batch of each run (~0.5 MB of pages)
RUN_BATCH_BYTES = 1 << 18  # decoded bytes a batch of narrow rows may fill (~1,000 relations)
MERGE_FAN_IN = 32  # runs merged at once; more are merged in steps
MERGE_TAKE_ROWS = 256  # rows the merge copies out of its runs at a time (~2 MB of pages)
# decoded bytes per row group of an output shard: a parquet writer holds every row group's metadata (~1 KB
# per column) until it closes, so groups of a fixed 256 rows cost a 1.8-million-row relations shard ~110 MiB
OUTPUT_GROUP_BYTES = 8 * 2**20


def merge_runs(model: type[BaseModel], runs: list[Path], sort_keys: Callable[[pa.RecordBatch], list], path: Path,
               scratch: Path, group_bytes: int = OUTPUT_GROUP_BYTES) -> int:
    """Sorted runs (`write_run`) -> one sorted parquet file at `path` in row groups of at least
    `group_bytes` decoded (none when all runs are empty), MERGE_FAN_IN runs at a time: more are first merged
    in order into intermediate runs under `scratch`, level by level. Memory holds one batch of each of at
    most MERGE_FAN_IN runs and one output group, however many runs and levels there are: a run has no
    footer to hold, so the last level's long runs cost no more than the first level's short ones, and the
    output's row groups grow with its rows' size, so the writer's metadata stays small. Equal keys keep the
    order of their runs. Rows are copied as Arrow, never decoded (`merge_sorted_batches`). Returns the rows
    written."""
    schema = arrow_schema(model)

    def merged(paths: list[Path]) -> Iterator[pa.Table]:
        return merge_sorted_batches(schema, [run_batches(run) for run in paths], sort_keys, MERGE_TAKE_ROWS)

    level = 0
    while len(runs) > MERGE_FAN_IN:
        steps = []
        for start in range(0, len(runs), MERGE_FAN_IN):
            steps.append(scratch / f"merge{level}-{start // MERGE_FAN_IN:05d}.arrows")
            write_run(schema, merged(runs[start:start + MERGE_FAN_IN]), steps[-1], RUN_BATCH_ROWS)
        runs, level = steps, level + 1
    return write_table_stream(schema, gather_tables(merged(runs), group_bytes), path)


# how far above a shard folder its stage's manifest may lie (`data/<config>/` in the dataset folder)
_MANIFEST_DEPTH = 3


def _enclosing_manifest(folder: Path | StorePath) -> tuple[Path | StorePath, str, Manifest] | None:
    """(stage folder, `folder`'s path inside it with a trailing `/`, manifest) of the nearest finished stage
    at or above `folder`, or None."""
    base, relative = folder, PurePosixPath()
    for _ in range(_MANIFEST_DEPTH):
        manifest = read_manifest(base)
        if manifest is not None:
            return base, f"{relative}/" if relative.parts else "", manifest
        relative = PurePosixPath(base.name) / relative
        base = base.parent
    return None


def _committed(folder: Path | StorePath) -> list[str] | None:
    """The files the nearest enclosing stage manifest lists under `folder`, or None when no manifest lists
    any file there (a folder of an unfinished stage, or one no stage tracks). Each listed file's size is
    checked against the manifest: a missing, truncated or grown one stops the read (`DamagedOutput`)."""
    enclosing = _enclosing_manifest(folder)
    if enclosing is None:
        return None
    stage_folder, prefix, manifest = enclosing
    listed = [path for paths in manifest.outputs.values() for path in paths]
    inside = sorted(p[len(prefix):] for p in listed if p.startswith(prefix))
    names = [p for p in inside if "/" not in p]
    for name in names:
        _check_size(folder / name, manifest, prefix + name)
    return names or None


def _check_size(path: Path | StorePath, manifest: Manifest, listed_as: str) -> None:
    """Stop (`DamagedOutput`) when a file its stage's manifest lists is missing or not of the listed size."""
    if (expected := manifest.files.get(listed_as)) is not None:
        if (problem := _size_problem(path, expected)) is not None:
            raise DamagedOutput(damage_line(manifest.stage, path, problem))


def shard_files(folder: PathLike) -> list[Path | StorePath]:
    """The parquet shards of a folder: those its stage's manifest lists, when a finished stage's manifest
    lists files there (a stray or uncommitted object beside them is never read; each one's size is checked
    against the manifest), else every `*.parquet`."""
    folder = as_path(folder)
    committed = _committed(folder)
    if committed is not None:
        return [folder / name for name in committed if name.endswith(".parquet")]
    return sorted(folder.glob("*.parquet")) if folder.is_dir() else []


def _parquet_source(path: PathLike) -> Path | pa.BufferReader:
    """What pyarrow reads a parquet file from: the local path, or the object fetched whole (shards are
    bounded in size), whose checksum is then compared with its stage's manifest."""
    path = as_path(path)
    if not isinstance(path, StorePath):
        return path
    data = path.read_bytes()
    if (enclosing := _enclosing_manifest(path.parent)) is not None:
        _, prefix, manifest = enclosing
        expected = manifest.files.get(prefix + path.name)
        if expected is not None and (len(data), hashlib.sha256(data).hexdigest()) != (expected.bytes, expected.sha256):
            raise DamagedOutput(damage_line(manifest.stage, path, _content_problem(len(data), expected)))
    return pa.BufferReader(data)


# ---------------------------------------------------------------- verifying a finished stage's files


def output_files(folder: PathLike, outputs: dict[str, list[str]]) -> list[str]:
    """The files a manifest's `outputs` name, relative to the stage folder: a listed folder (an index) is
    expanded to every file under it, but for temporary files."""
    folder = as_path(folder)
    files: set[str] = set()
    for listed in (path for paths in outputs.values() for path in paths):
        entry = folder / listed
        if entry.is_file():
            files.add(listed)
        elif entry.is_dir():
            files.update(f"{listed}/{found.relative_to(entry).as_posix()}" for found in entry.rglob("*")
                         if not found.name.endswith(TEMP_SUFFIX) and (isinstance(found, StorePath) or found.is_file()))
    return sorted(files)


def digest_outputs(folder: PathLike, outputs: dict[str, list[str]]) -> dict[str, FileDigest]:
    """Size and checksum of every output file, for the manifest (read once, streamed)."""
    folder = as_path(folder)
    return {name: file_digest(folder / name) for name in output_files(folder, outputs)}


def damage_line(stage: str, path: PathLike, problem: str) -> str:
    return f"stage {stage!r}: {path} {problem}"


def _size_problem(path: Path | StorePath, expected: FileDigest) -> str | None:
    if not path.is_file():
        return "is missing"
    size = file_size(path)
    return None if size == expected.bytes else f"has {size:,} bytes, its manifest says {expected.bytes:,}"


def _content_problem(size: int, expected: FileDigest) -> str:
    if size != expected.bytes:
        return f"has {size:,} bytes, its manifest says {expected.bytes:,}"
    return "does not match its manifest's checksum (altered or swapped)"


_VERIFIED: set[tuple[str, str, str]] = set()  # (folder, manifest key, finished_at) verified in this run


def _verified_mark(folder: PathLike, manifest: Manifest) -> tuple[str, str, str]:
    return str(folder), manifest.key, str(manifest.finished_at)


def forget_verified() -> None:
    """Verify every folder again from here on: a new run in a long-lived process (files may have changed)."""
    _VERIFIED.clear()


def mark_verified(folder: PathLike, manifest: Manifest) -> None:
    """`manifest` was just written from the files themselves: no need to read them again in this process."""
    _VERIFIED.add(_verified_mark(folder, manifest))


def verify_outputs(folder: PathLike, manifest: Manifest) -> list[str]:
    """Every file a finished stage's manifest lists, checked (size, then streamed checksum) -> one line per
    file that fails, naming the stage and the file; [] when all match. A folder this process already
    verified (or wrote) under the same manifest is not read again."""
    folder = as_path(folder)
    mark = _verified_mark(folder, manifest)
    if mark in _VERIFIED:
        return []
    problems = []
    for name, expected in sorted(manifest.files.items()):
        path = folder / name
        problem = _size_problem(path, expected)
        if problem is None:
            actual = file_digest(path)
            problem = None if actual == expected else _content_problem(actual.bytes, expected)
        if problem is not None:
            problems.append(damage_line(manifest.stage, path, problem))
    if not problems:
        _VERIFIED.add(mark)
    return problems


def parquet_file(path: PathLike) -> pq.ParquetFile:
    """A parquet file for reading, local or on object storage (without pre-buffering, which would double
    a reader's memory)."""
    return pq.ParquetFile(_parquet_source(path), pre_buffer=False)


def _files(folder_or_file: PathLike) -> list[Path | StorePath]:
    """The shards to read: a folder's (`shard_files`), or one file, whose size is checked against its stage's
    manifest when one lists it."""
    target = as_path(folder_or_file)
    if not target.is_file():
        return shard_files(target)
    if (enclosing := _enclosing_manifest(target.parent)) is not None:
        _, prefix, manifest = enclosing
        _check_size(target, manifest, prefix + target.name)
    return [target]


def read_table(model: type[BaseModel], folder_or_file: PathLike) -> pa.Table:
    """All shards of a folder (or one file) as one table with `model`'s schema."""
    files = _files(folder_or_file)
    schema = arrow_schema(model)
    if not files:
        return schema.empty_table()
    return pa.concat_tables(pq.read_table(_parquet_source(f), schema=schema) for f in files)


def read_parts(model: type[BaseModel], files: Iterable[PathLike]) -> pa.Table:
    """Part files of one record type as one table, in the order given, no record rebuilt: merging a stage's
    parts into shards need not validate and re-encode every record (a third of the sample's judge stage)."""
    schema = arrow_schema(model)
    tables = [pq.read_table(_parquet_source(f), schema=schema) for f in map(as_path, files)]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def write_shards(table: pa.Table, out_dir: PathLike, name: str, shard_rows: int) -> list[str]:
    """`table` as `name/name-0000i-of-0000n.parquet` shards of `shard_rows` rows under `out_dir` (one shard
    when empty); their paths relative to `out_dir`, for the manifest."""
    count = max(1, -(-table.num_rows // shard_rows))
    outputs = []
    for shard in range(count):
        relative = f"{name}/{name}-{shard:05d}-of-{count:05d}.parquet"
        write_table(table.slice(shard * shard_rows, shard_rows), as_path(out_dir) / relative)
        outputs.append(relative)
    return outputs


def read_records(model: type[M], folder_or_file: PathLike, batch_rows: int = 1024) -> Iterator[M]:
    """Iterate validated records from a folder of shards (or one file), shard by shard, `batch_rows` at
    a time."""
    files = _files(folder_or_file)
    schema = arrow_schema(model)
    for file in files:
        # no pre-buffering: it doubles a reader's memory, and a merge holds one reader per run
        for batch in parquet_file(file).iter_batches(batch_size=batch_rows):
            for row in pa.Table.from_batches([batch]).cast(schema).to_pylist():
                yield from_row(model, row)


def read_batches(folder_or_file: PathLike, columns: list[str], batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """Some fields of a folder of shards (or one file) as record batches of `batch_rows`: a pass over a
    few columns need not load the rows."""
    for file in _files(folder_or_file):
        yield from parquet_file(file).iter_batches(batch_size=batch_rows, columns=columns)


def read_column(folder_or_file: PathLike, column: str, batch_rows: int = 65536) -> Iterator[Any]:
    """One field's values from a folder of shards (or one file), `batch_rows` at a time: counting a
    stage's rows by a field need not load the rows."""
    for batch in read_batches(folder_or_file, [column], batch_rows):
        yield from batch.column(0).to_pylist()


def write_manifest(folder: PathLike, manifest: Manifest) -> None:
    atomic_write_text(as_path(folder) / MANIFEST, manifest.model_dump_json(indent=2) + "\n")


def read_manifest(folder: PathLike) -> Manifest | None:
    path = as_path(folder) / MANIFEST
    if not path.is_file():
        return None
    return Manifest.model_validate_json(path.read_text())


def stage_key(stage: str, config: Any, inputs: Iterable[InputFile], upstream: dict[str, str], code: str) -> str:
    """The key a stage's manifest is stored under: same inputs, config and code -> same key."""
    return stable_hash(stage, config, [i.sha256 for i in inputs], sorted(upstream.items()), code, length=32)


class WorkUnits:
    """Resumable work units inside a stage: one parquet part per unit and table, written atomically.

    A unit whose parts all exist is finished; a rerun skips it. Unit ids must be deterministic for the
    inputs (e.g. a hash of the question ids in a batch) so a rerun names the same units.
    """

    def __init__(self, folder: PathLike, tables: Iterable[str]):
        self.folder = as_path(folder) / "parts"
        self.tables = tuple(tables)

    def part_path(self, table: str, unit_id: str) -> Path | StorePath:
        return self.folder / table / f"{unit_id}.parquet"

    def is_done(self, unit_id: str) -> bool:
        return all(self.part_path(t, unit_id).is_file() for t in self.tables)

    def write(self, unit_id: str, records: dict[str, tuple[type[BaseModel], list[BaseModel]]]) -> None:
        """Write every table of a unit; each part is atomic, and `is_done` needs all of them."""
        for table in self.tables:
            model, rows = records[table]
            write_records(model, rows, self.part_path(table, unit_id))

    def table_folder(self, table: str) -> Path | StorePath:
        return self.folder / table


@dataclass(frozen=True)
class WorkUnit(Generic[T]):
    """A batch of input records processed and written together; `unit_id` names its part files."""

    unit_id: str
    items: tuple[T, ...]


def plan_work_units(items: Iterable[T], key: Callable[[T], str], size: int) -> list[WorkUnit[T]]:
    """Deterministic work units: items sorted by key, `size` at a time, each named by a hash of its keys.

    The same inputs always give the same unit ids, so a rerun finds the parts an earlier run finished.
    """
    ordered = sorted(items, key=key)
    batches = [tuple(ordered[i : i + size]) for i in range(0, len(ordered), size)]
    return [WorkUnit(stable_hash([key(item) for item in batch]), batch) for batch in batches]
