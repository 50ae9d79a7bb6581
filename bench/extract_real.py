"""Stage 1 on real Wikipedia pages: `hopsmith extract` as a user runs it, against a full parse of the same pages.

Input: the English exports of `../shared/wikisamples/xml` (root `xml:lang="en"`; read when present, the
bench is skipped with its reason when not), their article-namespace pages repeated under new titles and page
ids ("Title (copy 2)") to 2,060 pages (the held-out measure of issue 28; 400 with --quick) and written as a
multistream dump with its index. Every figure is CPU seconds (the machine is shared), each measured in a
fresh process; the command's figures are the median of RUNS runs, taken in turn:

- `stage`: the whole `hopsmith extract` command with one worker (imports, both phases, the shards), as a
  user runs it: Beam's default in-process runner, whose steps run as plain calls (`extract.in_process`);
- `stage_beam`: the same command through the Beam pipeline (`--direct_running_mode multi_threading`: the
  same runner in this process, one worker), the path every other runner takes;
- `start_up`, `start_up_beam`: both on the first 3 pages, i.e. their fixed cost (target < 3 s);
- `core`: the per-page work alone (`classify_record` + `extract_article`, as `bench/extract.py` times it);
- `full_parse`: `mwparserfromhell.parse` of every page's text, the baseline (target: stage >= 6x faster);
- `bz2_floor`: decompressing the dump, what no reader of it can go below (target: stage within 1.5x).
"""

from __future__ import annotations

import bz2
import datetime as dt
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import mwparserfromhell

from bench import children_cpu_s, in_fresh_process
from extract.sources import iter_dump_pages
from extract.sources.dump_writer import write_multistream
from ground.io import read_manifest
from schemas.wiki import Page

REPOSITORY = Path(__file__).resolve().parents[1]
XML_SAMPLES = REPOSITORY.parent / "shared" / "wikisamples" / "xml"
PAGES, QUICK_PAGES, START_UP_PAGES = 2_060, 400, 3
RUNS, QUICK_RUNS = 3, 1
BEAM_PIPELINE = ("--direct_running_mode", "multi_threading")  # the pipeline, not the in-process path
AS_OF = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def english_exports(folder: Path = XML_SAMPLES) -> list[Path]:
    """The exports of English Wikipedia in `folder`: those whose `<mediawiki>` root says `xml:lang="en"`."""
    def head(path: Path) -> bytes:
        with (bz2.open(path) if path.suffix == ".bz2" else open(path, "rb")) as handle:
            return handle.read(4096)

    return [path for path in sorted(folder.glob("*.xml*")) if b'xml:lang="en"' in head(path)]


def real_pages(exports: list[Path], count: int) -> Iterator[Page]:
    """`count` article-namespace pages of the exports, repeated under new titles and ids once they run out."""
    originals = [page for path in exports for page in iter_dump_pages(str(path))
                 if isinstance(page, Page) and page.ns == 0]
    if not originals:  # nothing to repeat: the copies below would never end
        raise ValueError(f"no article-namespace page in {[str(path) for path in exports]}")
    copies = ((copy, page) for copy in itertools.count(1) for page in originals)
    for page_id, (copy, page) in enumerate(itertools.islice(copies, count), start=1):
        title = page.title if copy == 1 else f"{page.title} (copy {copy})"
        yield page.model_copy(update={"title": title, "page_id": page_id})


def stage_cpu(dump: Path, index: Path, out: Path, *options: str) -> dict[str, float]:
    """`hopsmith extract` in a child process: its CPU seconds and wall seconds."""
    command = [sys.executable, "-m", "cli.main", "extract", "--dump", str(dump), "--index", str(index),
               "--out", str(out), *options]
    cpu, wall = children_cpu_s(), time.perf_counter()
    subprocess.run(command, cwd=REPOSITORY, check=True, capture_output=True, text=True)
    return {"cpu_s": children_cpu_s() - cpu, "wall_s": time.perf_counter() - wall}


def median_runs(dumps: dict[str, tuple[Path, Path]], work: Path, runs: int) -> dict[str, dict[str, float]]:
    """Each command's median CPU and wall seconds over `runs` fresh runs, the commands taken in turn so that
    a change in the machine's load falls on all of them."""
    commands = {"stage": ("full", ()), "stage_beam": ("full", BEAM_PIPELINE),
                "start_up": ("start_up", ()), "start_up_beam": ("start_up", BEAM_PIPELINE)}
    measured: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for run_ in range(runs):
        for name, (dump, options) in commands.items():
            measured[name].append(stage_cpu(*dumps[dump], work / f"{name}-{run_}", *options))
    return {name: {key: statistics.median(m[key] for m in found) for key in ("cpu_s", "wall_s")}
            for name, found in measured.items()}


