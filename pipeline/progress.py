"""Progress for long loops (done/total, rate, time left) and the end-of-run summary table read from manifests.

Both print to stderr with `rich`, so stdout stays clean for whatever a command prints as its result.
The summary is built only from the stages' `manifest.json` files: what it shows is what was recorded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from critic.critical import TOOLMIND_CRITICAL_PER_TRAJECTORY, TOOLMIND_LOSS_SHARE
from pipeline.io import read_manifest
from pipeline.llm import LIVE, RoleReport, report_folder
from pipeline.storage import StorePath
from pipeline.yields import below_floor
from schemas.manifest import Manifest

T = TypeVar("T")


def console() -> Console:
    return Console(stderr=True)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class RateColumn(TextColumn):
    """Items per second of a task."""

    def __init__(self) -> None:
        super().__init__("")

    def render(self, task):
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f}/s" if speed else "-/s")


class Reporter:
    """done/total, rate and time left for one task: a live bar on a terminal, a line every `every_s` in logs.

    Only progress made while it runs counts towards the rate, so work resumed from an earlier run does not
    make the estimate optimistic.
    """

    def __init__(self, description: str, total: int | None, completed: int = 0, every_s: float = 10.0,
                 detail: Callable[[], str] | None = None):
        self.description, self.total, self.completed = description, total, completed
        self.detail = detail  # live text beside the count (LLM requests and episodes)
        self.every_s = every_s
        self._console = console()
        self._started = time.monotonic()
        self._resumed_from = completed
        self._last_line = self._started
        self._rich: Progress | None = None

    def __enter__(self) -> Reporter:
        if self._console.is_terminal:
            self._rich = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                RateColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self._console,
            )
            self._rich.start()
            self._task = self._rich.add_task(self.description, total=self.total, completed=self.completed)
        return self

    def update(self, completed: int) -> None:
        if self._rich is not None and self.detail is not None:
            self._rich.update(self._task, description=f"{self.description} ({self.detail()})")
        if completed == self.completed and (self.detail is None or self._rich is not None):
            return
        self.completed = completed
        if self._rich is not None:
            self._rich.update(self._task, completed=completed)
        elif time.monotonic() - self._last_line >= self.every_s:
            self._console.print(self.line(), highlight=False)
            self._last_line = time.monotonic()

    def line(self) -> str:
        """`<description>: done/total (pct), rate/s, elapsed, ~time left`."""
        elapsed = time.monotonic() - self._started
        rate = (self.completed - self._resumed_from) / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.description}: {self.completed:,}" + (f"/{self.total:,}" if self.total else "")]
        if self.total:
            parts[0] += f" ({self.completed / self.total:.0%})"
        parts.append(f"{rate:,.1f}/s")
        parts.append(f"elapsed {_duration(elapsed)}")
        if self.total and rate > 0:
            parts.append(f"~{_duration((self.total - self.completed) / rate)} left")
        if self.detail is not None:
            parts.append(self.detail())
        return ", ".join(parts)

    def __exit__(self, *exc) -> None:
        if self._rich is not None:
            self._rich.stop()
        else:
            self._console.print(self.line(), highlight=False)


def track(items: Iterable[T], total: int | None, description: str) -> Iterator[T]:
    """Iterate `items`, reporting done/total, rate and estimated time left on stderr."""
    with Reporter(description, total) as reporter:
        for done, item in enumerate(items, start=1):
            yield item
            reporter.update(done)


REMOTE_POLL_S = 5.0  # counting parts on object storage is a listing request: not twice a second


@contextlib.contextmanager
def watch_units(folder: Path | StorePath, total: int, description: str, poll_s: float = 0.5):
    """Report a running stage's progress by counting the work-unit parts it has written to `folder`.

    Stages that run inside Beam cannot report per element to the driver; their resumable parts can. Beside
    the units, the LLM requests sent and episodes finished in this process (the in-process runner) show
    that a long unit is moving.
    """
    def done() -> int:
        return sum(1 for _ in folder.glob("*.parquet")) if folder.is_dir() else 0

    if isinstance(folder, StorePath):
        poll_s = max(poll_s, REMOTE_POLL_S)

    start = dict(LIVE)

    def detail() -> str:
        return (f"{LIVE['requests'] - start.get('requests', 0):,} LLM requests, "
                f"{LIVE['episodes'] - start.get('episodes', 0):,} episodes")

    stop = threading.Event()
    with Reporter(description, total, completed=done(), detail=detail) as reporter:
        def poll() -> None:
            while not stop.wait(poll_s):
                reporter.update(done())

        thread = threading.Thread(target=poll, name=f"progress-{description}", daemon=True)
        thread.start()
        try:
            yield reporter
        finally:
            stop.set()
            thread.join()
            reporter.update(done())


def _seconds(manifest: Manifest) -> str:
    if manifest.started_at is None or manifest.finished_at is None:
        return ""
    return f"{(manifest.finished_at - manifest.started_at) / dt.timedelta(seconds=1):.1f}s"


def summary_table(stage_dirs: dict[str, Path], reused: Iterable[str] = ()) -> Table:
    """One block per stage: every count its manifest recorded (kept, skipped:<reason>, ...), and its time.

    Stages in `reused` were finished by an earlier run and skipped by this one.
    """
    reused = set(reused)
    table = Table(title="hopsmith run summary", show_lines=False)
    for column in ("stage", "status", "time", "count", "value"):
        table.add_column(column, justify="right" if column in ("time", "value") else "left")
    for stage, folder in stage_dirs.items():
        manifest = read_manifest(folder)
        if manifest is None:  # with what its LLM roles did so far (requests, failures), when it has any
            rows = [(n, f"{v:,}") for n, v in RoleReport.load_all(report_folder(folder)).flat_counts().items()]
            for position, (name, value) in enumerate(rows or [("", "")]):
                table.add_row(stage if position == 0 else "", "not finished" if position == 0 else "", "",
                              name, value, end_section=position == max(len(rows), 1) - 1)
            continue
        status = "reused" if stage in reused else "ran"
        counts = sorted(manifest.counts.items(), key=lambda item: (item[0].startswith("skipped"), item[0]))
        if not counts:
            table.add_row(stage, status, _seconds(manifest), "", "", end_section=True)
        rows = [(name, f"{value:,}") for name, value in counts]
        if manifest.as_of_reason:  # which snapshot time the run used, and why (extract)
            as_of = manifest.as_of.isoformat() if manifest.as_of else "none"
            rows.append(("as-of", f"{as_of}: {manifest.as_of_reason}"))
        for position, (name, value) in enumerate(rows):
            first = position == 0
            table.add_row(
                stage if first else "",
                status if first else "",
                _seconds(manifest) if first else "",
                name,
                value,
                end_section=position == len(rows) - 1,
            )
    return table


def yield_lines(stage_dirs: dict[str, Path]) -> list[str]:
    """The yield floors the finished stages missed, in plain words (`pipeline.yields`)."""
    lines = []
    for stage, folder in stage_dirs.items():
        manifest = read_manifest(folder)
        if manifest is not None:
            lines.extend(below_floor(stage, manifest.counts))
    return lines


def supervision_line(stage_dirs: dict[str, Path]) -> str | None:
    """What the SFT configs train on, beside ToolMind-Web-QA (None before the dataset stage finished)."""
    manifest = read_manifest(stage_dirs["dataset"]) if "dataset" in stage_dirs else None
    counts = manifest.counts if manifest is not None else {}
    rows = counts.get("rows:toolmind:train", 0) + counts.get("rows:toolmind:test", 0)
    if not counts.get("sft_assistant_turns") or not rows:
        return None
    share = counts["sft_loss1_turns"] / counts["sft_assistant_turns"]
    return (f"supervision: loss 1 on {share:.1%} of the assistant turns of toolmind, nanbeige and openai "
            f"(ToolMind-Web-QA ~{TOOLMIND_LOSS_SHARE:.0%}), {counts['sft_critical_turns'] / rows:.2f} critical turns "
            f"a trajectory ({TOOLMIND_CRITICAL_PER_TRAJECTORY})")


def print_summary(stage_dirs: dict[str, Path], reused: Iterable[str] = ()) -> None:
    """The summary table, the SFT supervision, then every yield floor missed (`hopsmith validate` refuses
    such a dataset)."""
    out = console()
    out.print(summary_table(stage_dirs, reused))
    supervision = supervision_line(stage_dirs)
    if supervision:
        out.print(supervision, highlight=False, soft_wrap=True)
    lines = yield_lines(stage_dirs)
    for line in lines:
        out.print(f"[bold red]low yield:[/bold red] {line}", highlight=False, soft_wrap=True)
    if lines:
        out.print("This is not a usable dataset yet: `hopsmith validate` refuses it unless given --allow-low-yield.",
                  highlight=False, soft_wrap=True)
