"""Build hopsmith's shipped sample dump from the human-editable sources in ``source/``.

Writes, deterministically (same bytes on every run, every machine):
  enwiki-sample-pages-articles-multistream.xml.bz2       the dump, real multistream layout
  enwiki-sample-pages-articles-multistream-index.txt.bz2 its index, ``offset:page_id:title``

Source format: ``source/*.wiki`` files, read in name order, each holding page blocks. A block
starts with a header line

    @@PAGE <title> | ns=<n> | id=<page id> | rev=<revision id> | ts=<ISO timestamp> [| redirect=<target>] [| generate=<name>]

followed by the page's raw wikitext up to the next header. ``redirect`` must match the
``#REDIRECT [[...]]`` line of the text (it becomes the dump's ``<redirect title=.../>``);
``generate`` appends machine-generated wikitext (used for the oversized page).

Layout of the dump, as in Wikimedia's ``pages-articles-multistream`` files: stream 1 holds
``<mediawiki>`` and ``<siteinfo>``; then one bz2 stream per ``PAGES_PER_STREAM`` pages, in page-id
order; a last stream holds ``</mediawiki>``. The index file names, for every page, the byte offset of
the stream that holds it. Titles in the index are XML-escaped as in the real index (``&amp;``).

Run: ``python data/sample/build_sample.py [--out DIR]`` (stdlib only).
"""

from __future__ import annotations

import argparse
import bz2
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

HERE = Path(__file__).resolve().parent
SOURCE_DIR = HERE / "source"
DUMP_NAME = "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX_NAME = "enwiki-sample-pages-articles-multistream-index.txt.bz2"
PAGES_PER_STREAM = 25
HEADER_PREFIX = "@@PAGE "
OVERSIZED_ROWS = 32_000

