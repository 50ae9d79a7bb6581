"""What a dataset run shows while and after it runs: a stage's progress counted from the work-unit parts it
has written, and the end-of-run summary table read from the stages' manifests (what it shows is what was
recorded), with the SFT supervision and every yield floor missed."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterable
from pathlib import Path

from rich.table import Table

from critic.critical import TOOLMIND_CRITICAL_PER_TRAJECTORY, TOOLMIND_LOSS_SHARE
from ground.io import read_manifest
from ground.progress import Reporter, console
from ground.storage import StorePath
from ground.yields import below_floor
from llm.client import LIVE, RoleReport, report_folder
from schemas.manifest import Manifest

WINDOW_WARNING_SHARE = 0.25  # fewer head entities than this share of the kept ones: the window starves the walks
WINDOW_WARNING_MIN_KEPT = 20  # ... on inputs of at least this many kept entities
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
    """The yield floors the finished stages missed, in plain words (`ground.yields`)."""
    lines = []
    for stage, folder in stage_dirs.items():
        manifest = read_manifest(folder)
        if manifest is not None:
            lines.extend(below_floor(stage, manifest.counts))
    return lines


def window_lines(stage_dirs: dict[str, Path]) -> list[str]:
    """What the as-of and the recency window did to the yield: head entities of the kept ones, walks rejected
    for no fact inside the window, and a warning when few pages lie in the window (one page revised much later
    than the rest moves the default as-of, and with it the window, away from them)."""
    extract = read_manifest(stage_dirs["extract"]) if "extract" in stage_dirs else None
    if extract is None or not extract.counts.get("kept"):
        return []
    kept, heads = extract.counts["kept"], extract.counts.get("head_entities", 0)
    as_of = extract.as_of.date().isoformat() if extract.as_of else "none"
    line = (f"recency window: {heads:,} of {kept:,} entities ({heads / kept:.0%}) revised within "
            f"{extract.window_days} days before the as-of {as_of} ({extract.as_of_reason}) can start a walk")
    walk = read_manifest(stage_dirs["walk"]) if "walk" in stage_dirs else None
    if walk is not None and "rejected:no_recent_fact" in walk.counts:
        line += f"; {walk.counts['rejected:no_recent_fact']:,} finished walks dropped for no fact inside it"
    lines = [line]
    if kept >= WINDOW_WARNING_MIN_KEPT and heads < WINDOW_WARNING_SHARE * kept:
        lines.append(f"warning: the window holds only {heads / kept:.0%} of the pages, so few questions can be "
                     "made: a page revised much later than the rest may have set the as-of; give --as-of or a "
                     "wider extract.window_days")
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
    for line in window_lines(stage_dirs):
        style = "bold yellow" if line.startswith("warning") else "dim"
        out.print(f"[{style}]{line}[/{style}]", highlight=False, soft_wrap=True)
    lines = yield_lines(stage_dirs)
    for line in lines:
        out.print(f"[bold red]low yield:[/bold red] {line}", highlight=False, soft_wrap=True)
    if lines:
        out.print("This is not a usable dataset yet: `hopsmith validate` refuses it unless given --allow-low-yield.",
                  highlight=False, soft_wrap=True)
