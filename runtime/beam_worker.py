"""Beam's SDK worker process (`--direct_num_workers N`, multi-processing), started with secrets scrubbed.

Beam starts each worker as `python -m apache_beam.runners.worker.sdk_worker_main`, whose first import logs
a warning through `logging.warning`, which gives the root logger a plain stderr handler: every INFO line of
the worker (hopsmith's own included) then reached the terminal unscrubbed, twice (the worker also sends its
records to the launching process, which logs them through its scrubber at the level the user chose). Here
the worker's records are scrubbed as they are created, its stdout/stderr line by line, and its own stderr
handler shows errors only: the rest reaches the user once, through the launching process's log. Its large
allocations are mapped from the start (`runtime.heap`), before Beam's data plane allocates any message,
and the output it queues for the runner is bounded (SEND_QUEUE_BYTES).
"""

from __future__ import annotations

import logging
import sys

from ground.log_scrubbing import scrub_process_output
from runtime.heap import fewer_young_collections, map_large_allocations

# what a worker still prints itself: failures before (or of) its log channel to the launching process
WORKER_STDERR_LEVEL = logging.ERROR
COMMAND = f"{sys.executable} -m runtime.beam_worker"
# bytes a worker queues for the runner (each of Beam's two send queues; Beam's default is 100 MiB): a worker
# that outruns the runner waits instead of holding up to 200 MiB of its output (`bench/runner_input.py`)
SEND_QUEUE_BYTES = 16 << 20


def main() -> None:
    map_large_allocations()
    scrub_process_output()
    handler = logging.StreamHandler(sys.stderr)  # before Beam's import, so no plain handler is installed
    handler.setLevel(WORKER_STDERR_LEVEL)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s worker %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    from apache_beam.runners.worker import data_plane, sdk_worker_main

    data_plane._DEFAULT_SEND_QUEUE_MAX_BYTES = SEND_QUEUE_BYTES  # read when the worker opens its data channel

    with fewer_young_collections():  # as `hopsmith` itself runs (cli.main)
        sdk_worker_main.main(sys.argv)


if __name__ == "__main__":
    main()
