"""Stages 1 and 2a at two dump sizes: pages/s, peak memory per worker and output size, as ratios.

`synthetic_dump` writes a multistream dump (with its index) of N articles plus redirects to them. Article
bodies follow `bench.extract`'s realistic, long-tailed page shape; on top, an infobox on 75% of pages and
a linked lead point at other generated articles with a heavy-tailed in-degree (a target id drawn
log-uniformly, so page k is linked about 1/k as often as page 1), and one article in five has a redirect
(some chained). Each stage runs in a fresh child process on the in-process DirectRunner (one worker), so
the child's peak RSS is the memory of runner, shuffle and worker together; extract runs a second time with
its worker in a process of its own (`WORKER_PROCESS`), whose peak RSS is the memory per worker. Then
extract runs on a dask.distributed LocalCluster (127.0.0.1) of 1 and of 2 single-threaded worker
processes on the larger dump: pages/s on 2 workers against 1, and each worker's peak RSS. The ratios are
printed beside issue 13's targets; the figures feed docs/SCALING.md's projection.

Sizes: 2,000 and 8,000 articles (`--quick`: 300 and 1,200); `HOPSMITH_SCALE_SIZES=100000,400000` sets
others (the issue's full check: hours on 2 cores). Timings are only meaningful on an idle machine, so the
load average is printed with them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.extract import _paragraph, _words
from pipeline.sources.dump_writer import write_multistream
from schemas.wiki import Page

AS_OF = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SIZES = (2_000, 8_000)
QUICK_SIZES = (300, 1_200)
SIZES_ENV = "HOPSMITH_SCALE_SIZES"
# the in-process runner with its worker in a child process: the runner process holds the shuffle (as a
# distributed runner's shuffle service does), so the child's peak RSS is one worker's memory
WORKER_PROCESS = ("--direct_running_mode", "multi_processing", "--direct_num_workers", "1")
# issue 13's targets, as ratios between the two sizes (x4 pages) and between 2 and 1 Dask workers
MAX_MEMORY_GROWTH = 1.3
MAX_RATE_CHANGE = 0.2
MIN_DASK_SPEEDUP = 1.6


def _target(rng: random.Random, n: int) -> str:
    return f"Entity {min(n, int(n ** rng.random()))}"


def _article(rng: random.Random, page_id: int, n: int) -> Page:
    title = f"Entity {page_id}"
    parts = []
    if rng.random() < 0.75:
        kind = rng.choice(["person", "film", "settlement", "company", "book"])
        parts.append(
            f"{{{{Infobox {kind}\n| name = {title}\n| birth_place = [[{_target(rng, n)}]]\n"
            f"| spouse = {{{{marriage|[[{_target(rng, n)}]]|{rng.randrange(1950, 2000)}|{rng.randrange(2000, 2020)}}}}}\n"
            f"| country = [[{_target(rng, n)}]]\n| director = [[{_target(rng, n)}]]\n"
            f"| founded = {{{{start date|{rng.randrange(1800, 2020)}|{rng.randrange(1, 13)}|{rng.randrange(1, 28)}}}}}\n"
            f"| population_total = {rng.randrange(1000, 9_000_000):,}\n}}}}\n")
    links = " ".join(f"[[{_target(rng, n)}]]" for _ in range(rng.randrange(2, 9)))
    parts.append(f"'''{title}''' is a {_words(rng, 4)} of {links}. {_paragraph(rng)}\n\n")
    for number in range(min(int(rng.paretovariate(1.3)) + 1, 30)):
        parts.append(f"== {_words(rng, 2).title()} {number} ==\n{_paragraph(rng)}\n\n")
    return Page(page_id=page_id, title=title, ns=0, revision_id=page_id * 7,
                timestamp=AS_OF - dt.timedelta(days=rng.randrange(400)), text="".join(parts))


def synthetic_pages(n: int, seed: int = 0) -> Iterator[Page]:
    """N articles, and after each fifth one a redirect to it (every tenth redirect chained via another)."""
    rng = random.Random(seed)
    for page_id in range(1, n + 1):
        yield _article(rng, page_id, n)
        if page_id % 5 == 0:
            target = f"Alias {page_id - 5}" if page_id % 50 == 0 and page_id > 5 else f"Entity {page_id}"
            yield Page(page_id=n + page_id, title=f"Alias {page_id}", ns=0, revision_id=(n + page_id) * 7,
                       timestamp=AS_OF - dt.timedelta(days=3), text=f"#REDIRECT [[{target}]]")


def synthetic_dump(n: int, folder: Path, seed: int = 0) -> tuple[Path, Path]:
    dump = folder / f"synthetic{n}-pages-articles-multistream.xml.bz2"
    index = folder / f"synthetic{n}-pages-articles-multistream-index.txt.bz2"
    write_multistream(synthetic_pages(n, seed), dump, index)
    return dump, index


def _sizes(quick: bool) -> tuple[int, int]:
    given = os.environ.get(SIZES_ENV)
    if not given:
        return QUICK_SIZES if quick else SIZES
    small, large = (int(n) for n in given.split(","))
    return small, large


def _child(stage: str, folder: str, dump: str, index: str, *beam_args: str) -> None:
    """One stage in this process; prints its seconds, peak RSS (MiB) and output bytes as JSON."""
    from graph.walks import run_walks
    from pipeline.extract import run_extract
    from schemas.config import ExtractConfig, WalkConfig

    out = Path(folder)
    started = time.perf_counter()
    if stage == "extract":
        manifest = run_extract(ExtractConfig(dump=dump, index=index, as_of=AS_OF), out / "graph",
                               beam_args=list(beam_args))
        produced = out / "graph"
    else:
        manifest = run_walks(out / "graph", out / "paths", WalkConfig())
        produced = out / "paths"
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in produced.rglob("*.parquet"))
    print(json.dumps({"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "worker_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                      "bytes": size, "counts": manifest.counts}))


def _measure(stage: str, folder: Path, dump: Path, index: Path, *beam_args: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "bench.scale", stage, str(folder), str(dump), str(index),
                             *beam_args], check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _on_dask(workers: int, folder: Path, dump: Path, index: Path) -> dict:
    """Extract on a fresh LocalCluster of `workers` single-threaded processes: seconds (cluster start not
    counted), each worker's peak RSS and CPU seconds (how evenly the work was split, whatever the load)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit=0) as cluster, Client(cluster) as client:
        figures = _measure("extract", folder, dump, index, "--runner", "DaskRunner",
                           "--dask_client_address", cluster.scheduler_address)
        figures["worker_peak_mib"] = sorted(client.run(_peak_rss_mib).values())
        figures["worker_cpu_s"] = sorted(client.run(_cpu_seconds).values())
    return figures


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def run(quick: bool = False) -> dict[str, float]:
    sizes = _sizes(quick)
    print(f"   sizes {sizes[0]:,} and {sizes[1]:,} articles; {_load()}", flush=True)
    figures: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="hopsmith-scale-") as tmp:
        for n in sizes:
            folder = Path(tmp) / str(n)
            folder.mkdir()
            dump, index = synthetic_dump(n, folder)
            extract = _measure("extract", folder, dump, index)
            separate = _measure("extract", folder / "workers", dump, index, *WORKER_PROCESS)
            walk = _measure("walk", folder, dump, index)
            figures[n] = {
                "pages": n, "dump_mib": dump.stat().st_size / 2**20,
                "extract_pages_per_s": n / extract["seconds"], "extract_peak_mib": extract["peak_mib"],
                "extract_worker_peak_mib": separate["worker_peak_mib"], "extract_runner_peak_mib": separate["peak_mib"],
                "graph_mib": extract["bytes"] / 2**20, "relations": extract["counts"]["relations"],
                "walk_s": walk["seconds"], "walk_peak_mib": walk["peak_mib"], "paths": walk["counts"]["paths:kept"],
            }
            f = figures[n]
            print(f"   {n:>7} pages ({f['dump_mib']:.1f} MiB bz2): extract {f['extract_pages_per_s']:.0f} pages/s, "
                  f"peak {f['extract_peak_mib']:.0f} MiB in one process; with a worker process: worker "
                  f"{f['extract_worker_peak_mib']:.0f} MiB, runner {f['extract_runner_peak_mib']:.0f} MiB; "
                  f"graph {f['graph_mib']:.1f} MiB ({f['relations']} relations); "
                  f"walk {f['walk_s']:.1f} s, peak {f['walk_peak_mib']:.0f} MiB, {f['paths']} paths", flush=True)
        dask: dict[int, dict] = {}
        for workers in (1, 2):
            run_dir = Path(tmp) / f"dask{workers}"
            run_dir.mkdir()
            dask[workers] = _on_dask(workers, run_dir, dump, index)
            print(f"   dask, {workers} worker(s), {sizes[1]} pages: {sizes[1] / dask[workers]['seconds']:.0f} pages/s, "
                  f"worker peak {', '.join(f'{m:.0f}' for m in dask[workers]['worker_peak_mib'])} MiB, "
                  f"CPU {', '.join(f'{c:.0f}' for c in dask[workers]['worker_cpu_s'])} s; {_load()}",
                  flush=True)
    small, large = (figures[n] for n in sizes)
    ratios = {
        "pages_ratio": large["pages"] / small["pages"],
        "extract_pages_per_s_ratio": large["extract_pages_per_s"] / small["extract_pages_per_s"],
        "extract_peak_mib_ratio": large["extract_peak_mib"] / small["extract_peak_mib"],
        "extract_worker_peak_mib_ratio": large["extract_worker_peak_mib"] / small["extract_worker_peak_mib"],
        "extract_runner_peak_mib_ratio": large["extract_runner_peak_mib"] / small["extract_runner_peak_mib"],
        "graph_mib_ratio": large["graph_mib"] / small["graph_mib"],
        "walk_peak_mib_ratio": large["walk_peak_mib"] / small["walk_peak_mib"],
        "dask_2_vs_1_worker_throughput": dask[1]["seconds"] / dask[2]["seconds"],
    }
    print(f"   {sizes[1]} vs {sizes[0]} pages (x{ratios['pages_ratio']:.0f}): graph size x{ratios['graph_mib_ratio']:.2f}, "
          f"walk peak memory x{ratios['walk_peak_mib_ratio']:.2f} (the graph side input grows with the graph)")
    memory, rate, speedup = (ratios["extract_worker_peak_mib_ratio"], ratios["extract_pages_per_s_ratio"],
                             ratios["dask_2_vs_1_worker_throughput"])
    print(f"   extract peak memory x4 pages: in one process (runner, shuffle and worker) "
          f"x{ratios['extract_peak_mib_ratio']:.2f}; with a worker process: runner (holds the shuffle of keys) "
          f"x{ratios['extract_runner_peak_mib_ratio']:.2f}, worker x{memory:.2f}")
    print(f"   issue 13 targets ({_load()}; timings need an idle machine):\n"
          f"     extract peak memory per worker x{memory:.2f} for x{ratios['pages_ratio']:.0f} pages "
          f"(target <= x{MAX_MEMORY_GROWTH}): {_verdict(memory <= MAX_MEMORY_GROWTH)}\n"
          f"     extract pages/s per worker x{rate:.2f} (target within {MAX_RATE_CHANGE:.0%}): "
          f"{_verdict(abs(rate - 1) <= MAX_RATE_CHANGE)}\n"
          f"     Dask extract throughput, 2 workers vs 1: x{speedup:.2f} (target >= x{MIN_DASK_SPEEDUP}): "
          f"{_verdict(speedup >= MIN_DASK_SPEEDUP)}", flush=True)
    flat = {f"{key}@{n}": value for n, f in figures.items() for key, value in f.items()}
    flat.update({f"dask_{key}@{workers}_workers": value for workers, f in dask.items() for key, value in f.items()
                 if key != "counts"})
    return {**flat, **ratios}


if __name__ == "__main__":
    _child(*sys.argv[1:])
