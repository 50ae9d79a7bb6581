"""Stages 1 and 2a at two dump sizes: pages/s, peak memory per worker and output size, as ratios.

`synthetic_dump` writes a multistream dump (with its index) of N articles plus redirects to them. Article
bodies follow `bench.extract`'s realistic, long-tailed page shape; on top, an infobox on 75% of pages and
a linked lead point at other generated articles with a heavy-tailed in-degree (a target id drawn
log-uniformly, so page k is linked about 1/k as often as page 1), and one article in five has a redirect
(some chained). Each stage runs in a fresh child process on the in-process DirectRunner (one worker), so
the child's peak RSS is the peak memory of one worker. The figures feed docs/SCALING.md's projection.
"""

from __future__ import annotations

import datetime as dt
import json
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


def _child(stage: str, folder: str, dump: str, index: str) -> None:
    """One stage in this process; prints its seconds, peak RSS (MiB) and output bytes as JSON."""
    from graph.walks import run_walks
    from pipeline.extract import run_extract
    from schemas.config import ExtractConfig, WalkConfig

    out = Path(folder)
    started = time.perf_counter()
    if stage == "extract":
        manifest = run_extract(ExtractConfig(dump=dump, index=index, as_of=AS_OF), out / "graph")
        produced = out / "graph"
    else:
        manifest = run_walks(out / "graph", out / "paths", WalkConfig())
        produced = out / "paths"
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in produced.rglob("*.parquet"))
    print(json.dumps({"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "bytes": size, "counts": manifest.counts}))


def _measure(stage: str, folder: Path, dump: Path, index: Path) -> dict:
    result = subprocess.run([sys.executable, "-m", "bench.scale", stage, str(folder), str(dump), str(index)],
                            check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict[str, float]:
    sizes = QUICK_SIZES if quick else SIZES
    figures: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="hopsmith-scale-") as tmp:
        for n in sizes:
            folder = Path(tmp) / str(n)
            folder.mkdir()
            dump, index = synthetic_dump(n, folder)
            extract = _measure("extract", folder, dump, index)
            walk = _measure("walk", folder, dump, index)
            figures[n] = {
                "pages": n, "dump_mib": dump.stat().st_size / 2**20,
                "extract_pages_per_s": n / extract["seconds"], "extract_peak_mib": extract["peak_mib"],
                "graph_mib": extract["bytes"] / 2**20, "relations": extract["counts"]["relations"],
                "walk_s": walk["seconds"], "walk_peak_mib": walk["peak_mib"], "paths": walk["counts"]["paths:kept"],
            }
            f = figures[n]
            print(f"   {n:>7} pages ({f['dump_mib']:.1f} MiB bz2): extract {f['extract_pages_per_s']:.0f} pages/s, "
                  f"peak {f['extract_peak_mib']:.0f} MiB, graph {f['graph_mib']:.1f} MiB ({f['relations']} relations); "
                  f"walk {f['walk_s']:.1f} s, peak {f['walk_peak_mib']:.0f} MiB, {f['paths']} paths", flush=True)
    small, large = (figures[n] for n in sizes)
    ratios = {
        "pages_ratio": large["pages"] / small["pages"],
        "extract_pages_per_s_ratio": large["extract_pages_per_s"] / small["extract_pages_per_s"],
        "extract_peak_mib_ratio": large["extract_peak_mib"] / small["extract_peak_mib"],
        "graph_mib_ratio": large["graph_mib"] / small["graph_mib"],
        "walk_peak_mib_ratio": large["walk_peak_mib"] / small["walk_peak_mib"],
    }
    print(f"   {sizes[1]} vs {sizes[0]} pages (x{ratios['pages_ratio']:.0f}): extract pages/s "
          f"x{ratios['extract_pages_per_s_ratio']:.2f}, extract peak memory x{ratios['extract_peak_mib_ratio']:.2f}, "
          f"graph size x{ratios['graph_mib_ratio']:.2f}, walk peak memory x{ratios['walk_peak_mib_ratio']:.2f}")
    flat = {f"{key}@{n}": value for n, f in figures.items() for key, value in f.items()}
    return {**flat, **ratios}


if __name__ == "__main__":
    _child(*sys.argv[1:5])
