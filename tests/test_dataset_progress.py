"""Progress reporting and the end-of-run summary read from manifests."""

from __future__ import annotations

import io

from rich.console import Console

from ground.io import write_records
from ground.progress import Reporter, track
from ground.stage import begin_stage
from pipeline.run_summary import summary_table, watch_units
from schemas.wiki import SkippedRecord


def test_reporter_line_counts_only_this_runs_progress(monkeypatch):
    reporter = Reporter("judge units", total=100, completed=40)
    reporter._started = 100.0
    monkeypatch.setattr("ground.progress.time.monotonic", lambda: 110.0)
    reporter.completed = 60
    assert reporter.line() == "judge units: 60/100 (60%), 2.0/s, elapsed 0m10s, ~0m20s left"


def test_track_yields_every_item_and_reports_the_total(capsys):
    assert list(track(iter(range(5)), 5, "rows")) == [0, 1, 2, 3, 4]
    assert "rows: 5/5 (100%)" in capsys.readouterr().err


def test_watch_units_counts_parts_as_they_appear(tmp_path, capsys):
    folder = tmp_path / "parts" / "judged"
    with watch_units(folder, total=3, description="judge units", poll_s=0.01) as reporter:
        for unit in range(3):
            write_records(SkippedRecord, [], folder / f"u{unit}.parquet")
    assert reporter.completed == 3
    assert "judge units: 3/3 (100%)" in capsys.readouterr().err


def test_summary_table_shows_every_count_and_unfinished_stages(tmp_path):
    run = begin_stage("extract", tmp_path / "graph", {"x": 1})
    run.finish({"kept": 7, "skipped:oversized": 2, "pages_in": 9}, {})
    buffer = io.StringIO()
    Console(file=buffer, width=120).print(
        summary_table({"extract": tmp_path / "graph", "walk": tmp_path / "paths"}, reused=["extract"]))
    text = buffer.getvalue()
    assert "reused" in text and "skipped:oversized" in text and "not finished" in text
    lines = [line for line in text.splitlines() if "│" in line]
    assert [line.split("│")[4].strip() for line in lines[:3]] == ["kept", "pages_in", "skipped:oversized"]


def test_summary_table_says_which_as_of_and_why(tmp_path):
    import datetime as dt

    run = begin_stage("extract", tmp_path / "graph", {"x": 1})
    reason = "the newest plausible revision in the input; 2 revision(s) dated after ... ignored"
    run.finish({"kept": 1, "pages_in": 1, "implausible_timestamps": 2}, {},
               as_of=dt.datetime(2024, 5, 30, tzinfo=dt.UTC), as_of_reason=reason)
    buffer = io.StringIO()
    Console(file=buffer, width=220).print(summary_table({"extract": tmp_path / "graph"}))
    text = buffer.getvalue()
    assert "as-of" in text and "2024-05-30T00:00:00+00:00: the newest plausible revision" in text
    assert "implausible_timestamps" in text


def test_binned_tool_call_counts():
    from pipeline.card import binned

    assert binned([5, 5, 7]) == (["5", "6", "7"], [2, 0, 1])
    labels, counts = binned(list(range(1, 601)))
    assert len(labels) == 30 and labels[0] == "1-20" and labels[-1] == "581-600" and sum(counts) == 600
    assert binned([]) == ([], [])
