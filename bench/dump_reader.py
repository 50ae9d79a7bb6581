"""Dump reader benchmark: `iter_dump_pages` against the textbook reader, and memory against dump size.

Input: a generated multistream dump (real layout, 100 pages a stream) of ~40 MB of XML (4 MB with
--quick). Baseline, in the same run: `bz2.open` + `xml.etree.ElementTree.iterparse` with `elem.clear()`
after each page, building the same Page records. Both are bound by bz2 decompression, so the ratio
shows the cost of hopsmith's page splitting and damage handling. Times are process CPU seconds (the machine is shared). Peak Python heap (tracemalloc) is
measured on a dump and on one four times its size: the ratio stays near 1 when memory does not grow.
"""

from __future__ import annotations

import bz2
import datetime as dt
import os
import random
import tempfile
import time
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path

from extract.sources.dump import dump_work_units, iter_dump_pages, read_dump_unit
from extract.sources.dump_writer import write_multistream
from schemas.wiki import Page

WORDS = "the river city film born director spouse university company country novel album".split()


def synthetic_pages(count: int, seed: int = 0):
    """Pages of ~4 kB wikitext with an infobox, links and markup that needs XML escaping."""
    rng = random.Random(seed)
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    for i in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(600))
        text = (f"{{{{Infobox person|name=Person {i}|birth_place=[[City {i % 97}]]|spouse={{{{marriage|"
                f"[[Person {i + 1}]]|1990}}}}}}}}\n'''Person {i}''' <ref>a & b</ref> {words}")
        yield Page(page_id=i + 1, title=f"Person {i}", ns=0, revision_id=10_000 + i,
                   timestamp=start + dt.timedelta(minutes=i), text=text,
                   redirect_to=f"Person {i + 1}" if i % 20 == 0 else None)


def _baseline(path: Path) -> int:
    """The usual streaming reader: iterparse over bz2.open, clearing each page element."""
    count = 0
    with bz2.open(path) as stream:
        for _, element in ET.iterparse(stream):
            if element.tag.rpartition("}")[2] != "page":
                continue
            ns = element.tag.rpartition("}")[0] + "}" if element.tag.startswith("{") else ""
            revision = element.find(f"{ns}revision")
            redirect = element.find(f"{ns}redirect")
            Page(page_id=int(element.findtext(f"{ns}id")), title=element.findtext(f"{ns}title"),
                 ns=int(element.findtext(f"{ns}ns")), revision_id=int(revision.findtext(f"{ns}id")),
                 timestamp=revision.findtext(f"{ns}timestamp").replace("Z", "+00:00"),
                 text=revision.findtext(f"{ns}text") or "",
                 redirect_to=redirect.get("title") if redirect is not None else None)
            count += 1
            element.clear()
    return count


def _timed(function) -> tuple[float, object]:
    started = time.process_time()
    result = function()
    return time.process_time() - started, result


def _peak_heap(path: Path) -> int:
    tracemalloc.start()
    for _ in iter_dump_pages(path):
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run(quick: bool) -> dict[str, float]:
    pages = 1_000 if quick else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        dump, index = Path(tmp) / "dump.xml.bz2", Path(tmp) / "index.txt.bz2"
        write_multistream(synthetic_pages(pages), dump, index)
        xml_mb = sum(len(chunk) for chunk in _decompressed(dump)) / 1e6
        compressed_mb = os.path.getsize(dump) / 1e6
        base_s, base_count = _timed(lambda: _baseline(dump))
        ours_s, ours_count = _timed(lambda: sum(1 for _ in iter_dump_pages(dump)))
        units_s, units_count = _timed(
            lambda: sum(1 for unit in dump_work_units(dump, index, 10) for _ in read_dump_unit(unit)))
        assert base_count == ours_count == units_count == pages, (base_count, ours_count, units_count)
        # Both inputs span several read blocks, so the comparison is about dump size, not block size.
        small_pages = pages if quick else pages // 4
        small, large = Path(tmp) / "small.xml.bz2", Path(tmp) / "large.xml.bz2"
        for path, count in ((small, small_pages), (large, 4 * small_pages)):
            if count == pages:
                path = dump.replace(path)
            else:
                write_multistream(synthetic_pages(count), path)
        peak_small, peak_large = _peak_heap(small), _peak_heap(large)
    results = {
        "xml_mb": round(xml_mb, 1),
        "compressed_mb": round(compressed_mb, 1),
        "baseline_mb_per_s": round(xml_mb / base_s, 1),
        "reader_mb_per_s": round(xml_mb / ours_s, 1),
        "reader_pages_per_s": round(pages / ours_s),
        "units_mb_per_s": round(xml_mb / units_s, 1),
        "ratio_vs_baseline": round(base_s / ours_s, 2),
        "peak_heap_mb_small": round(peak_small / 1e6, 2),
        "peak_heap_mb_4x": round(peak_large / 1e6, 2),
        "peak_heap_growth_4x_input": round(peak_large / peak_small, 2),
    }
    print(f"   dump reader: {results['reader_mb_per_s']} MB/s of XML ({results['reader_pages_per_s']} pages/s), "
          f"baseline iterparse {results['baseline_mb_per_s']} MB/s -> ratio {results['ratio_vs_baseline']}x; "
          f"work units {results['units_mb_per_s']} MB/s; peak heap {results['peak_heap_mb_small']} MB -> "
          f"{results['peak_heap_mb_4x']} MB for 4x the input ({results['peak_heap_growth_4x_input']}x)")
    return results


def _decompressed(path: Path):
    with bz2.open(path) as stream:
        while chunk := stream.read(1 << 20):
            yield chunk
