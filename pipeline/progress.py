"""Progress for long loops (done/total, rate, time left) and the end-of-run summary table read from manifests.

Both print to stderr with `rich`, so stdout stays clean for whatever a command prints as its result.
The summary is built only from the stages' `manifest.json` files: what it shows is what was recorded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
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

from pipeline.io import read_manifest
from schemas.manifest import Manifest

T = TypeVar("T")


def console() -> Console:
    return Console(stderr=True)


class RateColumn(TextColumn):
    """Items per second of a task."""

    def __init__(self) -> None:
        super().__init__("")

    def render(self, task):  # noqa: D102 - rich column protocol
        speed = task.finished_speed or task.speed
        return f"{speed:,.1f}/s" if speed else "-/s"


def track(items: Iterable[T], total: int | None, description: str) -> Iterator[T]:
    """Iterate `items`, showing done/total, rate and estimated time left on stderr."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console(),
        transient=False,
    )
    with progress:
        task = progress.add_task(description, total=total)
        for item in items:
            yield item
            progress.advance(task)


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
        if manifest is None:
            table.add_row(stage, "not finished", "", "", "", end_section=True)
            continue
        status = "reused" if stage in reused else "ran"
        counts = sorted(manifest.counts.items(), key=lambda item: (item[0].startswith("skipped"), item[0]))
        if not counts:
            table.add_row(stage, status, _seconds(manifest), "", "", end_section=True)
        for position, (name, value) in enumerate(counts):
            first = position == 0
            table.add_row(
                stage if first else "",
                status if first else "",
                _seconds(manifest) if first else "",
                name,
                f"{value:,}",
                end_section=position == len(counts) - 1,
            )
    return table


def print_summary(stage_dirs: dict[str, Path], reused: Iterable[str] = ()) -> None:
    console().print(summary_table(stage_dirs, reused))
