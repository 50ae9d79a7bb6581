"""`make bench`: run every benchmark module and print its figures and ratios against its baseline.

Each module in BENCHMARKS exposes `run(quick: bool) -> dict[str, float]`; `--quick` shrinks inputs for a
smoke run. Results are also written to bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path

from cli.main import configure_logging

BENCHMARKS = (
    "bench.extract",
    "bench.walks",
    "bench.questions",
    "bench.trajectories",
    "bench.dump_reader",
    "bench.rl_logprobs",
    "bench.critic",
    "bench.dataset",
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
    results = {}
    for module_name in BENCHMARKS:
        short = module_name.rsplit(".", 1)[-1]
        if args.names and short not in args.names:
            continue
        print(f"== {short}", flush=True)
        started = time.perf_counter()
        results[short] = importlib.import_module(module_name).run(quick=args.quick)
        print(f"   ({time.perf_counter() - started:.1f}s)", flush=True)
    out = Path("bench/results/latest.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
