"""Read a MediaWiki `pages-articles[-multistream].xml[.bz2]` dump page by page, as plain iterators (Beam: `ReadDump`).

The reader never holds more than one page (plus one read block) in memory. It scans the decompressed
bytes for `<page>` ... `</page>` and parses each page on its own with ElementTree. In well-formed
export XML a literal `<page>` or `</page>` can only be markup (text content escapes `<` as `&lt;`), so
the split is exact, and it makes damage local: a malformed page costs that page only, reading goes on
with the next one, and bytes outside pages (`<mediawiki>`, `<siteinfo>`) need no synthetic root.
A multistream dump's index gives the offsets of independent bz2 streams; ranges of streams are the
work units a distributed runner reads in parallel (`dump_work_units`, `ReadDump`).

Every page that is started is accounted for: it becomes a `Page` or a `SkippedRecord` (stage "read")
with one of the reasons in `SKIP_REASONS`.

Every export schema version from 0.3 to 0.11 reads: before 0.6 a page has no `<ns>`, so its namespace
comes from its title's prefix, looked up in the dump's own `<siteinfo>` namespace list (read from the
start of the file, also for a work unit further in) over MediaWiki's canonical names; a `<redirect />`
without a title (0.4, 0.5) leaves the target to the text's `#REDIRECT [[...]]`.
"""

from __future__ import annotations

import bisect
import bz2
import datetime as dt
import html
import io
import itertools
import logging
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from ground.errors import UserError
from schemas.config import ExtractConfig
from schemas.wiki import Page, SkippedRecord, bounded_id, invalid_detail

READ_STAGE = "read"
SKIP_REASONS = {
    "malformed_xml": "the page's XML does not parse, or a new <page> began before </page>",
    "missing_field": "title, ns, id, revision, revision id, timestamp or text is absent",
    "invalid_field": "ns, id, revision id or timestamp does not parse, or an id is outside 0..2^63-1",
    "truncated_bz2": "the compressed data ends in the middle of a bz2 stream",
    "corrupt_bz2": "the bytes are not valid bz2 data (damaged file or wrong index offset)",
    "truncated_xml": "the XML ends inside a <page> (the compressed data, if any, is complete)",
    "oversized_xml": "one <page> element is larger than MAX_PAGE_XML_BYTES (a damaged or hostile input)",
    "index_mismatch": "a work unit read a different number of pages than the multistream index lists for it "
    "(pages lost to damage or a wrong index); one record per unit, titled <unit START-END>",
}
BLOCK_BYTES = 1 << 18
_BZ2_MAGIC = b"BZh"
# A stream header: "BZh", the block size digit, then a block's or the end-of-stream's 48-bit magic.
_BZ2_STREAM_HEADER = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
_BZ2_HEADER_BYTES = 10
_PAGE_TAG = re.compile(rb"<page(?:\s[^>]*)?>|</page>")
_TAG_LOOKBACK = 256  # bytes kept at a block boundary so a tag split across blocks is still found
_TITLE = re.compile(rb"<title>(.*?)</title>", re.S)
# A memory guard against damaged input, far above real pages (article text is capped at 2 MiB).
MAX_PAGE_XML_BYTES = 64 << 20
_HEAD_BYTES = 4096  # bytes of an oversized page kept to name it
DEFAULT_STREAMS_PER_UNIT = ExtractConfig.model_fields["streams_per_unit"].default
log = logging.getLogger(__name__)
# MediaWiki's canonical namespace names (and the old aliases Image, Project), for dumps whose <siteinfo>
# is absent; a dump's own <siteinfo> names (localised ones included) are added over these.
CANONICAL_NAMESPACES = {
    "media": -2, "special": -1, "talk": 1, "user": 2, "user talk": 3, "project": 4, "project talk": 5,
    "file": 6, "file talk": 7, "image": 6, "image talk": 7, "mediawiki": 8, "mediawiki talk": 9,
    "template": 10, "template talk": 11, "help": 12, "help talk": 13, "category": 14, "category talk": 15,
}
_SITEINFO = re.compile(rb"<siteinfo[\s>].*?</siteinfo>", re.S)
_SITEINFO_MAX_BYTES = 1 << 20


