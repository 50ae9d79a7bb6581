"""Stage 1 extraction throughput against a full-parse baseline, and its memory at two dump sizes.

A seeded generator writes realistic articles (an infobox with nested date, list, convert and flag templates
and references; a linked lead; sections of linked, referenced prose; tables, navboxes, categories) into a
temporary multistream dump. Each measurement runs in a fresh child process that streams the dump page by
page: `extract` is the stage's core (`classify_record` + `extract_article`: scanner, infobox spans, lead),
`baseline` a plain `mwparserfromhell.parse` of every whole page plus the same infobox walk (`boxes_in`). Only the time
inside those calls counts (the dump reader has its own benchmark); the child's peak RSS shows whether
memory grows with the dump (it should not: pages stream through one at a time).
"""

from __future__ import annotations

import datetime as dt
import random
import resource
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import mwparserfromhell

from bench import in_fresh_process
from extract.article import extract_article
from extract.classify import classify_record, resolve_redirects
from extract.sources import iter_dump_pages
from extract.sources.dump_writer import write_multistream
from schemas.config import ExtractConfig
from schemas.wiki import Page, SkippedRecord
from wikitext.infobox import boxes_in

AS_OF = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
WORDS = ("the of and in to was is for on as by with from at his her film city river university company "
         "released directed written population located founded known became during after under second "
         "national early history career award novel series studio season album station county district").split()
NAMES = [f"{first} {last}" for first in ("Anna", "Ben", "Clara", "David", "Elena", "Farid", "Grace", "Hiro",
                                          "Ines", "Jonas", "Kofi", "Lena")
         for last in ("Adams", "Brandt", "Costa", "Dubois", "Evans", "Fischer", "Garcia", "Huang", "Ivanov")]
PLACES = [f"{p} {s}" for p in ("North", "South", "Port", "Lake", "New", "Upper") for s in
          ("Haven", "Ridge", "Falls", "Bridge", "Field", "Wood", "Stone", "Mouth")]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
COUNTRIES = ["France", "Germany", "United States", "Canada", "Japan", "Brazil", "India", "Kenya"]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _link(rng: random.Random) -> str:
    target = rng.choice(NAMES + PLACES + COUNTRIES)
    return f"[[{target}]]" if rng.random() < 0.6 else f"[[{target}|{target.split()[0].lower()}]]"


def _ref(rng: random.Random) -> str:
    """A reference as editors write them: mostly full citation templates, some named re-uses."""
    if rng.random() < 0.25:
        return f'<ref name="r{rng.randrange(50)}" />'
    kind = rng.choice(["web", "news", "book", "journal"])
    last, first = rng.choice(NAMES).split()[1], rng.choice(NAMES).split()[0]
    slug = _words(rng, 2).replace(" ", "-")
    return (
        f"<ref>{{{{cite {kind} |last={last} |first={first} |date={rng.randrange(1, 28)} {rng.choice(MONTHS)} "
        f"{rng.randrange(1990, 2025)} |title={_words(rng, 6).title()} |url=https://example.org/{slug} "
        f"|website={rng.choice(WORDS).title()} |publisher={rng.choice(NAMES)} |access-date={rng.randrange(1, 28)} "
        f"{rng.choice(MONTHS)} {rng.randrange(2005, 2025)} |archive-url=https://web.archive.org/web/2020/"
        f"https://example.org/{slug} |archive-date={rng.randrange(2005, 2025)}-05-1{rng.randrange(10)} "
        "|url-status=live}}</ref>"
    )


def _token(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.12:
        return _link(rng)
    if roll < 0.13:
        return f"{{{{convert|{rng.randrange(1, 900)}|km|mi}}}}"
    if roll < 0.14:
        return f"{{{{lang|fr|''{_words(rng, 2)}''}}}}"
    if roll < 0.15:
        return "'''" + rng.choice(WORDS) + "'''"
    return rng.choice(WORDS)


def _sentence(rng: random.Random) -> str:
    text = " ".join(_token(rng) for _ in range(rng.randrange(8, 22)))
    refs = "".join(_ref(rng) for _ in range(rng.choice((0, 0, 1, 1, 2))))
    note = f"{{{{efn|{_words(rng, 8)} {_link(rng)}.}}}}" if rng.random() < 0.03 else ""
    return text[0].upper() + text[1:] + "." + refs + note


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randrange(3, 8)))


