"""What a worker of the in-process runner holds of a stage's input, with nothing kept by the pipeline.

A worker process (`--direct_running_mode multi_processing --direct_num_workers 1`) generates K keyed
strings, groups them by key and only counts each group; at two sizes of K its peak RSS is compared with
the same pipeline without the GroupByKey (one fused stage, nothing materialised). No step keeps anything,
so what the grouped run's peak gains with K is the runner's and the heap's: Beam's FnApiRunner handed a
stage's whole input to its worker as one message, and glibc kept the freed message buffers in its heap
(+313 MiB from 250,000 to 1,000,000 records before hopsmith streamed the input in pieces and mapped the
worker's large allocations, docs/SCALING.md). Each run is a fresh child process.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

SIZES = (250_000, 1_000_000)
QUICK_SIZES = (50_000, 200_000)
VALUE_CHARS = 100  # about what a value weighs; 50,000 keys
WORKER_PROCESS = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "1"]


def _records(count: int):
    for i in range(count):
        yield f"key {i % 50_000}", f"value {i:012d} ".ljust(VALUE_CHARS, "x")


def _child(count: str, grouped: str) -> None:
    import apache_beam as beam

    from runtime.beam import pipeline_options

    with beam.Pipeline(options=pipeline_options(None, WORKER_PROCESS)) as pipeline:
        records = pipeline | beam.Create([int(count)]) | beam.FlatMap(_records)
        if grouped == "grouped":
            counted = records | beam.GroupByKey() | beam.MapTuple(lambda key, values: sum(1 for _ in values))
        else:
            counted = records | beam.MapTuple(lambda key, value: 1)
        _ = counted | beam.CombineGlobally(sum)
    print(json.dumps({"worker_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))


def _worker_peak(count: int, grouped: bool) -> float:
    result = subprocess.run([sys.executable, "-m", "bench.runner_input", str(count), "grouped" if grouped else "fused"],
                            check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["worker_peak_mib"]


def run(quick: bool = False) -> dict[str, float]:
    small, large = QUICK_SIZES if quick else SIZES
    figures = {f"{kind}_worker_peak_mib@{n}": _worker_peak(n, kind == "grouped")
               for kind in ("grouped", "fused") for n in (small, large)}
    added_mib = (large - small) * VALUE_CHARS / 2**20
    grown = figures[f"grouped_worker_peak_mib@{large}"] - figures[f"grouped_worker_peak_mib@{small}"]
    for kind in ("grouped", "fused"):
        print(f"   {kind}: worker peak {figures[f'{kind}_worker_peak_mib@{small}']:.0f} MiB at {small:,} records, "
              f"{figures[f'{kind}_worker_peak_mib@{large}']:.0f} MiB at {large:,}", flush=True)
    print(f"   the grouped worker grew by {grown:.0f} MiB for {added_mib:.0f} MiB more values "
          f"(x{grown / added_mib:.1f} the added input), keeping nothing", flush=True)
    return {**figures, "grouped_growth_per_input_mib": grown / added_mib}


if __name__ == "__main__":
    _child(*sys.argv[1:])
