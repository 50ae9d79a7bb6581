"""Readers and writers for stage outputs: atomic parquet shards, manifests and resumable work units.

Nothing here knows about a stage's logic. Every write goes to a temporary file in the target folder and
is renamed into place, so a killed run leaves either a whole file or none. A stage is finished when its
`manifest.json` exists with the expected key; finished work units inside an unfinished stage are the
shard files already in `parts/`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from schemas.base import arrow_schema, from_row, to_table
from schemas.manifest import InputFile, Manifest

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
MANIFEST = "manifest.json"


def _open_input(path: str):
    """A binary handle on a local path, or on `s3://`, `gs://`, ... through Beam's FileSystems."""
    if "://" not in path:
        return open(path, "rb")
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The file's checksum, streamed (local or object storage): memory holds one chunk."""
    digest = hashlib.sha256()
    with _open_input(os.fspath(path)) as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def describe_input(path: str | os.PathLike) -> InputFile:
    path = os.fspath(path)
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems

        size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
    else:
        size = os.path.getsize(path)
    return InputFile(path=path, sha256=sha256_file(path), bytes=size)


def stable_hash(*parts: Any, length: int = 16) -> str:
    """A short deterministic hash of JSON-serialisable parts (ids, cache keys, manifest keys)."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:length]


def _atomic_target(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
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


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_table(table: pa.Table, path: str | os.PathLike, row_group_rows: int | None = None) -> None:
    """Write an Arrow table as one parquet file, atomically (row groups of `row_group_rows`, when given,
    let a reader hold fewer rows at a time)."""
    path = Path(path)
    fd, tmp = _atomic_target(path)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=row_group_rows)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_records(model: type[BaseModel], records: Iterable[BaseModel], path: str | os.PathLike,
                  row_group_rows: int | None = None) -> int:
    """Write records of one type to a parquet shard with the schema derived from `model`."""
    table = to_table(model, records)
    write_table(table, path, row_group_rows)
    return table.num_rows


def write_record_stream(model: type[BaseModel], records: Iterable[BaseModel], path: str | os.PathLike,
                        group_rows: int) -> int:
    """Write records to one parquet file a row group of `group_rows` at a time, atomically: memory holds
    one group, however many records come. No records, no file. Returns the number written."""
    path = Path(path)
    records = iter(records)
    batches = iter(lambda: list(itertools.islice(records, group_rows)), [])
    first = next(batches, None)
    if first is None:
        return 0
    fd, tmp = _atomic_target(path)
    os.close(fd)
    written = 0
    try:
        with pq.ParquetWriter(tmp, arrow_schema(model), compression="zstd") as writer:
            for batch in itertools.chain([first], batches):
                writer.write_table(to_table(model, batch))
                written += len(batch)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return written


def shard_files(folder: str | os.PathLike) -> list[Path]:
    folder = Path(folder)
    return sorted(folder.glob("*.parquet")) if folder.is_dir() else []


def read_table(model: type[BaseModel], folder_or_file: str | os.PathLike) -> pa.Table:
    """All shards of a folder (or one file) as one table with `model`'s schema."""
    target = Path(folder_or_file)
    files = [target] if target.is_file() else shard_files(target)
    schema = arrow_schema(model)
    if not files:
        return schema.empty_table()
    return pa.concat_tables(pq.read_table(f, schema=schema) for f in files)


def read_records(model: type[M], folder_or_file: str | os.PathLike, batch_rows: int = 1024) -> Iterator[M]:
    """Iterate validated records from a folder of shards (or one file), shard by shard, `batch_rows` at
    a time."""
    target = Path(folder_or_file)
    files = [target] if target.is_file() else shard_files(target)
    schema = arrow_schema(model)
    for file in files:
        # no pre-buffering: it doubles a reader's memory, and a merge holds one reader per run
        for batch in pq.ParquetFile(file, pre_buffer=False).iter_batches(batch_size=batch_rows):
            for row in pa.Table.from_batches([batch]).cast(schema).to_pylist():
                yield from_row(model, row)


def read_column(folder_or_file: str | os.PathLike, column: str, batch_rows: int = 65536) -> Iterator[Any]:
    """One field's values from a folder of shards (or one file), `batch_rows` at a time: counting a
    stage's rows by a field need not load the rows."""
    target = Path(folder_or_file)
    for file in [target] if target.is_file() else shard_files(target):
        for batch in pq.ParquetFile(file).iter_batches(batch_size=batch_rows, columns=[column]):
            yield from batch.column(0).to_pylist()


def write_manifest(folder: str | os.PathLike, manifest: Manifest) -> None:
    atomic_write_text(Path(folder) / MANIFEST, manifest.model_dump_json(indent=2) + "\n")


def read_manifest(folder: str | os.PathLike) -> Manifest | None:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    return Manifest.model_validate_json(path.read_text())


def stage_key(stage: str, config: Any, inputs: Iterable[InputFile], upstream: dict[str, str], code: str) -> str:
    """The key a stage's manifest is stored under: same inputs, config and code -> same key."""
    return stable_hash(stage, config, [i.sha256 for i in inputs], sorted(upstream.items()), code, length=32)


def is_complete(folder: str | os.PathLike, key: str) -> bool:
    """True when the folder holds a finished stage output for exactly this key."""
    manifest = read_manifest(folder)
    return manifest is not None and manifest.key == key


class WorkUnits:
    """Resumable work units inside a stage: one parquet part per unit and table, written atomically.

    A unit whose parts all exist is finished; a rerun skips it. Unit ids must be deterministic for the
    inputs (e.g. a hash of the question ids in a batch) so a rerun names the same units.
    """

    def __init__(self, folder: str | os.PathLike, tables: Iterable[str]):
        self.folder = Path(folder) / "parts"
        self.tables = tuple(tables)

    def part_path(self, table: str, unit_id: str) -> Path:
        return self.folder / table / f"{unit_id}.parquet"

    def is_done(self, unit_id: str) -> bool:
        return all(self.part_path(t, unit_id).is_file() for t in self.tables)

    def write(self, unit_id: str, records: dict[str, tuple[type[BaseModel], list[BaseModel]]]) -> None:
        """Write every table of a unit; each part is atomic, and `is_done` needs all of them."""
        for table in self.tables:
            model, rows = records[table]
            write_records(model, rows, self.part_path(table, unit_id))

    def table_folder(self, table: str) -> Path:
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