def _page_work(dump: str, method: str, queue) -> None:
    """Child process: the pages read first (not timed), then only `method`'s calls timed."""
    pages = [page for page in iter_dump_pages(dump) if isinstance(page, Page)]
    if method == "core":
        from extract.article import extract_article
        from extract.classify import classify_record
        from knowledge.ontology import load_ontology
        from schemas.config import ExtractConfig

        config = ExtractConfig(max_page_bytes=10_000_000, page_timeout_s=60)
        load_ontology()
        started = time.process_time()
        for page in pages:
            if isinstance(outcome := classify_record(page), Page):
                extract_article(outcome, str, AS_OF, config)
    else:
        started = time.process_time()
        for page in pages:
            mwparserfromhell.parse(page.text)
    queue.put({"cpu_s": time.process_time() - started, "pages": len(pages),
               "mb": sum(len(page.text.encode("utf-8")) for page in pages) / 1e6})


def bz2_floor(dump: Path) -> float:
    started = time.process_time()
    with bz2.open(dump) as stream:
        while stream.read(1 << 22):
            pass
    return time.process_time() - started


def run(quick: bool = False) -> dict[str, float | str]:
    exports = english_exports() if XML_SAMPLES.is_dir() else []
    if not exports:
        reason = f"no English export in {XML_SAMPLES}" if XML_SAMPLES.is_dir() else f"{XML_SAMPLES} is absent"
        print(f"   skipped: {reason}")
        return {"skipped": reason}
    count = QUICK_PAGES if quick else PAGES
    with tempfile.TemporaryDirectory(prefix="hopsmith-bench-real-") as folder:
        work = Path(folder)
        dumps = {}
        for name, size in (("full", count), ("start_up", START_UP_PAGES)):
            dumps[name] = (work / f"{name}-pages-articles-multistream.xml.bz2", work / f"{name}-index.txt.bz2")
            write_multistream(real_pages(exports, size), *dumps[name])
        commands = median_runs(dumps, work, QUICK_RUNS if quick else RUNS)
        stage, start_up = commands["stage"], commands["start_up"]
        same_files = all(read_manifest(work / f"{name}-0").files == read_manifest(work / f"{name}_beam-0").files
                         for name in ("stage", "start_up"))
        core = in_fresh_process(_page_work, str(dumps["full"][0]), "core")
        parse = in_fresh_process(_page_work, str(dumps["full"][0]), "full_parse")
        floor = bz2_floor(dumps["full"][0])
        compressed_mb = dumps["full"][0].stat().st_size / 1e6
    results: dict[str, float | str] = {
        "exports": len(exports),
        "pages": parse["pages"],
        "text_mb": round(parse["mb"], 2),
        "compressed_mb": round(compressed_mb, 2),
        "runs": QUICK_RUNS if quick else RUNS,
        "stage_cpu_s": round(stage["cpu_s"], 2),
        "stage_wall_s": round(stage["wall_s"], 2),
        "stage_beam_cpu_s": round(commands["stage_beam"]["cpu_s"], 2),
        "paths_byte_identical": same_files,
        "start_up_cpu_s": round(start_up["cpu_s"], 2),
        "start_up_wall_s": round(start_up["wall_s"], 2),
        "start_up_beam_cpu_s": round(commands["start_up_beam"]["cpu_s"], 2),
        "core_cpu_s": round(core["cpu_s"], 2),
        "full_parse_cpu_s": round(parse["cpu_s"], 2),
        "bz2_floor_cpu_s": round(floor, 2),
        "stage_speedup_vs_full_parse": round(parse["cpu_s"] / stage["cpu_s"], 2),
        "stage_beam_speedup_vs_full_parse": round(parse["cpu_s"] / commands["stage_beam"]["cpu_s"], 2),
        "core_speedup_vs_full_parse": round(parse["cpu_s"] / core["cpu_s"], 2),
        "stage_over_bz2_floor": round(stage["cpu_s"] / floor, 2),
    }
    print(f"   real pages: {results['pages']} pages of {len(exports)} English exports, {results['text_mb']} MB of "
          f"text ({results['compressed_mb']} MB bz2), one worker, CPU seconds")
    print(f"   stage   : hopsmith extract {results['stage_cpu_s']} s -> {results['stage_speedup_vs_full_parse']}x "
          f"a full parse ({results['full_parse_cpu_s']} s; target >= 6x), {results['stage_over_bz2_floor']}x the "
          f"bz2 floor ({results['bz2_floor_cpu_s']} s; target <= 1.5x)")
    print(f"   Beam    : the pipeline path {results['stage_beam_cpu_s']} s -> "
          f"{results['stage_beam_speedup_vs_full_parse']}x a full parse (medians of {results['runs']} runs); "
          f"output files byte-identical to the in-process path's: {same_files}")
    print(f"   start-up: {results['start_up_cpu_s']} s CPU ({results['start_up_wall_s']} s wall) on "
          f"{START_UP_PAGES} pages (target < 3 s); the pipeline path {results['start_up_beam_cpu_s']} s")
    print(f"   core    : {results['core_cpu_s']} s, {results['core_speedup_vs_full_parse']}x the full parse "
          "(classify + extract_article per page)")
    return results