def _infobox(rng: random.Random, title: str) -> str:
    kind = rng.choice(["person", "film", "settlement", "company", "book", "river"])
    people = "\n".join(f"* {_link(rng)}" for _ in range(rng.randrange(2, 6)))
    lines = [
        f"{{{{Infobox {kind}", f"| name = {title}", f"| image = {title}.jpg", "| image_size = 250px",
        f"| caption = {_words(rng, 6)} {_link(rng)}",
        f"| birth_date = {{{{birth date and age|{rng.randrange(1900, 2000)}|{rng.randrange(1, 13)}|"
        f"{rng.randrange(1, 28)}}}}}",
        f"| birth_place = {_link(rng)}, {_link(rng)}{_ref(rng)}",
        f"| spouse = {{{{marriage|{_link(rng)}|{rng.randrange(1950, 2000)}|{rng.randrange(2000, 2020)}|end=div}}}}",
        f"| starring = {{{{plainlist|\n{people}\n}}}}",
        f"| genre = {{{{hlist|{rng.choice(WORDS)}|{rng.choice(WORDS)}|{_link(rng)}}}}}",
        f"| country = {{{{flag|{rng.choice(COUNTRIES)}}}}}",
        f"| length = {{{{convert|{rng.randrange(10, 900)}|km|mi|abbr=on}}}}",
        f"| population_total = {rng.randrange(1000, 9_000_000):,}{_ref(rng)}",
        f"| released = {{{{film date|{rng.randrange(1950, 2024)}|{rng.randrange(1, 13)}|{rng.randrange(1, 28)}}}}}",
        f"| alma_mater = {_link(rng)}<br />{_link(rng)} ({_link(rng)})",
        f"| occupation = {_words(rng, 3)}<!-- hidden note -->",
    ]
    for index in range(1, rng.randrange(2, 12)):
        lines.append(f"| subdivision_name{index} = {_link(rng)}")
    return "\n".join(lines) + "\n}}\n"


def _table(rng: random.Random) -> str:
    rows = "".join(
        f"|-\n| {rng.randrange(1990, 2024)} || ''{_link(rng)}'' || {_words(rng, 3)} || "
        f"{{{{sort|{rng.randrange(100)}|{rng.randrange(100)}}}}}{_ref(rng) if rng.random() < 0.3 else ''}\n"
        for _ in range(rng.randrange(4, 15))
    )
    return '{| class="wikitable sortable"\n! Year !! Title !! Role !! Notes\n' + rows + "|}\n"


def generate_page(rng: random.Random, page_id: int) -> Page:
    """One article of realistic shape; sizes follow a long tail (most short, a few very long)."""
    title = f"{rng.choice(NAMES)} {page_id}"
    sections = min(int(rng.paretovariate(1.3)) + 1, 40)
    parts = ["{{Short description|" + _words(rng, 5) + "}}\n{{Use dmy dates|date=March 2020}}\n"]
    if rng.random() < 0.75:
        parts.append(_infobox(rng, title))
    parts.append(f"'''{title}''' is a {_words(rng, 4)} in {_link(rng)}. " + _paragraph(rng) + "\n\n"
                 + _paragraph(rng) + "\n")
    for number in range(sections):
        parts.append(f"\n== {_words(rng, 2).title()} {number} ==\n{{{{Main|{rng.choice(PLACES)}}}}}\n")
        if rng.random() < 0.4:
            parts.append(f"[[File:{_words(rng, 2).title()}.jpg|thumb|upright=1.2|{_words(rng, 6)} {_link(rng)}]]\n")
        parts.extend(_paragraph(rng) + "\n\n" for _ in range(rng.randrange(1, 5)))
        if rng.random() < 0.25:
            parts.append(_table(rng))
    navbox = " ".join("{{*}} " + _link(rng) for _ in range(rng.randrange(10, 40)))
    parts.append(
        "\n== References ==\n{{Notelist}}\n{{Reflist|30em}}\n\n== External links ==\n"
        f"* {{{{Official website|https://example.org/{page_id}}}}}\n* {{{{IMDb name|{page_id}}}}}\n\n"
        f"{{{{Navbox\n| name = Nav {page_id}\n| title = {_link(rng)}\n| list1 = {navbox}\n}}}}\n"
        "{{Authority control}}\n" + "".join(f"[[Category:{_words(rng, 2).title()}]]\n" for _ in range(6))
    )
    return Page(page_id=page_id, title=title, ns=0, revision_id=page_id * 7,
                timestamp=AS_OF - dt.timedelta(days=rng.randrange(400)), text="".join(parts))