NAMESPACES = [
    (-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"), (3, "User talk"),
    (4, "Wikipedia"), (5, "Wikipedia talk"), (6, "File"), (7, "File talk"), (8, "MediaWiki"),
    (9, "MediaWiki talk"), (10, "Template"), (11, "Template talk"), (12, "Help"), (13, "Help talk"),
    (14, "Category"), (15, "Category talk"), (100, "Portal"), (101, "Portal talk"),
    (118, "Draft"), (119, "Draft talk"), (828, "Module"), (829, "Module talk"),
]
REDIRECT_RE = re.compile(r"^#redirect\s*\[\[([^\]|]+)(?:\|[^\]]*)?\]\]", re.IGNORECASE)


@dataclass(frozen=True)
class SourcePage:
    """One page block of a source file."""

    title: str
    ns: int
    page_id: int
    revision_id: int
    timestamp: str
    text: str
    redirect: str | None = None
    source_file: str = ""


def _parse_header(line: str, source_file: str) -> dict[str, str]:
    fields = [part.strip() for part in line[len(HEADER_PREFIX):].split("|")]
    header = {"title": fields[0]}
    for field in fields[1:]:
        key, sep, value = field.partition("=")
        if not sep:
            raise ValueError(f"{source_file}: bad header field {field!r} in {line!r}")
        header[key.strip()] = value.strip()
    return header


def generate_square_numbers(rows: int = OVERSIZED_ROWS) -> str:
    """Rows of an (intentionally) oversized wikitable: n, n squared, parity of n squared."""
    lines = []
    for n in range(1, rows + 1):
        parity = "even" if n % 2 == 0 else "odd"
        lines.append(f"|-\n| {n} || {n * n:,} || {parity}")
    lines.append("|}\n\n[[Category:Integer sequences]]")
    return "\n".join(lines)


GENERATORS = {"square_numbers": generate_square_numbers}


def read_sources(source_dir: Path = SOURCE_DIR, require_ids: bool = True) -> list[SourcePage]:
    """Parse every ``*.wiki`` source file into pages, in file then block order."""
    pages: list[SourcePage] = []
    for path in sorted(source_dir.glob("*.wiki")):
        header: dict[str, str] | None = None
        body: list[str] = []

        def flush() -> None:
            if header is not None:
                pages.append(_make_page(header, "\n".join(body), path.name, require_ids))

        for line in path.read_text(encoding="utf-8").split("\n"):
            if line.startswith(HEADER_PREFIX):
                flush()
                header, body = _parse_header(line, path.name), []
            elif header is None:
                if line.strip():
                    raise ValueError(f"{path.name}: text before the first {HEADER_PREFIX!r} header")
            else:
                body.append(line)
        flush()
    _check_unique(pages)
    return pages


def _make_page(header: dict[str, str], body: str, source_file: str, require_ids: bool) -> SourcePage:
    text = body.strip("\n")
    generator = header.get("generate")
    if generator:
        text = text + "\n" + GENERATORS[generator]()
    redirect = header.get("redirect")
    match = REDIRECT_RE.match(text)
    if (match.group(1).strip() if match else None) != redirect:
        raise ValueError(f"{source_file}: {header['title']!r}: header redirect={redirect!r} "
                         f"but text redirects to {match.group(1) if match else None!r}")
    missing = [key for key in ("ns", "id", "rev", "ts") if key not in header]
    if missing and require_ids:
        raise ValueError(f"{source_file}: {header['title']!r} lacks {missing}")
    prefix = header["title"].split(":", 1)[0] if ":" in header["title"] else ""
    expected_ns = next((key for key, name in NAMESPACES if name and name == prefix), 0)
    if "ns" in header and int(header["ns"]) != expected_ns:
        raise ValueError(f"{source_file}: {header['title']!r} has ns={header['ns']}, its prefix says {expected_ns}")
    return SourcePage(
        title=header["title"], ns=int(header.get("ns", -99)), page_id=int(header.get("id", 0)),
        revision_id=int(header.get("rev", 0)), timestamp=header.get("ts", ""), text=text,
        redirect=redirect, source_file=source_file,
    )


def _check_unique(pages: list[SourcePage]) -> None:
    for attribute in ("title", "page_id", "revision_id"):
        seen: set = set()
        for page in pages:
            value = getattr(page, attribute)
            if value and value in seen:
                raise ValueError(f"duplicate {attribute} {value!r}")
            seen.add(value)


def mediawiki_sha1(text: str) -> str:
    """SHA-1 of the text in base 36, 31 digits, as MediaWiki stores it."""
    number = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = ""
    while number:
        number, remainder = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[remainder] + digits
    return digits.rjust(31, "0")


def siteinfo_xml() -> str:
    namespaces = []
    for key, name in NAMESPACES:
        if name:
            namespaces.append(f'      <namespace key="{key}" case="first-letter">{escape(name)}</namespace>')
        else:
            namespaces.append(f'      <namespace key="{key}" case="first-letter" />')
    return (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://www.mediawiki.org/xml/export-0.11/ '
        'http://www.mediawiki.org/xml/export-0.11.xsd" version="0.11" xml:lang="en">\n'
        "  <siteinfo>\n"
        "    <sitename>Wikipedia</sitename>\n"
        "    <dbname>enwiki</dbname>\n"
        "    <base>https://en.wikipedia.org/wiki/Main_Page</base>\n"
        "    <generator>MediaWiki 1.45.0-wmf.1</generator>\n"
        "    <case>first-letter</case>\n"
        "    <namespaces>\n" + "\n".join(namespaces) + "\n    </namespaces>\n"
        "  </siteinfo>\n"
    )


def page_xml(page: SourcePage) -> str:
    """One ``<page>`` element in the export-0.11 layout of Wikimedia's dumps."""
    sha1 = mediawiki_sha1(page.text)
    redirect = f"    <redirect title={quoteattr(page.redirect)} />\n" if page.redirect else ""
    return (
        "  <page>\n"
        f"    <title>{escape(page.title)}</title>\n"
        f"    <ns>{page.ns}</ns>\n"
        f"    <id>{page.page_id}</id>\n"
        f"{redirect}"
        "    <revision>\n"
        f"      <id>{page.revision_id}</id>\n"
        f"      <parentid>{page.revision_id - 1000 - page.page_id % 977}</parentid>\n"
        f"      <timestamp>{page.timestamp}</timestamp>\n"
        "      <contributor>\n"
        "        <username>Hopsmith sample</username>\n"
        "        <id>1</id>\n"
        "      </contributor>\n"
        "      <comment>hopsmith sample revision</comment>\n"
        f"      <origin>{page.revision_id}</origin>\n"
        "      <model>wikitext</model>\n"
        "      <format>text/x-wiki</format>\n"
        f'      <text bytes="{len(page.text.encode("utf-8"))}" sha1="{sha1}" xml:space="preserve">'
        f"{escape(page.text)}</text>\n"
        f"      <sha1>{sha1}</sha1>\n"
        "    </revision>\n"
        "  </page>\n"
    )


def build(out_dir: Path = HERE, source_dir: Path = SOURCE_DIR) -> tuple[Path, Path]:
    """Write the multistream dump and its index into ``out_dir``; return their paths."""
    pages = sorted(read_sources(source_dir), key=lambda page: page.page_id)
    dump_bytes = bytearray(bz2.compress(siteinfo_xml().encode("utf-8"), 9))
    index_lines = []
    for start in range(0, len(pages), PAGES_PER_STREAM):
        chunk = pages[start:start + PAGES_PER_STREAM]
        offset = len(dump_bytes)
        dump_bytes += bz2.compress("".join(page_xml(page) for page in chunk).encode("utf-8"), 9)
        index_lines += [f"{offset}:{page.page_id}:{escape(page.title)}\n" for page in chunk]
    dump_bytes += bz2.compress(b"</mediawiki>\n", 9)
    out_dir.mkdir(parents=True, exist_ok=True)
    dump_path, index_path = out_dir / DUMP_NAME, out_dir / INDEX_NAME
    dump_path.write_bytes(bytes(dump_bytes))
    index_path.write_bytes(bz2.compress("".join(index_lines).encode("utf-8"), 9))
    return dump_path, index_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this script)")
    args = parser.parse_args()
    for path in build(args.out):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
