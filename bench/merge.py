"""Shard merge benchmark: extract's k-way merge of sorted runs (`pipeline.extract.merge_runs`), which copies
Arrow rows and reads only the sort keys into Python, against the record merge it replaced.

Input: 64 sorted runs of 250 pages (~4 kB of wikitext each, 16,000 pages; 8 runs of 100 with --quick),
written as extract writes them (row groups of MERGE_BATCH_ROWS), so 64 runs take two merge levels at a
fan-in of 32. Baseline, in the same run: the same levels with every row decoded into its pydantic record
(`read_records`) and encoded again (`write_record_stream`). Both outputs must hold the same rows in the
same order. Times are process CPU seconds (the machine is shared).
"""

from __future__ import annotations

import heapq
import random
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.dump_reader import synthetic_pages
from pipeline.extract import MERGE_BATCH_ROWS, MERGE_FAN_IN, OUTPUT_GROUP_ROWS, merge_runs, title_sort_keys
from pipeline.io import read_records, write_record_stream, write_records
from schemas.wiki import Page


def _record_merge(runs: list[Path], path: Path, group_rows: int, scratch: Path) -> int:
    """The merge before: every row through its pydantic record, at every level."""
    level = 0
    while len(runs) > MERGE_FAN_IN:
        merged = []
        for start in range(0, len(runs), MERGE_FAN_IN):
            step = scratch / f"merge{level}-{start // MERGE_FAN_IN:05d}.parquet"
            if _record_merge(runs[start:start + MERGE_FAN_IN], step, MERGE_BATCH_ROWS, scratch):
                merged.append(step)
        runs, level = merged, level + 1
    readers = [read_records(Page, run, batch_rows=MERGE_BATCH_ROWS) for run in runs]
    return write_record_stream(Page, heapq.merge(*readers, key=lambda page: page.title), path, group_rows)


def _runs(folder: Path, count: int, rows: int) -> list[Path]:
    pages = list(synthetic_pages(count * rows))
    random.Random(0).shuffle(pages)
    runs = []
    for index in range(count):
        path = folder / f"run-{index:03d}.parquet"
        write_records(Page, sorted(pages[index::count], key=lambda page: page.title), path,
                      row_group_rows=MERGE_BATCH_ROWS)
        runs.append(path)
    return runs


def _timed(merge, runs: list[Path], folder: Path, name: str) -> tuple[float, int]:
    """The best of two rounds (the first also pays for warming up), in process CPU seconds."""
    best = float("inf")
    for attempt in range(2):
        scratch = folder / f"{name}-scratch-{attempt}"
        scratch.mkdir()
        start = time.process_time()
        written = merge(runs, folder / f"{name}.parquet", scratch)
        best = min(best, time.process_time() - start)
    return best, written


def run(quick: bool = False) -> dict[str, float]:
    count, rows = (8, 100) if quick else (64, 250)
    with tempfile.TemporaryDirectory(prefix="hopsmith-bench-merge-") as tmp:
        folder = Path(tmp)
        runs = _runs(folder, count, rows)
        record_s, record_rows = _timed(lambda r, o, s: _record_merge(r, o, OUTPUT_GROUP_ROWS, s), runs, folder,
                                       "records")
        arrow_s, arrow_rows = _timed(lambda r, o, s: merge_runs(Page, r, title_sort_keys, o, OUTPUT_GROUP_ROWS, s),
                                     runs, folder, "arrow")
        same = pq.read_table(folder / "arrow.parquet").equals(pq.read_table(folder / "records.parquet"))
    assert same and arrow_rows == record_rows == count * rows, "the two merges disagree"
    result = {"pages": count * rows, "runs": count, "arrow_pages_per_s": round(arrow_rows / arrow_s),
              "record_pages_per_s": round(record_rows / record_s), "speedup_x": round(record_s / arrow_s, 2)}
    print(f"   {count} runs, {count * rows} pages: Arrow merge {result['arrow_pages_per_s']} pages/s, record "
          f"merge {result['record_pages_per_s']} pages/s: x{result['speedup_x']}")
    return result
