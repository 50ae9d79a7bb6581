"""The shipped sample dump is what every stage and test reads: check it is what it claims to be.

Stdlib only (bz2, xml, json): these tests check the sample itself, not the extractor.
"""

from __future__ import annotations

import bz2
import datetime as dt
import hashlib
import html
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_DIR = ROOT / "data" / "sample"
DUMP = SAMPLE_DIR / "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX = SAMPLE_DIR / "enwiki-sample-pages-articles-multistream-index.txt.bz2"
FACTS = ROOT / "tests" / "data" / "sample_facts.json"
NS = "{http://www.mediawiki.org/xml/export-0.11/}"
DISAMBIGUATION_RE = re.compile(r"\{\{\s*(?:disambiguation|dab|disamb)\s*[|}]", re.IGNORECASE)
INFOBOX_RE = re.compile(r"\{\{\s*infobox[ _]+([^|\n}<]+)", re.IGNORECASE)
WIKILINK_RE = re.compile(r"\[\[([^\[\]|]+)(?:\|[^\[\]]*)?\]\]")
FILE_LINK_PREFIXES = ("file:", "image:", "category:")
VALUE_FORMATS = {  # the brief's literal conventions: ISO (partial) dates, plain decimal numbers
    "date": r"\d{4}(-\d{2}(-\d{2})?)?",
    "number": r"-?\d+(\.\d+)?",
    "quantity": r"-?\d+(\.\d+)?",
    "string": r"\S(.*\S)?",
}


@dataclass(frozen=True)
class DumpPage:
    title: str
    ns: int
    page_id: int
    revision_id: int
    timestamp: dt.datetime
    redirect: str | None
    text: str
    text_bytes_attr: int
    sha1: str


def normalise_title(raw: str) -> str:
    """MediaWiki title normalisation used by links: anchor dropped, underscores, first letter upper."""
    title = raw.split("#", 1)[0].replace("_", " ").strip()
    title = re.sub(r"\s+", " ", title)
    return title[:1].upper() + title[1:]


def _page_from_element(element: ET.Element) -> DumpPage:
    revision = element.find(f"{NS}revision")
    text_element = revision.find(f"{NS}text")
    redirect = element.find(f"{NS}redirect")
    return DumpPage(
        title=element.findtext(f"{NS}title"),
        ns=int(element.findtext(f"{NS}ns")),
        page_id=int(element.findtext(f"{NS}id")),
        revision_id=int(revision.findtext(f"{NS}id")),
        timestamp=dt.datetime.fromisoformat(revision.findtext(f"{NS}timestamp").replace("Z", "+00:00")),
        redirect=redirect.get("title") if redirect is not None else None,
        text=text_element.text or "",
        text_bytes_attr=int(text_element.get("bytes")),
        sha1=revision.findtext(f"{NS}sha1"),
    )


@pytest.fixture(scope="module")
def pages() -> list[DumpPage]:
    with bz2.open(DUMP, "rb") as stream:  # bz2 reads every concatenated stream
        return [
            _page_from_element(element)
            for _, element in ET.iterparse(stream)
            if element.tag == f"{NS}page"
        ]