class DumpUnit(NamedTuple):
    """A byte range of a dump that decompresses and parses on its own: whole bz2 streams [start, end).
    From an index: `expected_pages` it lists in the range, and `note` on offsets that had to be corrected."""

    path: str
    start: int = 0
    end: int | None = None
    expected_pages: int | None = None
    note: str = ""


class _Damage(NamedTuple):
    """In-band marker from a byte source: data was lost here (`reason` is a SKIP_REASONS key)."""

    reason: str
    detail: str


def _is_remote(path: str) -> bool:
    return "://" in path


def _filesystems():
    """Beam's FileSystems, imported for a remote path only: reading a local dump never imports Beam."""
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def open_binary(path: str):
    """A seekable binary handle: local files directly, `gs://`, `s3://`, ... through Beam's FileSystems
    (so workers of a distributed runner read the same dump from object storage)."""
    if _is_remote(path):
        from apache_beam.io.filesystem import CompressionTypes

        return _filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    return open(path, "rb")


def _size(path: str) -> int:
    if _is_remote(path):
        return _filesystems().match([path])[0].metadata_list[0].size_in_bytes
    return os.path.getsize(path)


def check_readable(path: str | os.PathLike, what: str = "dump") -> str:
    """The path as a string, or a UserError naming the problem in one line."""
    path = os.fspath(path)
    if _is_remote(path):
        try:
            found = _filesystems().exists(path)
        except Exception as error:  # an unknown scheme or a missing filesystem extra: say which, in one line
            raise UserError(f"{what} path {path} cannot be read: {str(error).splitlines()[0]}") from None
        if not found:
            raise UserError(f"{what} file not found: {path}")
        return path
    if not os.path.exists(path):
        raise UserError(f"{what} file not found: {path}")
    if not os.path.isfile(path):
        raise UserError(f"{what} path is not a file: {path}")
    if not os.access(path, os.R_OK):
        raise UserError(f"{what} file is not readable: {path}")
    return path


def check_multistream(path: str | os.PathLike) -> str:
    """A readable bz2 dump, or a UserError: only bz2 streams can be read from an index's offsets."""
    path = check_readable(path)
    if not _is_bz2(path):
        raise UserError(f"an index needs a bz2 multistream dump, and {path} is not bz2-compressed")
    return path


def _is_bz2(path: str) -> bool:
    with open_binary(path) as handle:
        return handle.read(len(_BZ2_MAGIC)) == _BZ2_MAGIC


def _raw_blocks(handle, start: int, end: int | None) -> Iterator[bytes]:
    handle.seek(start)
    remaining = None if end is None else end - start
    while remaining is None or remaining > 0:
        size = BLOCK_BYTES if remaining is None else min(BLOCK_BYTES, remaining)
        block = handle.read(size)
        if not block:
            return
        if remaining is not None:
            remaining -= len(block)
        yield block


def _drain(decompressor: bz2.BZ2Decompressor, data: bytes) -> Iterator[bytes]:
    """Decompress `data` in pieces of at most BLOCK_BYTES, so highly compressible input stays small."""
    out = decompressor.decompress(data, BLOCK_BYTES)
    while True:
        if out:
            yield out
        if decompressor.eof or decompressor.needs_input:
            return
        out = decompressor.decompress(b"", BLOCK_BYTES)


