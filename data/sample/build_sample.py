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

Run: ``.venv/bin/python data/sample/build_sample.py [--out DIR]`` (writes through
``extract.sources.dump_writer``, the same writer tests and benchmarks use).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from extract.sources.dump_writer import ENWIKI_NAMESPACES as NAMESPACES
from extract.sources.dump_writer import write_multistream
from schemas.wiki import Page

HERE = Path(__file__).resolve().parent
SOURCE_DIR = HERE / "source"
DUMP_NAME = "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX_NAME = "enwiki-sample-pages-articles-multistream-index.txt.bz2"
PAGES_PER_STREAM = 25
HEADER_PREFIX = "@@PAGE "
OVERSIZED_ROWS = 32_000

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


def _blocks(path: Path) -> list[tuple[str, list[str]]]:
    """The (header line, body lines) blocks of one source file."""
    blocks: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith(HEADER_PREFIX):
            blocks.append((line, []))
        elif blocks:
            blocks[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"{path.name}: text before the first {HEADER_PREFIX!r} header")
    return blocks


def read_sources(source_dir: Path = SOURCE_DIR, require_ids: bool = True) -> list[SourcePage]:
    """Parse every ``*.wiki`` source file into pages, in file then block order."""
    pages = [
        _make_page(_parse_header(header, path.name), "\n".join(body), path.name, require_ids)
        for path in sorted(source_dir.glob("*.wiki"))
        for header, body in _blocks(path)
    ]
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


def to_page(source: SourcePage) -> Page:
    return Page(page_id=source.page_id, title=source.title, ns=source.ns, revision_id=source.revision_id,
                timestamp=dt.datetime.fromisoformat(source.timestamp.replace("Z", "+00:00")), text=source.text,
                redirect_to=source.redirect)


def build(out_dir: Path = HERE, source_dir: Path = SOURCE_DIR) -> tuple[Path, Path]:
    """Write the multistream dump and its index into ``out_dir``; return their paths."""
    pages = sorted(read_sources(source_dir), key=lambda page: page.page_id)
    out_dir.mkdir(parents=True, exist_ok=True)
    dump_path, index_path = out_dir / DUMP_NAME, out_dir / INDEX_NAME
    write_multistream((to_page(page) for page in pages), dump_path, index_path, pages_per_stream=PAGES_PER_STREAM)
    return dump_path, index_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this script)")
    args = parser.parse_args()
    for path in build(args.out):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
