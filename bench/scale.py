"""Stages 1 and 2a at two dump sizes: pages/s, peak memory per worker and output size, as ratios.

`synthetic_dump` writes a multistream dump (with its index) of N articles plus redirects to them. Article
bodies follow `bench.extract`'s realistic, long-tailed page shape; on top, an infobox on 75% of pages and
a linked lead point at other generated articles with a heavy-tailed in-degree (a target id drawn
log-uniformly, so page k is linked about 1/k as often as page 1), and one article in five has a redirect
(some chained). Each run is a fresh child process on the in-process runner. Extract and walk run with
their worker in a process of its own (`WORKER_PROCESS`): the runner process holds the shuffle, as a
distributed runner's shuffle service does, and the worker process's peak RSS is the memory per worker.
Extract also runs on a dask.distributed LocalCluster (127.0.0.1) of 2 single-threaded worker processes at
both sizes (each worker's peak RSS and CPU seconds, pages/s per worker: a real multi-process engine,
whose workers hold their share of the shuffle), and of 1 at the smaller size (pages/s on 2 workers
against 1). Optional: extract in one process (runner, shuffle and worker together). Every figure both
sizes have is printed as a ratio, and issue 13's targets with PASS or MISS for each runner; the figures
feed docs/SCALING.md's projection.

Sizes: 2,000 and 8,000 articles (`--quick`: 300 and 1,200); `HOPSMITH_SCALE_SIZES=100000,400000` sets
others (the issue's full check: hours on 2 cores), `HOPSMITH_SCALE_RUNS=worker,walk` picks the runs
(default: all of RUNS), `HOPSMITH_SCALE_DUMPS=DIR` keeps the generated dumps for the next run (the make
variables SCALE_SIZES, SCALE_RUNS, SCALE_DUMPS set them). Timings are only meaningful on an idle machine,
so the load average is printed with them.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import pickle
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.extract import _paragraph, _words
from extract.sources.dump_writer import write_multistream
from schemas.wiki import Page

AS_OF = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SIZES = (2_000, 8_000)
QUICK_SIZES = (300, 1_200)
SIZES_ENV = "HOPSMITH_SCALE_SIZES"
# which runs: "worker" (extract on the in-process runner with a worker process), "process" (extract in one
# process), "walk" (walk with a worker process), "dask" (extract on 2 Dask workers at both sizes, and on 1
# at the smaller size): the targets are checked on "worker" and on "dask"
RUNS_ENV = "HOPSMITH_SCALE_RUNS"
RUNS = ("worker", "process", "walk", "dask")
DUMPS_ENV = "HOPSMITH_SCALE_DUMPS"  # a folder that keeps the generated dumps for the next run
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


def _runs() -> tuple[str, ...]:
    given = os.environ.get(RUNS_ENV)
    runs = tuple(r.strip() for r in given.split(",")) if given else RUNS
    if unknown := set(runs) - set(RUNS):
        raise SystemExit(f"{RUNS_ENV}: unknown run(s) {sorted(unknown)}; choose from {', '.join(RUNS)}")
    if not {"worker", "dask"} & set(runs):
        raise SystemExit(f"{RUNS_ENV}: the targets are about the worker or the dask run; keep one")
    return runs


def cached_dump(n: int, folder: Path) -> tuple[Path, Path]:
    """`synthetic_dump` of n pages under folder/n, written once (into a temporary folder renamed when
    complete): the generator is deterministic, so a kept dump is the same bytes."""
    done = folder / str(n)
    if not done.is_dir():
        partial = Path(tempfile.mkdtemp(prefix=f".{n}-", dir=folder))
        synthetic_dump(n, partial)
        partial.rename(done)
    return (done / f"synthetic{n}-pages-articles-multistream.xml.bz2",
            done / f"synthetic{n}-pages-articles-multistream-index.txt.bz2")


def _child(stage: str, source: str, out: str, index: str = "", *beam_args: str) -> None:
    """One stage in this process (extract: dump -> out; walk: graph folder -> out); prints its seconds,
    peak RSS (MiB) of this process and of its worker process, and output bytes as JSON. `side_input`: the
    pickled size of the walk's graph side input, and of the relation rows it leaves in the shards."""
    from extract.stage import run_extract
    from graph.walk_stage import run_walks
    from schemas.config import ExtractConfig, WalkConfig

    if stage == "side_input":
        print(json.dumps(_side_input_mib(source, WalkConfig())))
        return
    started = time.perf_counter()
    if stage == "extract":
        manifest = run_extract(ExtractConfig(dump=source, index=index, as_of=AS_OF), out, beam_args=list(beam_args))
    else:
        manifest = run_walks(source, out, WalkConfig(), beam_args=list(beam_args))
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in Path(out).rglob("*.parquet"))
    print(json.dumps({"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "worker_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                      "bytes": size, "counts": manifest.counts}))