def _bz2_blocks(raw: Iterable[bytes]) -> Iterator[bytes | _Damage]:
    """Decompress concatenated bz2 streams, reporting damage in-band instead of stopping silently.

    Unlike `bz2.open`, which takes undecodable bytes after a stream for trailing garbage and stops, a
    damaged stream is reported as `_Damage` and decoding resumes at the next stream header, so a
    sequential read of a multistream dump loses only the damaged stream's pages.
    """
    decompressor = bz2.BZ2Decompressor()
    in_stream = False
    stream_at = 0  # where the current stream begins in `block`; -1 when it began in an earlier block
    skipping: str | None = None  # the error while looking for the next stream header
    carry = b""
    consumed = 0  # compressed bytes before `block`
    for raw_block in raw:
        block, carry = carry + raw_block, b""
        while block:
            if skipping is not None:
                match = _BZ2_STREAM_HEADER.search(block, stream_at + 1 if stream_at >= 0 else 0)
                if match is None:
                    carry = block[-(_BZ2_HEADER_BYTES - 1):]
                    consumed += len(block) - len(carry)
                    stream_at = -1
                    break
                yield _Damage("corrupt_bz2", f"{skipping}; resumed at compressed byte {consumed + match.start()}")
                skipping, in_stream = None, False
                decompressor = bz2.BZ2Decompressor()
                block, consumed, stream_at = block[match.start():], consumed + match.start(), 0
            try:
                yield from _drain(decompressor, block)
            except OSError as error:
                skipping = f"bz2 data damaged near compressed byte {consumed}: {error}"
                continue
            in_stream = True
            if decompressor.eof:
                unused = decompressor.unused_data
                consumed += len(block) - len(unused)
                block, stream_at = unused, 0
                decompressor, in_stream = bz2.BZ2Decompressor(), False
            else:
                consumed += len(block)
                block, stream_at = b"", -1
    if skipping is not None:
        yield _Damage("corrupt_bz2", f"{skipping}; no later stream")
    elif in_stream:
        yield _Damage("truncated_bz2", "compressed data ended in the middle of a bz2 stream")


def _title_hint(data: bytes, offset: int) -> str:
    match = _TITLE.search(data)
    if match:
        return html.unescape(match.group(1).decode("utf-8", errors="replace")).strip() or f"<offset {offset}>"
    return f"<offset {offset}>"


def _sized(kind: str, offset: int, xml: bytes) -> tuple[str, int, bytes, None]:
    """The same verdict wherever the read blocks fall: a page over the cap is oversized, complete or not."""
    if len(xml) > MAX_PAGE_XML_BYTES:
        return "oversized", offset, xml[:_HEAD_BYTES], None
    return kind, offset, xml, None


def _split_pages(blocks: Iterable[bytes | _Damage]) -> Iterator[tuple[str, int, bytes, _Damage | None]]:
    """Yield ("page", offset, xml, None) per complete page and ("unterminated", ...) for a page cut short
    by the next `<page>`. A page over MAX_PAGE_XML_BYTES is ("oversized", offset, its first bytes, None)
    and the rest of it is dropped unread, so damaged input cannot grow memory. Where the source lost
    data, a page open there is ("open", offset, partial xml, damage), otherwise ("damage", offset, b"",
    damage); a page open at the end is ("open", ..., None). Offsets count decompressed bytes."""
    buffer = bytearray()
    base = 0  # offset of buffer[0]
    search_from = 0
    page_start = -1  # where the open page begins in `buffer`, or -1
    for block in blocks:
        if isinstance(block, _Damage):
            if page_start >= 0:
                yield "open", base + page_start, bytes(buffer[page_start:]), block
            else:
                yield "damage", base + len(buffer), b"", block
            base += len(buffer)
            buffer, search_from, page_start = bytearray(), 0, -1
            continue
        buffer += block
        while True:
            match = _PAGE_TAG.search(buffer, search_from)
            if match is None:
                if page_start >= 0 and len(buffer) - page_start > MAX_PAGE_XML_BYTES:
                    yield "oversized", base + page_start, bytes(buffer[page_start : page_start + _HEAD_BYTES]), None
                    page_start = -1  # its remaining bytes are skipped like any bytes between pages
                resume = max(search_from, len(buffer) - _TAG_LOOKBACK)
                keep_from = page_start if page_start >= 0 else max(0, resume)
                search_from = max(0, resume - keep_from)
                del buffer[:keep_from]
                base += keep_from
                if page_start >= 0:
                    page_start = 0
                break
            search_from = match.end()
            if match.group() == b"</page>":
                if page_start >= 0:
                    yield _sized("page", base + page_start, bytes(buffer[page_start : match.end()]))
                    page_start = -1
                continue
            if page_start >= 0:
                yield _sized("unterminated", base + page_start, bytes(buffer[page_start : match.start()]))
            page_start = match.start()
    if page_start >= 0:
        yield "open", base + page_start, bytes(buffer[page_start:]), None


