"""Progress for long loops (done/total, rate, time left), printed to stderr with `rich` so stdout stays clean
for whatever a command prints as its result."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
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
from rich.text import Text

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
