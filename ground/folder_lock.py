"""One lock per output folder, so two hopsmith runs never write the same folder at once.

Local folder: an exclusive `flock` on `<folder>/.hopsmith.lock`, held by the process until the stage (or
the run) finishes, and dropped by the kernel when the process dies, so a killed run leaves no stale lock.
It is re-entrant within a process. The file stays empty, so two runs leave identical folders.

Object storage (`s3://`, `gs://`, ...) has no flock. There the lock is the object `<folder>/.hopsmith.lock`
naming the run that holds it (run id, host, process id, start time), written when the stage starts and
deleted when it finishes or the process exits. A run that finds another run's lock stops, unless that run
was on this host and its process is gone (killed: the lock is stale and taken over). A lock left by a run
on another host that died stays until someone deletes it: the message names the object. Beam's
FileSystems offer no conditional write, so two runs started within the same moment can both pass the
check; each reads its lock back after writing it, which catches all but a near-simultaneous pair. Outputs
on object storage therefore assume one writer per output folder, as the documentation says.
"""

from __future__ import annotations

import atexit
import datetime as dt
import fcntl
import json
import os
import socket
import uuid
from pathlib import Path

from ground.errors import UserError
from ground.storage import StorePath, as_path, process_alive

LOCK = ".hopsmith.lock"
RUN_ID = uuid.uuid4().hex  # this process's run, as a lock object names it
_held: dict[Path, int] = {}
_held_objects: set[StorePath] = set()


class FolderBusy(UserError):
    """Another hopsmith run holds the folder's lock."""


def lock_folder(folder: str | os.PathLike | StorePath) -> None:
    """Take `folder`'s lock for this process, or stop with a clear message if another run holds it."""
    folder = as_path(folder)
    if isinstance(folder, StorePath):
        _lock_object(folder / LOCK)
        return
    folder = folder.resolve()
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


def unlock_folder(folder: str | os.PathLike | StorePath) -> None:
    """Release `folder`'s lock if this process holds it (a local lock file stays: removing it would race;
    a lock object is deleted)."""
    folder = as_path(folder)
    if isinstance(folder, StorePath):
        _unlock_object(folder / LOCK)
        return
    descriptor = _held.pop(folder.resolve(), None)
    if descriptor is not None:
        os.close(descriptor)


def _holder(lock: StorePath) -> dict | None:
    try:
        return json.loads(lock.read_text()) if lock.is_file() else None
    except (ValueError, OSError):
        return {}


def _alive(holder: dict) -> bool:
    """False only when the holder ran on this host and its process is gone."""
    if holder.get("run_id") == RUN_ID:
        return False
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return True
    return process_alive(holder["pid"])


def _lock_object(lock: StorePath) -> None:
    if lock in _held_objects:
        return
    holder = _holder(lock)
    if holder is not None and _alive(holder):
        raise FolderBusy(
            f"{lock.parent} is in use by another hopsmith run ({json.dumps(holder, sort_keys=True)}); wait until it "
            f"ends, or use another output folder. If no run is alive, delete {lock} and rerun"
        )
    mine = {"run_id": RUN_ID, "host": socket.gethostname(), "pid": os.getpid(),
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    lock.write_text(json.dumps(mine, sort_keys=True))
    if (_holder(lock) or {}).get("run_id") != RUN_ID:
        raise FolderBusy(f"{lock.parent}: another hopsmith run took the folder's lock at the same moment")
    _held_objects.add(lock)


def _unlock_object(lock: StorePath) -> None:
    if lock not in _held_objects:
        return
    _held_objects.discard(lock)
    if (_holder(lock) or {}).get("run_id") == RUN_ID:
        lock.unlink(missing_ok=True)


@atexit.register
def _release_objects() -> None:
    """A run that ends by an error still releases its lock objects (a killed one cannot: see above)."""
    for lock in sorted(_held_objects):
        try:
            _unlock_object(lock)
        except Exception:  # noqa: BLE001 - the store may be gone at exit; the lock is then stale, and said so
            pass