def _strip_namespaces(element: ET.Element) -> None:
    for node in element.iter():
        if isinstance(node.tag, str) and node.tag[0] == "{":
            node.tag = node.tag.rpartition("}")[2]


def _timestamp(value: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)


def parse_siteinfo_namespaces(head: bytes) -> dict[str, int]:
    """Namespace name (case-folded) -> key: the canonical names, then those `<siteinfo>` in `head` lists."""
    names = dict(CANONICAL_NAMESPACES)
    match = _SITEINFO.search(head)
    if match is None:
        return names
    try:
        siteinfo = ET.fromstring(match.group())
    except ET.ParseError:
        return names
    _strip_namespaces(siteinfo)
    for namespace in siteinfo.iter("namespace"):
        key, name = namespace.get("key", ""), (namespace.text or "").strip()
        if name and key.lstrip("-").isdigit():
            names[name.replace("_", " ").casefold()] = int(key)
    return names


def read_namespaces(path: str, compressed: bool) -> dict[str, int]:
    """The dump's namespace names from the `<siteinfo>` at its start (for pages without `<ns>`)."""
    head = bytearray()
    with open_binary(path) as handle:
        raw = _raw_blocks(handle, 0, None)
        for block in _bz2_blocks(raw) if compressed else raw:
            if isinstance(block, _Damage):
                break
            head += block
            if b"</siteinfo>" in head or b"<page>" in head or len(head) > _SITEINFO_MAX_BYTES:
                break
    return parse_siteinfo_namespaces(bytes(head))


def namespace_of(title: str, namespaces: Mapping[str, int]) -> int:
    """A title's namespace from its prefix (`Talk:X` -> 1); no known prefix: the main namespace."""
    prefix, colon, _ = title.partition(":")
    if not colon:
        return 0
    return namespaces.get(prefix.replace("_", " ").strip().casefold(), 0)


def parse_page(xml: bytes, source: str = "", offset: int = 0,
               namespaces: Mapping[str, int] = CANONICAL_NAMESPACES) -> Page | SkippedRecord:
    """One `<page>` element (bytes) as a Page of its latest revision, or a SkippedRecord saying why not.
    Without `<ns>` (export schema before 0.6) the namespace comes from the title's prefix."""
    try:
        element = ET.fromstring(xml)
    except ET.ParseError as error:
        return _skip("malformed_xml", _title_hint(xml, offset), f"{source} @{offset}: {error}")
    _strip_namespaces(element)
    title = (element.findtext("title") or "").strip()
    label = title or f"<offset {offset}>"
    ns, page_id = element.findtext("ns"), element.findtext("id")
    if ns is None and title:
        ns = str(namespace_of(title, namespaces))
    revisions = element.findall("revision")
    missing = [name for name, value in (("title", title), ("ns", ns), ("id", page_id)) if not value]
    if not revisions:
        missing.append("revision")
    if missing:
        return _skip("missing_field", label, f"{source} @{offset}: no {', '.join(missing)}")
    try:
        dated = [(_timestamp(r.findtext("timestamp") or ""), r) for r in revisions]
    except ValueError as error:
        return _skip("invalid_field", label, f"timestamp: {error}", page_id)
    timestamp, revision = max(dated, key=lambda pair: pair[0])
    revision_id, text = revision.findtext("id"), revision.find("text")
    if not revision_id or text is None or "deleted" in text.attrib:
        field = "revision id" if not revision_id else "revision text"
        return _skip("missing_field", label, f"{source} @{offset}: no {field}", page_id)
    redirect = element.find("redirect")
    try:
        return Page(
            page_id=int(page_id),
            title=title,
            ns=int(ns),
            revision_id=int(revision_id),
            timestamp=timestamp,
            text=text.text or "",
            redirect_to=(redirect.get("title") or None) if redirect is not None else None,
            source=source,
        )
    except ValueError as error:
        return _skip("invalid_field", label, f"{source} @{offset}: {invalid_detail(error)}", page_id)


