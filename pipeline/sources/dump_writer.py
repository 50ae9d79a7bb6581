"""Write pages as a MediaWiki export dump in the real multistream layout (for the sample, tests, benchmarks).

Layout as Wikimedia publishes it: stream 1 holds `<mediawiki ...>` and `<siteinfo>`, then one bz2 stream
per `pages_per_stream` pages, then a last stream with `</mediawiki>`. The index is bz2-compressed text,
one `offset:page_id:title` line per page, where offset is the byte offset of the page's stream and the
title is XML-escaped as in Wikimedia's index files.
"""

from __future__ import annotations

import bz2
import contextlib
import os
from collections.abc import Iterable
from itertools import islice
from xml.sax.saxutils import escape, quoteattr

from schemas.base import utc
from schemas.wiki import Page

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.11/"


def site_header(sitename: str = "Wikipedia", dbname: str = "enwiki", lang: str = "en") -> str:
    return (
        f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'version="0.11" xml:lang="{lang}">\n'
        "  <siteinfo>\n"
        f"    <sitename>{escape(sitename)}</sitename>\n"
        f"    <dbname>{escape(dbname)}</dbname>\n"
        "    <case>first-letter</case>\n"
        "  </siteinfo>\n"
    )


def page_xml(page: Page) -> str:
    """One `<page>` element as MediaWiki exports it (escaped title and text, optional redirect)."""
    redirect = f"    <redirect title={quoteattr(page.redirect_to)} />\n" if page.redirect_to else ""
    stamp = utc(page.timestamp).strftime("%Y-%m-%dT%H:%M:%SZ")
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
        f'      <text bytes="{len(page.text.encode())}" xml:space="preserve">{escape(page.text)}</text>\n'
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