def generated_pages(target_bytes: int, seed: int = 0) -> Iterator[Page]:
    rng = random.Random(seed)
    written, page_id = 0, 1
    while written < target_bytes:
        page = generate_page(rng, page_id)
        written += len(page.text.encode("utf-8"))
        page_id += 1
        yield page


def _baseline(page: Page) -> int:
    return sum(len(box.facts) for box in boxes_in(mwparserfromhell.parse(page.text)))


def _extract(page: Page, resolve, config: ExtractConfig) -> int:
    if not isinstance(classify_record(page), Page):
        return 0
    result = extract_article(page, resolve, AS_OF, config)
    return 0 if isinstance(result, SkippedRecord) else len(result.relations)


def _measure(dump: str, method: str, queue) -> None:
    """Child process: stream the dump, time only the extraction calls (CPU time: the machine is shared, and
    throughput is per core), report peak RSS."""
    config = ExtractConfig(max_page_bytes=10_000_000, page_timeout_s=60)
    resolve = resolve_redirects({}).resolve
    pages = bytes_in = facts = 0
    spent = 0.0
    for record in iter_dump_pages(dump):
        text_bytes = len(record.text.encode("utf-8"))
        started = time.process_time()
        facts += _baseline(record) if method == "baseline" else _extract(record, resolve, config)
        spent += time.process_time() - started
        pages += 1
        bytes_in += text_bytes
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put({"pages": pages, "mb": bytes_in / 1e6, "seconds": spent, "facts": facts, "peak_rss_mb": peak_mb})


def measure(dump: str, method: str) -> dict:
    return in_fresh_process(_measure, dump, method)


def run(quick: bool = False) -> dict[str, float]:
    full_bytes, small_bytes = (5_000_000, 1_000_000) if quick else (50_000_000, 10_000_000)
    with tempfile.TemporaryDirectory(prefix="hopsmith-bench-extract-") as folder:
        dumps = {}
        for name, size in (("small", small_bytes), ("full", full_bytes)):
            dumps[name] = str(Path(folder) / f"{name}-pages-articles-multistream.xml.bz2")
            write_multistream(generated_pages(size, seed=1), dumps[name])
        small = measure(dumps["small"], "extract")
        ours = measure(dumps["full"], "extract")
        base = measure(dumps["full"], "baseline")
    results = {
        "input_mb": round(ours["mb"], 2),
        "pages": ours["pages"],
        "extract_mb_per_s": round(ours["mb"] / ours["seconds"], 2),
        "extract_articles_per_s": round(ours["pages"] / ours["seconds"], 1),
        "baseline_mb_per_s": round(base["mb"] / base["seconds"], 2),
        "baseline_articles_per_s": round(base["pages"] / base["seconds"], 1),
        "speedup_vs_full_parse": round(base["seconds"] / ours["seconds"], 2),
        "relations_extract": ours["facts"],
        "infobox_facts_baseline": base["facts"],
        "peak_rss_mb_small": round(small["peak_rss_mb"], 1),
        "peak_rss_mb_full": round(ours["peak_rss_mb"], 1),
        "small_input_mb": round(small["mb"], 2),
    }
    print(f"   extract : {results['extract_mb_per_s']:.2f} MB/s, {results['extract_articles_per_s']:.0f} articles/s "
          f"({results['input_mb']} MB, {results['pages']} pages, one worker, CPU time)")
    print(f"   baseline: {results['baseline_mb_per_s']:.2f} MB/s, {results['baseline_articles_per_s']:.0f} articles/s "
          "(full mwparserfromhell.parse + the same infobox walk)")
    print(f"   ratio   : {results['speedup_vs_full_parse']:.2f}x the baseline (target >= 3x, >= 5 MB/s)")
    print(f"   peak RSS: {results['peak_rss_mb_small']} MB at {results['small_input_mb']} MB input, "
          f"{results['peak_rss_mb_full']} MB at {results['input_mb']} MB input")
    return results