@pytest.fixture(scope="module")
def facts() -> dict:
    return json.loads(FACTS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def by_title(pages) -> dict[str, DumpPage]:
    return {page.title: page for page in pages}


def is_article(page: DumpPage) -> bool:
    return page.ns == 0 and page.redirect is None and not DISAMBIGUATION_RE.search(page.text)


def resolve(title: str, by_title: dict[str, DumpPage]) -> str:
    seen = set()
    while title in by_title and by_title[title].redirect and title not in seen:
        seen.add(title)
        title = normalise_title(by_title[title].redirect)
    return title


def test_build_script_reproduces_committed_bytes(tmp_path):
    subprocess.run([sys.executable, str(SAMPLE_DIR / "build_sample.py"), "--out", str(tmp_path)], check=True)
    assert (tmp_path / DUMP.name).read_bytes() == DUMP.read_bytes()
    assert (tmp_path / INDEX.name).read_bytes() == INDEX.read_bytes()


def _read_stream(data: bytes, offset: int) -> tuple[bytes, int]:
    """Decompress exactly one bz2 stream starting at ``offset``; return it and where the next starts."""
    decompressor = bz2.BZ2Decompressor()
    text = decompressor.decompress(data[offset:])
    assert decompressor.eof, f"stream at {offset} is truncated"
    return text, len(data) - len(decompressor.unused_data)


def test_multistream_layout_and_index(pages):
    data = DUMP.read_bytes()
    index: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for line in bz2.decompress(INDEX.read_bytes()).decode("utf-8").splitlines():
        offset, page_id, title = line.split(":", 2)
        index[int(offset)].append((int(page_id), html.unescape(title)))

    streams, offset = [], 0
    while offset < len(data):
        text, next_offset = _read_stream(data, offset)
        streams.append((offset, text.decode("utf-8")))
        offset = next_offset
    first, last = streams[0][1], streams[-1][1]
    assert first.startswith('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/"')
    assert "<dbname>enwiki</dbname>" in first and first.rstrip().endswith("</siteinfo>")
    for key in ("0", "6", "10", "14"):
        assert f'<namespace key="{key}"' in first
    assert last.strip() == "</mediawiki>"

    page_streams = streams[1:-1]
    assert len(page_streams) >= 5, "the sample should exercise several page streams"
    assert sorted(index) == [offset for offset, _ in page_streams]
    for offset, text in page_streams:
        root = ET.fromstring(f'<root xmlns="{NS[1:-1]}">{text}</root>')
        assert all(child.tag == f"{NS}page" for child in root)
        assert 1 <= len(root) <= 100
        in_stream = [(int(p.findtext(f"{NS}id")), p.findtext(f"{NS}title")) for p in root]
        assert in_stream == index[offset]
    assert sum(len(entries) for entries in index.values()) == len(pages)


def test_page_records_are_consistent(pages):
    ids = [page.page_id for page in pages]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert len({page.revision_id for page in pages}) == len(pages)
    for page in pages:
        assert page.text_bytes_attr == len(page.text.encode("utf-8")), page.title
        number = int(hashlib.sha1(page.text.encode("utf-8")).hexdigest(), 16)
        assert int(page.sha1, 36) == number, page.title
        if page.redirect:
            assert re.match(r"#redirect\s*\[\[", page.text, re.IGNORECASE), page.title


def test_enough_articles_and_non_articles(pages, by_title):
    articles = [page for page in pages if is_article(page)]
    assert len(articles) >= 150
    namespaces = {page.ns for page in pages}
    assert {6, 10, 14} <= namespaces
    disambiguation = [page.title for page in pages if page.ns == 0 and DISAMBIGUATION_RE.search(page.text)]
    assert len(disambiguation) >= 2
    assert any(title.endswith("(disambiguation)") for title in disambiguation)
    assert any("(disambiguation)" not in title for title in disambiguation)
    chains = [page.title for page in pages if page.redirect in by_title and by_title[page.redirect].redirect]
    assert chains, "the sample must hold a redirect chain A -> B -> C"


def test_infobox_types(pages):
    types = {m.group(1).strip().lower() for page in pages if is_article(page) for m in [INFOBOX_RE.search(page.text)] if m}
    assert len(types) >= 6, types


def test_timestamps_span_and_window_lists(pages, facts):
    timestamps = [page.timestamp for page in pages]
    as_of = max(timestamps)
    assert as_of == dt.datetime.fromisoformat(facts["as_of"].replace("Z", "+00:00"))
    assert as_of - min(timestamps) >= dt.timedelta(days=456), "timestamps must span at least 15 months"
    by_title = {page.title: page for page in pages}
    window = dt.timedelta(days=facts["window_days"])
    for title in facts["in_window"]:
        assert as_of - by_title[title].timestamp <= window, title
    for title in facts["out_of_window"]:
        assert as_of - by_title[title].timestamp > window, title
    gaps = {as_of - by_title[title].timestamp for title in facts["boundary_cases"]}
    assert window - dt.timedelta(hours=1) in gaps and window + dt.timedelta(hours=1) in gaps
    kept = [page.title for page in pages if is_article(page) and page.title not in facts["skipped"]]
    assert sorted(facts["in_window"] + facts["out_of_window"]) == sorted(kept)
    assert 0.3 <= len(facts["in_window"]) / len(kept) <= 0.7


def test_oversized_and_broken_pages(by_title, facts):
    reasons = facts["skipped"]
    assert sorted(reasons.values()) == ["broken_markup", "oversized"]
    for title, reason in reasons.items():
        text = by_title[title].text
        if reason == "oversized":
            assert len(text.encode("utf-8")) > 1_000_000
        else:
            assert text.count("{{") > text.count("}}") and text.count("[[") > text.count("]]")


def test_facts_refer_to_real_pages(by_title, facts):
    articles = {title for title, page in by_title.items() if is_article(page)}
    assert len(facts["facts"]) >= 40
    for fact in facts["facts"]:
        assert fact["head"] in articles, fact
        assert ("tail" in fact) != ("value" in fact), fact
        if "tail" in fact:
            assert fact["tail"] in articles, fact
        else:
            assert re.fullmatch(VALUE_FORMATS[fact["value_type"]], fact["value"]), fact
            assert (fact["value_type"] == "quantity") == ("unit" in fact), fact
        for key, value in fact.get("qualifiers", {}).items():
            assert key in {"start", "end", "end_reason"}, fact
            assert key == "end_reason" or re.fullmatch(VALUE_FORMATS["date"], value), fact
    for entry in facts["absent"]:
        assert entry["head"] in articles, entry
    for redirect, target in facts["redirects"].items():
        assert by_title[redirect].redirect, redirect
        assert resolve(redirect, by_title) == target and target in articles, redirect
    redirect_titles = {title for title, page in by_title.items() if page.redirect}
    assert redirect_titles == set(facts["redirects"])
    for title in facts["excluded"]:
        assert title in by_title and title not in articles, title
    assert set(facts["entity_types"]) == articles - set(facts["skipped"])


def test_link_graph_is_connected(by_title, facts):
    articles = {title for title, page in by_title.items() if is_article(page)} - set(facts["skipped"])
    neighbours: dict[str, set[str]] = defaultdict(set)
    for title in articles:
        for match in WIKILINK_RE.finditer(by_title[title].text):
            target = match.group(1)
            if target.lower().startswith(FILE_LINK_PREFIXES) or target.startswith(":"):
                continue
            target = resolve(normalise_title(target), by_title)
            if target in articles and target != title:
                neighbours[title].add(target)
                neighbours[target].add(title)
    start = sorted(articles)[0]
    seen, queue = {start}, deque([start])
    while queue:
        for other in neighbours[queue.popleft()] - seen:
            seen.add(other)
            queue.append(other)
    assert seen == articles, sorted(articles - seen)