def _skip(reason: str, title: str, detail: str, page_id: str | int | None = None) -> SkippedRecord:
    return SkippedRecord(title=title, stage=READ_STAGE, reason=reason, detail=detail, page_id=bounded_id(page_id))


def _records(blocks: Iterable[bytes | _Damage], source: str,
             namespaces: Mapping[str, int] = CANONICAL_NAMESPACES) -> Iterator[tuple[bool, Page | SkippedRecord]]:
    """(is a page, record): every started `<page>` is a page, damage between pages is not."""
    for kind, offset, data, damage in _split_pages(blocks):
        if kind == "page":
            yield True, parse_page(data, source, offset, namespaces)
        elif kind == "oversized":
            detail = f"{source} @{offset}: <page> larger than {MAX_PAGE_XML_BYTES} bytes, dropped unread"
            yield True, _skip("oversized_xml", _title_hint(data, offset), detail)
        elif kind == "unterminated":
            yield True, _skip("malformed_xml", _title_hint(data, offset), f"{source} @{offset}: <page> without </page>")
        elif kind == "open" and damage is None:
            detail = f"{source} @{offset}: input ends inside this page"
            yield True, _skip("truncated_xml", _title_hint(data, offset), detail)
        elif kind == "open":
            yield True, _skip(damage.reason, _title_hint(data, offset), f"{source} @{offset}: {damage.detail}")
        else:  # data lost between pages: no page to name, so name the place
            yield False, _skip(damage.reason, f"<offset {offset}>", f"{source}: {damage.detail}")


def iter_dump_pages(
    path: str | os.PathLike, stream_range: tuple[int, int | None] | None = None
) -> Iterator[Page | SkippedRecord]:
    """Pages of a dump (bz2, multistream bz2 or plain XML, with or without a <mediawiki> root), in order.

    `stream_range=(start, end)` reads only the bz2 streams in that byte range (a work unit); `end=None`
    reads to the end. Bad data never raises: it becomes SkippedRecords. A missing file is a UserError,
    raised at call time.
    """
    path = check_readable(path)
    compressed = _is_bz2(path)
    if stream_range is not None and not compressed and stream_range != (0, None):
        raise UserError(f"stream ranges need a bz2 multistream dump: {path}")
    start, end = stream_range or (0, None)
    return _iter_file(path, start, end, compressed)


def _iter_file(path: str, start: int, end: int | None, compressed: bool) -> Iterator[Page | SkippedRecord]:
    for _, record in _file_records(path, start, end, compressed):
        yield record


def _file_records(path: str, start: int, end: int | None,
                  compressed: bool) -> Iterator[tuple[bool, Page | SkippedRecord]]:
    source = os.path.basename(path)
    size = _size(path)
    if start >= size:  # an index that lists streams past the end: the file was cut short
        detail = f"{source}: stream at byte {start} lies past the end of the file ({size} bytes)"
        yield False, _skip("truncated_bz2", f"<offset {start}>", detail)
        return
    namespaces = read_namespaces(path, compressed)
    with open_binary(path) as handle:
        raw = _raw_blocks(handle, start, end)
        yield from _records(_bz2_blocks(raw) if compressed else raw, source, namespaces)


def read_index_counts(index_path: str | os.PathLike) -> dict[int, int]:
    """Stream offset -> pages the multistream index lists in it (`offset:page_id:title` lines, bz2 or plain)."""
    index_path = check_readable(index_path, "index")
    compressed = _is_bz2(index_path)
    counts: dict[int, int] = {}
    try:
        with open_binary(index_path) as handle, (
            bz2.open(handle, "rt", encoding="utf-8") if compressed else io.TextIOWrapper(handle, encoding="utf-8")
        ) as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                offset, sep, _ = line.partition(":")
                if not sep or not offset.isdigit():
                    raise UserError(f"index {index_path} line {number} is not 'offset:page_id:title': {line[:80]!r}")
                counts[int(offset)] = counts.get(int(offset), 0) + 1
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise UserError(f"index {index_path} is unreadable: {error}") from None
    if not counts:
        raise UserError(f"index {index_path} lists no streams")
    return dict(sorted(counts.items()))


