"""`make bench`: run every benchmark module and print its figures and ratios against its baseline.

Each module in BENCHMARKS exposes `run(quick: bool) -> dict[str, float]`; `--quick` shrinks inputs for a
smoke run. Each benchmark's results are also written, with the commit, the date and the machine, to
bench/results/<name>.json (bench/record.py), which is committed so that the docs can cite it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

from bench.record import write_result
from bench.scale import RUNS_ENV, SIZES_ENV
from cli.main import configure_logging

BENCHMARKS = (
    "bench.extract",
    "bench.extract_real",
    "bench.walks",
    "bench.questions",
    "bench.trajectories",
    "bench.eval",
    "bench.dump_reader",
    "bench.rl_logprobs",
    "bench.critic",
    "bench.dataset",
    "bench.sample_run",
    "bench.scale",
    "bench.runner_input",
    "bench.merge",
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="small inputs, for a smoke run")
    args = parser.parse_args()
    configure_logging(verbose=False)
    settings = {name: os.environ[name] for name in (SIZES_ENV, RUNS_ENV) if name in os.environ}
    for module_name in BENCHMARKS:
        short = module_name.rsplit(".", 1)[-1]
        if args.names and short not in args.names:
            continue
        print(f"== {short}", flush=True)
        started = time.perf_counter()
        results = importlib.import_module(module_name).run(quick=args.quick)
        path = write_result(short, results, quick=args.quick, settings=settings)
        print(f"   ({time.perf_counter() - started:.1f}s; {path.relative_to(path.parents[2])})", flush=True)


if __name__ == "__main__":
    main()