def _side_input_mib(graph_dir: str, config) -> dict[str, float]:
    """Pickled MiB of the walk worker's graph (`keep_relations=False`, as `WalkTransform` loads it) and of
    the walkable relation rows a graph with them would add."""
    from graph.csr import load_csr

    load = functools.partial(load_csr, graph_dir, as_of=AS_OF.date(), window_days=182,
                             exclude_relations=config.exclude_relations, mapped_only=config.mapped_only)
    walking = len(pickle.dumps(load(keep_relations=False))) / 2**20
    rows = len(pickle.dumps(load().relations)) / 2**20
    return {"walk_graph_mib": walking, "relation_rows_mib": rows}


def _measure(stage: str, source: Path, out: Path, index: Path | None, *beam_args: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "bench.scale", stage, str(source), str(out), str(index or ""),
                             *beam_args], check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _on_dask(workers: int, folder: Path, dump: Path, index: Path) -> dict:
    """Extract on a fresh LocalCluster of `workers` single-threaded processes (so each worker's lifetime
    peak RSS is this run's): seconds (cluster start not counted), each worker's peak RSS and CPU seconds
    (how evenly the work was split, whatever the load)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit=0) as cluster, Client(cluster) as client:
        figures = _measure("extract", dump, folder / "graph", index, "--runner", "DaskRunner",
                           "--dask_client_address", cluster.scheduler_address)
        figures["worker_peak_mib"] = sorted(client.run(_peak_rss_mib).values())
        figures["worker_cpu_s"] = sorted(client.run(_cpu_seconds).values())
    return figures


def _dask_figures(n: int, workers: int, run: dict) -> dict:
    """One Dask run's figures per worker: the largest worker's peak, pages/s and CPU seconds per worker."""
    return {"dask_pages_per_s_per_worker": n / run["seconds"] / workers,
            "dask_worker_peak_mib": max(run["worker_peak_mib"]),
            "dask_worker_cpu_s": sum(run["worker_cpu_s"]) / workers, "dask_graph_mib": run["bytes"] / 2**20}


def _dask_line(n: int, workers: int, run: dict) -> str:
    return (f"     extract on Dask, {workers} worker process(es): {n / run['seconds']:.0f} pages/s "
            f"({n / run['seconds'] / workers:.0f} per worker), worker peak "
            f"{', '.join(f'{m:.0f}' for m in run['worker_peak_mib'])} MiB, worker CPU "
            f"{', '.join(f'{c:.0f}' for c in run['worker_cpu_s'])} s; {_load()}")


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"


def _one_size(n: int, folder: Path, dumps: Path, runs: tuple[str, ...]) -> dict:
    """Every selected run at one size; extract's figures per worker come from the worker-process run (the
    in-process runner) and from the 2-worker Dask run."""
    dump, index = cached_dump(n, dumps)
    figures: dict = {"pages": n, "dump_mib": dump.stat().st_size / 2**20}
    line = f"   {n:>7} pages ({figures['dump_mib']:.1f} MiB bz2), {_load()}:"
    if "worker" in runs:
        separate = _measure("extract", dump, folder / "graph", index, *WORKER_PROCESS)
        figures.update({
            "extract_pages_per_s": n / separate["seconds"], "extract_worker_peak_mib": separate["worker_peak_mib"],
            "extract_runner_peak_mib": separate["peak_mib"], "graph_mib": separate["bytes"] / 2**20,
            "relations": separate["counts"]["relations"]})
        line += (f"\n     extract with a worker process: {figures['extract_pages_per_s']:.0f} pages/s, worker peak "
                 f"{figures['extract_worker_peak_mib']:.0f} MiB, runner (holds the shuffle) "
                 f"{figures['extract_runner_peak_mib']:.0f} MiB; graph {figures['graph_mib']:.1f} MiB "
                 f"({figures['relations']} relations)")
    if "dask" in runs:
        on_dask = _on_dask(2, folder / "dask2", dump, index)
        figures.update(_dask_figures(n, 2, on_dask))
        line += "\n" + _dask_line(n, 2, on_dask)
    if "process" in runs:
        one = _measure("extract", dump, folder / "one-process", index)
        figures.update({"extract_one_process_pages_per_s": n / one["seconds"],
                        "extract_one_process_peak_mib": one["peak_mib"]})
        line += (f"\n     extract in one process (runner, shuffle and worker): "
                 f"{figures['extract_one_process_pages_per_s']:.0f} pages/s, peak "
                 f"{figures['extract_one_process_peak_mib']:.0f} MiB")
    if "walk" in runs:
        graph = folder / "graph" if "worker" in runs else folder / "dask2" / "graph"
        walk = _measure("walk", graph, folder / "paths", None, *WORKER_PROCESS)
        figures.update({"walk_s": walk["seconds"], "walk_worker_peak_mib": walk["worker_peak_mib"],
                        "walk_runner_peak_mib": walk["peak_mib"], "paths": walk["counts"]["paths:kept"],
                        "walk_paths_per_s": walk["counts"]["paths:kept"] / walk["seconds"],
                        "paths_mib": walk["bytes"] / 2**20, "graph_nodes": walk["counts"]["graph:nodes"],
                        "graph_edges": walk["counts"]["graph:edges"],
                        **_measure("side_input", graph, folder / "paths", None)})
        line += (f"\n     walk with a worker process: {figures['paths']} paths in {figures['walk_s']:.0f} s "
                 f"({figures['walk_paths_per_s']:.0f} paths/s), worker peak {figures['walk_worker_peak_mib']:.0f} "
                 f"MiB, runner {figures['walk_runner_peak_mib']:.0f} MiB; paths {figures['paths_mib']:.1f} MiB; the "
                 f"graph side input: {figures['graph_nodes']} nodes, {figures['graph_edges']} edges, "
                 f"{figures['walk_graph_mib']:.1f} MiB pickled (the relation rows it reads by row instead: "
                 f"{figures['relation_rows_mib']:.1f} MiB)")
    print(line, flush=True)
    return figures


def _ratio_lines(small: dict, large: dict) -> tuple[dict[str, float], list[str]]:
    """Every figure both sizes have, larger over smaller, and the lines that print them."""
    ratios = {f"{key}_ratio": large[key] / small[key] for key in large
              if key in small and key != "pages" and small[key]}
    ratios["pages_ratio"] = large["pages"] / small["pages"]
    lines = [f"     {key.removesuffix('_ratio')}: x{value:.2f}" for key, value in ratios.items() if key != "pages_ratio"]
    return ratios, lines


def _targets(ratios: dict[str, float], memory_key: str, rate_key: str, runner: str) -> list[str]:
    """Issue 13's two per-worker targets on one runner, as PASS or MISS."""
    memory, rate = ratios[memory_key], ratios[rate_key]
    return [f"     {runner}: extract peak memory per worker x{memory:.2f} for x{ratios['pages_ratio']:.0f} pages "
            f"(target <= x{MAX_MEMORY_GROWTH}): {_verdict(memory <= MAX_MEMORY_GROWTH)}",
            f"     {runner}: extract pages/s per worker x{rate:.2f} (target within {MAX_RATE_CHANGE:.0%}): "
            f"{_verdict(abs(rate - 1) <= MAX_RATE_CHANGE)}"]


