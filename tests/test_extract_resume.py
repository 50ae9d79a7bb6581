"""Stage 1 at scale: redirect chains resolved by a keyed join exactly as the in-memory reference does, and
an extract killed mid-run resuming per work unit (multistream byte range) to identical shards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from pipeline import extract
from pipeline.cli import main
from pipeline.extract import UNIT_TABLES, Redirect, ResolveRedirects, classify_record, resolve_redirects
from pipeline.io import WorkUnits, read_manifest, read_records, write_records
from pipeline.sources import iter_dump_pages
from schemas.wiki import SkippedRecord

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream-index.txt.bz2"


def _sample_redirects() -> dict[str, str]:
    classified = (classify_record(r) for r in iter_dump_pages(DUMP))
    return {c.title: c.target for c in classified if isinstance(c, Redirect)}


def _joined(redirects: dict[str, str]):
    expected = resolve_redirects(redirects)
    with beam.Pipeline() as pipeline:
        out = pipeline | beam.Create(sorted(redirects.items())) | ResolveRedirects()
        assert_that(out.resolved, equal_to(sorted(expected.resolved.items())), label="Resolved")
        assert_that(out.cycles, equal_to(sorted(expected.cycles)), label="Cycles")
    return expected


def test_join_resolves_the_sample_redirects_as_the_reference():
    redirects = _sample_redirects()
    assert len(redirects) >= 10
    expected = _joined(redirects)
    assert any(redirects[t] != final for t, final in expected.resolved.items())  # the sample has chains


def test_join_resolves_chains_and_cycles_as_the_reference():
    long_chain = {f"Step {i}": f"Step {i + 1}" for i in range(20)}  # 20 hops to the article "Step 20"
    redirects = {"A": "B", "B": "C", "C": "D", "X": "Y", "Y": "X", "Z": "X", "Self": "Self",
                 "Into": "Loop 1", "Loop 1": "Loop 2", "Loop 2": "Loop 1", "Fan 1": "D", "Fan 2": "A",
                 **long_chain}
    expected = _joined(redirects)
    assert expected.resolved["Step 0"] == "Step 20" and expected.resolved["Fan 2"] == "D"
    assert {"X", "Y", "Z", "Self", "Into", "Loop 1", "Loop 2"} == expected.cycles


def _shards(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.glob("*/*.parquet"))}


def test_killed_extract_resumes_only_unfinished_units(tmp_path):
    args = ["extract", "--dump", str(DUMP), "--index", str(INDEX), "--streams-per-unit", "1"]
    fresh, resumed = tmp_path / "fresh", tmp_path / "resumed"
    assert main([*args, "--out", str(fresh)]) == 0
    units = read_manifest(fresh).work_units["units"]
    assert read_manifest(fresh).work_units == {"units": 10, "extracted": 10, "reused": 0}
    assert not (fresh / "parts").exists()  # a finished stage keeps no parts

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args, "--out", str(resumed)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = WorkUnits(resumed, UNIT_TABLES)
    stats = parts.table_folder("stats")
    deadline = time.monotonic() + 240
    while process.poll() is None and not list(stats.glob("*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert read_manifest(resumed) is None, "the run finished before it could be killed"
    done = {p.stem for p in stats.glob("*.parquet") if parts.is_done(p.stem)}
    assert 1 <= len(done) < units

    assert main([*args, "--out", str(resumed)]) == 0
    assert read_manifest(resumed).work_units == {"units": units, "extracted": units - len(done), "reused": len(done)}
    assert _shards(resumed) == _shards(fresh)


def test_runs_merge_in_steps_in_order_keeping_ties_in_run_order(tmp_path, monkeypatch):
    monkeypatch.setattr(extract, "MERGE_FAN_IN", 2)  # 5 runs: two levels of intermediate merges
    runs, expected = [], []
    for run in range(5):
        rows = [SkippedRecord(title=f"T{n:02d}", stage="extract", reason=f"run{run}")
                for n in range(run, 12, 2 if run % 2 else 3)] if run != 3 else []
        runs.append(tmp_path / f"run{run}.parquet")
        write_records(SkippedRecord, rows, runs[-1], row_group_rows=2)
        expected += rows
    expected.sort(key=lambda row: row.title)  # stable: equal titles in run order
    out = tmp_path / "out" / "part.parquet"
    assert extract.merge_runs(SkippedRecord, runs, lambda row: row.title, out, 3, tmp_path / "scratch") == len(expected)
    assert list(read_records(SkippedRecord, out)) == expected
    assert len(list((tmp_path / "scratch").glob("merge1-*.parquet"))) == 2  # 5 -> 3 -> 2 runs, then the file
    assert extract.merge_runs(SkippedRecord, runs[3:4], lambda row: row.title, tmp_path / "none.parquet", 3,
                              tmp_path / "scratch") == 0 and not (tmp_path / "none.parquet").exists()
