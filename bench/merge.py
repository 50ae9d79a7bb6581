"""Shard merge benchmark: the last level of extract's merge of one relations shard (`merge_runs`), which
opens its longest runs at once and writes the whole shard: runs as Arrow streams (`write_run`) and output
row groups of OUTPUT_GROUP_BYTES, against what they replaced, parquet runs (row groups of 256, read 16
rows at a time) and output row groups of 256 rows.

Input: 15 sorted runs of 40,000 relation rows each (as at 400,000 synthetic articles on 16 shards, whose
last level merged 15 runs of ~119,000 rows; 4 runs of 5,000 with --quick), merged into one parquet shard
by `merge_sorted_batches` in a fresh process per format. Figures: that process's peak resident memory
above what it held before the merge, and its CPU seconds; both outputs must hold the same rows in the same
order. (The Arrow-copying merge itself was measured against the record merge it replaced, at 44d486a:
x1.43 CPU on 64 runs of 250 pages.)
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench import in_fresh_process
from bench.scale import AS_OF, synthetic_pages
from extract.oracle import extract_records
from extract.tables import relation_merge_keys
from ground.io import (
    MERGE_TAKE_ROWS,
    OUTPUT_GROUP_BYTES,
    RUN_BATCH_ROWS,
    gather_tables,
    merge_sorted_batches,
    parquet_file,
    run_batches,
    write_run,
    write_table_stream,
)
from schemas.base import to_table
from schemas.config import ExtractConfig
from schemas.wiki import Relation


def _sorted_relations(rows: int) -> pa.Table:
    """`rows` distinct relation rows sorted by their merge keys: a synthetic extract's relations, copied
    under numbered heads."""
    relations = to_table(Relation, extract_records(synthetic_pages(200, seed=5), ExtractConfig(as_of=AS_OF)).relations)
    copies = []
    for copy in range(rows // relations.num_rows + 1):
        heads = pa.array([f"{head} {copy:05d}" for head in relations.column("head").to_pylist()])
        copies.append(relations.set_column(relations.schema.get_field_index("head"), "head", heads))
    table = pa.concat_tables(copies).slice(0, rows).combine_chunks()
    keys = relation_merge_keys(table.to_batches()[0])
    return table.take(sorted(range(rows), key=keys.__getitem__))


def _write_runs(folder: Path, table: pa.Table, runs: int) -> dict[str, list[Path]]:
    """The table dealt round robin into `runs` sorted runs, in both formats."""
    written: dict[str, list[Path]] = {"arrow": [], "parquet": []}
    for index in range(runs):
        run = table.take(list(range(index, table.num_rows, runs)))
        written["arrow"].append(folder / f"run-{index:03d}.arrows")
        write_run(run.schema, [run], written["arrow"][-1], RUN_BATCH_ROWS)
        written["parquet"].append(folder / f"run-{index:03d}.parquet")
        pq.write_table(run, written["parquet"][-1], row_group_size=BEFORE_GROUP_ROWS, compression="zstd")
    return written


BEFORE_GROUP_ROWS, BEFORE_BATCH_ROWS = 256, 16  # the intermediate runs' and output's row groups, and reads


def _parquet_batches(path: Path):
    return parquet_file(path).iter_batches(batch_size=BEFORE_BATCH_ROWS)


def _memory_kib(field: str) -> int:
    return int(Path("/proc/self/status").read_text().split(f"{field}:")[1].split()[0])


def _merge_in_this_process(runs: list[Path], out: Path, results) -> None:
    """The last merge level, in a fresh process: its peak RSS above the RSS it started from, in bytes
    (the peak reset first, through clear_refs), and its CPU seconds."""
    now = runs[0].suffix == ".arrows"
    read = run_batches if now else _parquet_batches
    schema = pq.read_schema(out.parent / "schema.parquet")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before, start = _memory_kib("VmRSS"), time.process_time()
    streams = [read(run) for run in runs]
    if now:
        merged = gather_tables(merge_sorted_batches(schema, streams, relation_merge_keys, MERGE_TAKE_ROWS),
                               OUTPUT_GROUP_BYTES)
    else:
        merged = merge_sorted_batches(schema, streams, relation_merge_keys, BEFORE_GROUP_ROWS)
    rows = write_table_stream(schema, merged, out)
    results.put((rows, (_memory_kib("VmHWM") - before) * 1024, time.process_time() - start))


def run(quick: bool = False) -> dict[str, float]:
    count, rows = (4, 5_000) if quick else (15, 40_000)
    with tempfile.TemporaryDirectory(prefix="hopsmith-bench-merge-") as tmp:
        folder = Path(tmp)
        table = _sorted_relations(count * rows)
        pq.write_table(table.slice(0, 0), folder / "schema.parquet")
        runs = _write_runs(folder, table, count)
        figures = {name: in_fresh_process(_merge_in_this_process, paths, folder / f"{name}.parquet") for name, paths in runs.items()}
        same = pq.read_table(folder / "arrow.parquet").equals(pq.read_table(folder / "parquet.parquet"))
    assert same and figures["arrow"][0] == figures["parquet"][0] == count * rows, "the two merges disagree"
    (_, arrow_bytes, arrow_s), (_, parquet_bytes, parquet_s) = figures["arrow"], figures["parquet"]
    result = {"runs": count, "rows": count * rows, "arrow_peak_mib": round(arrow_bytes / 2**20, 1),
              "parquet_peak_mib": round(parquet_bytes / 2**20, 1), "arrow_cpu_s": round(arrow_s, 2),
              "parquet_cpu_s": round(parquet_s, 2), "cpu_speedup_x": round(parquet_s / arrow_s, 2)}
    print(f"   last merge level, {count} runs of {rows} relation rows: Arrow stream runs, {OUTPUT_GROUP_BYTES >> 20} MiB row groups "
          f"+{result['arrow_peak_mib']} MiB, {result['arrow_cpu_s']} CPU s; parquet runs, 256-row groups "
          f"+{result['parquet_peak_mib']} MiB, {result['parquet_cpu_s']} CPU s: x{result['cpu_speedup_x']} CPU")
    return result
