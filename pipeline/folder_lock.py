"""One lock per output folder, so two hopsmith runs never write the same folder at once.

The lock is an exclusive `flock` on `<folder>/.hopsmith.lock`, held by the process until the stage (or the
run) finishes, and dropped by the kernel when the process dies, so a killed run leaves no stale lock. It is
re-entrant within a process. The file stays empty, so two runs leave identical folders. Local paths only: an object store needs another mechanism, which belongs here.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pipeline.errors import UserError

LOCK = ".hopsmith.lock"
_held: dict[Path, int] = {}


class FolderBusy(UserError):
    """Another hopsmith run holds the folder's lock."""


def lock_folder(folder: str | os.PathLike) -> None:
    """Take `folder`'s lock for this process, or stop with a clear message if another run holds it."""
    folder = Path(folder).resolve()
    if folder in _held:
        return
    descriptor = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise FolderBusy(
            f"{folder} is in use by another hopsmith run; wait until it ends, or use another output folder"
        ) from None
    _held[folder] = descriptor


def unlock_folder(folder: str | os.PathLike) -> None:
    """Release `folder`'s lock if this process holds it (the lock file stays: removing it would race)."""
    descriptor = _held.pop(Path(folder).resolve(), None)
    if descriptor is not None:
        os.close(descriptor)