def read_multistream_index(index_path: str | os.PathLike) -> list[int]:
    """Sorted distinct stream offsets from a multistream index."""
    return list(read_index_counts(index_path))


def stream_start_from(handle, offset: int) -> int | None:
    """`offset` when a bz2 stream header begins there, else the next stream header after it (an index whose
    offsets are shifted points inside streams); None when no stream begins at or after it."""
    handle.seek(offset)
    carry, position = b"", offset
    while block := handle.read(BLOCK_BYTES):
        data = carry + block
        match = _BZ2_STREAM_HEADER.search(data)
        if match is not None:
            return position - len(carry) + match.start()
        carry = data[-(_BZ2_HEADER_BYTES - 1):]
        position += len(block)
    return None


def dump_work_units(
    path: str | os.PathLike, index_path: str | os.PathLike, streams_per_unit: int = DEFAULT_STREAMS_PER_UNIT
) -> list[DumpUnit]:
    """Split a multistream dump into units of `streams_per_unit` page streams covering the whole file.

    The first unit starts at byte 0 (the `<siteinfo>` stream before its page streams); the last runs to
    the end of the file (the stream holding `</mediawiki>`), so the units together read exactly what a
    sequential read does. Each unit boundary is checked to start a bz2 stream; one that does not (a wrong
    index) moves to the next stream header, so no stream is cut in two, and the unit's `note` says so.
    Each unit carries the number of pages the index lists in it, which `read_dump_unit` reconciles.
    Units past the end of a truncated file each report one `truncated_bz2` skip.
    """
    if streams_per_unit < 1:
        raise UserError(f"streams per unit must be at least 1, got {streams_per_unit}")
    path = check_multistream(path)
    counts = read_index_counts(index_path)
    offsets = list(counts)
    size = _size(path)
    planned = [0, *offsets[streams_per_unit::streams_per_unit]]
    starts: list[int] = []
    notes: list[str] = []
    with open_binary(path) as handle:
        for offset in planned:
            start = offset if offset == 0 or offset >= size else stream_start_from(handle, offset)
            note = "" if start == offset else (
                f"index offset {offset} does not start a bz2 stream; "
                + (f"the unit starts at the next stream, byte {start}" if start is not None else "no stream follows it"))
            if starts and (start is None or start <= starts[-1]):  # nothing of its own left: merge into the previous
                notes[-1] = "; ".join(filter(None, (notes[-1], note)))
                continue
            starts.append(start)
            notes.append(note)
    ends: list[int | None] = [*starts[1:], None]
    # The pages the index lists in each unit: those whose offset falls inside the unit's (corrected) range.
    listed = [0, *itertools.accumulate(counts.values())]

    def listed_before(byte: int | None) -> int:
        return listed[-1] if byte is None else listed[bisect.bisect_left(offsets, byte)]

    expected = [listed_before(end) - listed_before(start) for start, end in zip(starts, ends, strict=True)]
    return [DumpUnit(path, start, end, count, note)
            for start, end, count, note in zip(starts, ends, expected, notes, strict=True)]


def read_dump_unit(unit: DumpUnit) -> Iterator[Page | SkippedRecord]:
    """All records of one work unit (plain function; the Beam DoFn wraps it). When the unit comes from an
    index and reads a different number of pages than the index lists, one `index_mismatch` record says so."""
    unit = DumpUnit(*unit)
    path = check_readable(unit.path)
    if unit.note:
        log.warning("%s: %s", os.path.basename(path), unit.note)
    pages = 0
    for is_page, record in _file_records(path, unit.start, unit.end, _is_bz2(path)):
        pages += is_page
        yield record
    if unit.expected_pages is not None and pages != unit.expected_pages:
        end = "end" if unit.end is None else unit.end
        detail = (f"{os.path.basename(path)} bytes {unit.start}-{end}: the index lists {unit.expected_pages} "
                  f"pages in this unit, {pages} were read")
        detail += f"; {unit.note}" if unit.note else ""
        yield _skip("index_mismatch", f"<unit {unit.start}-{end}>", detail)
