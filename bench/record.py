"""Where a benchmark's figures are kept: `bench/results/<bench>.json`, committed, so that a doc quoting
a figure can cite the file, the commit that produced it and the machine it ran on.

A file holds a list of entries, one per commit, machine, mode (`--quick` or not) and settings (the
environment knobs a benchmark reads, such as the scale bench's sizes); a rerun with the same four
replaces its entry, so the file stays small, and git keeps the rest.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPOSITORY = RESULTS_DIR.parent.parent


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True,
                          check=True).stdout.strip()


def commit() -> str:
    """`git rev-parse --short HEAD`, plus "+dirty" when tracked files differ from it (result files aside:
    writing them must not make the next run dirty); "unknown" outside a git checkout."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        changes = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                       f":(exclude){RESULTS_DIR.relative_to(REPOSITORY)}")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if changes else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return 0.0


def machine() -> dict[str, Any]:
    """The facts that make figures from two machines comparable or not."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "os": platform.platform(),
    }


def _rounded(value: Any) -> Any:
    """Six significant digits: more is noise between runs and makes diffs long."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(item) for item in value]
    return value


def write_result(bench: str, results: dict[str, Any], *, quick: bool, settings: dict[str, str] | None = None,
                 directory: Path = RESULTS_DIR, now: dt.datetime | None = None, revision: str | None = None,
                 facts: dict[str, Any] | None = None) -> Path:
    """Add `results` of `bench` to `directory/<bench>.json` with the commit, the UTC date and the machine,
    replacing the entry of the same commit, machine, mode and settings; return the file's path."""
    entry = {
        "settings": dict(settings or {}),
        "commit": revision if revision is not None else commit(),
        "date": (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": facts if facts is not None else machine(),
        "load_1min": round(os.getloadavg()[0], 2),  # on a shared machine, rates fall as this rises
        "quick": quick,
        "results": _rounded(results),
    }
    path = directory / f"{bench}.json"
    entries = json.loads(path.read_text()) if path.exists() else []
    def key(item: dict[str, Any]) -> tuple:
        return item["commit"], item["machine"], item["quick"], item["settings"]

    entries = [old for old in entries if key(old) != key(entry)] + [entry]
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    return path
