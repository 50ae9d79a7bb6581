"""A worker's C heap: resident memory that follows what the worker holds, not the largest transient it had.

glibc serves an allocation above its mmap threshold with mmap and unmaps it on free. The threshold starts
at 128 KiB but rises to the size of the largest mmapped block freed (up to 32 MiB), so once a worker has
freed one data-plane message (Beam flushes them at 10 MiB) or one Arrow buffer, every later buffer of that
size comes from the heap arenas instead, which fragment and do not shrink: the worker's peak then grew
with the size of the stage's input, not with what any step kept (`bench/runner_input.py`). A fixed
threshold keeps large buffers mapped and returned on free; `malloc_trim` returns what small objects left.
On a C library other than glibc (musl, macOS) both are no-ops.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 20  # blocks of at least 1 MiB are mapped, and unmapped when freed
# net allocations of tracked objects between two collections of the youngest generation (Python's default: 700)
YOUNG_COLLECTION_ALLOCATIONS = 20_000


@functools.cache
def _glibc():
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    return libc if libc is not None and hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


@functools.cache
def map_large_allocations() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD_BYTES for this process (once); False where not glibc."""
    libc = _glibc()
    return libc is not None and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1


@functools.cache
def freeze_start_up_objects() -> int:
    """Once per process: move every object alive now (modules, knowledge tables, the runner's own state)
    out of the cycle collector's reach, so that `release_freed_memory`'s collection after each unit scans
    what the work made, not the ~300,000 objects a worker starts with (0.17 s a call, 19 calls in a
    three-page extract, down to under 0.01 s). Frozen objects are still freed when no reference is left;
    only a cycle among them is never collected, and they are the worker's own, alive at its set-up, so
    what that can keep is bounded by them, not by the data. Returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def release_freed_memory() -> None:
    """After a unit: collect cycles and return the C heap's free pages to the system. glibc keeps what a
    unit's rows (pages, relations, Arrow buffers) freed in per-thread arenas, so without this a worker's
    resident memory creeps up unit by unit towards the sum of what its threads ever held at once."""
    gc.collect()
    if (libc := _glibc()) is not None:
        libc.malloc_trim(0)


@contextlib.contextmanager
def fewer_young_collections(allocations: int = YOUNG_COLLECTION_ALLOCATIONS):
    """Collect the youngest generation every `allocations` net allocations instead of every 700 while the
    block runs, then restore the thresholds. For steps that collect after each unit (`release_freed_memory`):
    their records (pages, relations, Arrow rows) hold no cycles, so each automatic collection scanned live
    objects for nothing (0.38 of an extract's 7 CPU-s on 2,060 real pages went to collections, 0.22 with
    this), while what a cycle can hold between two collections stays bounded by `allocations` objects."""
    thresholds = gc.get_threshold()
    gc.set_threshold(allocations, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