def run(quick: bool = False) -> dict[str, float]:
    sizes, runs = _sizes(quick), _runs()
    print(f"   sizes {sizes[0]:,} and {sizes[1]:,} articles; runs {', '.join(runs)}; {_load()}", flush=True)
    figures: dict[int, dict] = {}
    kept = os.environ.get(DUMPS_ENV)
    one_worker: dict = {}
    with tempfile.TemporaryDirectory(prefix="hopsmith-scale-") as tmp:
        dumps = Path(kept) if kept else Path(tmp) / "dumps"
        dumps.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            figures[n] = _one_size(n, Path(tmp) / str(n), dumps, runs)
        if "dask" in runs:  # the speedup at the smaller size: a 1-worker run at the larger one takes longest
            dump, index = cached_dump(sizes[0], dumps)
            one_worker = _on_dask(1, Path(tmp) / "dask1", dump, index)
            print(_dask_line(sizes[0], 1, one_worker).replace("     ", f"   {sizes[0]} pages: ", 1), flush=True)
    ratios, lines = _ratio_lines(figures[sizes[0]], figures[sizes[1]])
    print(f"   {sizes[1]:,} vs {sizes[0]:,} pages (x{ratios['pages_ratio']:.0f}), larger over smaller:", *lines,
          sep="\n", flush=True)
    targets = []
    if "worker" in runs:
        targets += _targets(ratios, "extract_worker_peak_mib_ratio", "extract_pages_per_s_ratio",
                            "in-process runner (worker process)")
    if "dask" in runs:
        targets += _targets(ratios, "dask_worker_peak_mib_ratio", "dask_pages_per_s_per_worker_ratio",
                            "Dask, 2 workers")
        two = figures[sizes[0]]["dask_pages_per_s_per_worker"] * 2
        speedup = ratios["dask_2_vs_1_worker_throughput"] = two / (sizes[0] / one_worker["seconds"])
        targets.append(f"     Dask extract throughput at {sizes[0]:,} pages, 2 workers vs 1: x{speedup:.2f} "
                       f"(target >= x{MIN_DASK_SPEEDUP}): {_verdict(speedup >= MIN_DASK_SPEEDUP)}")
    print(f"   issue 13 targets ({_load()}; timings need an idle machine):", *targets, sep="\n", flush=True)
    flat = {f"{key}@{n}": value for n, f in figures.items() for key, value in f.items()}
    if one_worker:
        flat.update({f"{key}@{sizes[0]}_1_worker": value
                     for key, value in _dask_figures(sizes[0], 1, one_worker).items()})
    return {**flat, **ratios}


if __name__ == "__main__":
    _child(*sys.argv[1:])
