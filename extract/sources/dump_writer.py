"""Write pages as a MediaWiki export dump in the real multistream layout (for the sample, tests, benchmarks).

Layout as Wikimedia publishes it: stream 1 holds `<mediawiki ...>` and `<siteinfo>`, then one bz2 stream
per `pages_per_stream` pages, then a last stream with `</mediawiki>`. The index is bz2-compressed text,
one `offset:page_id:title` line per page, where offset is the byte offset of the page's stream and the
title is XML-escaped as in Wikimedia's index files.
"""

from __future__ import annotations

import bz2
import contextlib
import hashlib
import os
from collections.abc import Iterable
from itertools import islice
from xml.sax.saxutils import escape, quoteattr

from schemas.base import utc
from schemas.wiki import Page

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.11/"


# The namespaces of English Wikipedia, as its dumps list them in <siteinfo>.
ENWIKI_NAMESPACES = (
    (-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"), (3, "User talk"),
    (4, "Wikipedia"), (5, "Wikipedia talk"), (6, "File"), (7, "File talk"), (8, "MediaWiki"),
    (9, "MediaWiki talk"), (10, "Template"), (11, "Template talk"), (12, "Help"), (13, "Help talk"),
    (14, "Category"), (15, "Category talk"), (100, "Portal"), (101, "Portal talk"),
    (118, "Draft"), (119, "Draft talk"), (828, "Module"), (829, "Module talk"),
)


def site_header(
    sitename: str = "Wikipedia",
    dbname: str = "enwiki",
    lang: str = "en",
    namespaces: Iterable[tuple[int, str]] = ENWIKI_NAMESPACES,
) -> str:
    """`<mediawiki ...>` and `<siteinfo>` with the namespace table, as the first stream of a dump."""
    entries = "".join(
        f'      <namespace key="{key}" case="first-letter">{escape(name)}</namespace>\n'
        if name
        else f'      <namespace key="{key}" case="first-letter" />\n'
        for key, name in namespaces
    )
    return (
        f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{EXPORT_NS} http://www.mediawiki.org/xml/export-0.11.xsd" '
        f'version="0.11" xml:lang="{lang}">\n'
        "  <siteinfo>\n"
        f"    <sitename>{escape(sitename)}</sitename>\n"
        f"    <dbname>{escape(dbname)}</dbname>\n"
        "    <case>first-letter</case>\n"
        f"    <namespaces>\n{entries}    </namespaces>\n"
        "  </siteinfo>\n"
    )


def mediawiki_sha1(text: str) -> str:
    """SHA-1 of the text in base 36, 31 digits, as MediaWiki stores it in `<sha1>`."""
    number = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = ""
    while number:
        number, remainder = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[remainder] + digits
    return digits.rjust(31, "0")


def page_xml(page: Page) -> str:
    """One `<page>` element as MediaWiki exports it (escaped title and text, optional redirect, sha1)."""
    redirect = f"    <redirect title={quoteattr(page.redirect_to)} />\n" if page.redirect_to else ""
    stamp = utc(page.timestamp).strftime("%Y-%m-%dT%H:%M:%SZ")
    sha1 = mediawiki_sha1(page.text)
    return (
        "  <page>\n"
        f"    <title>{escape(page.title)}</title>\n"
        f"    <ns>{page.ns}</ns>\n"
        f"    <id>{page.page_id}</id>\n"
        f"{redirect}"
        "    <revision>\n"
        f"      <id>{page.revision_id}</id>\n"
        f"      <timestamp>{stamp}</timestamp>\n"
        "      <model>wikitext</model>\n"
        "      <format>text/x-wiki</format>\n"
        f'      <text bytes="{len(page.text.encode())}" sha1="{sha1}" xml:space="preserve">{escape(page.text)}</text>\n'
        f"      <sha1>{sha1}</sha1>\n"
        "    </revision>\n"
        "  </page>\n"
    )


def write_multistream(
    pages: Iterable[Page],
    path: str | os.PathLike,
    index_path: str | os.PathLike | None = None,
    pages_per_stream: int = 100,
    header: str | None = None,
) -> list[int]:
    """Write `pages` as a multistream bz2 dump (and its bz2 index when `index_path` is given).

    Returns the byte offsets of the page streams. Streams are written one at a time, so memory holds one
    stream's pages, not the dump.
    """
    pages = iter(pages)
    offsets: list[int] = []
    with contextlib.ExitStack() as files:
        out = files.enter_context(open(path, "wb"))
        index = files.enter_context(bz2.open(index_path, "wt", encoding="utf-8")) if index_path else None
        out.write(bz2.compress((header or site_header()).encode()))
        while batch := list(islice(pages, pages_per_stream)):
            offset = out.tell()
            offsets.append(offset)
            out.write(bz2.compress("".join(page_xml(page) for page in batch).encode()))
            if index is not None:
                index.writelines(f"{offset}:{page.page_id}:{escape(page.title)}\n" for page in batch)
        out.write(bz2.compress(b"</mediawiki>\n"))
    return offsets
