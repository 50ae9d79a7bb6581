"""Benchmarks: each module measures hopsmith against a baseline run in the same process, as a ratio."""

import multiprocessing
import resource
from collections.abc import Callable
from typing import Any


def in_fresh_process(target: Callable[..., None], *args: Any) -> Any:
    """What `target(*args, queue)` puts on its queue, run in a spawned process: its peak RSS and CPU
    time are that run's alone."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children: a subprocess's cost is the
    difference around it."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
