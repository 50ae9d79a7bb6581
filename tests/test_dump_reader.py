"""The dump reader: streaming, multistream work units, damaged input accounted for, Beam equivalence."""

from __future__ import annotations

import argparse
import bisect
import bz2
import datetime as dt
import html
from collections import Counter
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.io.localfilesystem import LocalFileSystem
from apache_beam.testing.util import assert_that, equal_to

import extract.sources.dump as dump_module
from cli.sources import add_source_arguments, source_config
from extract.sources.dump import (
    SKIP_REASONS,
    dump_work_units,
    iter_dump_pages,
    read_dump_unit,
    read_multistream_index,
)
from extract.sources.dump_writer import page_xml, site_header, write_multistream
from extract.sources.transforms import ReadDump, source_transform
from ground.errors import UserError
from runtime.beam import pipeline_options
from schemas.config import BeamOptions, ExtractConfig
from schemas.wiki import Page, SkippedRecord

WIKISAMPLES = Path(__file__).resolve().parents[1] / ".." / "shared" / "wikisamples" / "xml"


def make_pages(count: int, source: str = "dump.xml.bz2", text_repeat: int = 20) -> list[Page]:
    return [
        Page(
            page_id=i,
            title=f"Page {i} & <co>",
            ns=0 if i % 5 else 10,
            revision_id=1000 + i,
            timestamp=dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=i),
            text=f"'''Page {i}''' is about [[Topic {i}]] {{{{Infobox thing|a=<b>&amp;</b>}}}}. " * text_repeat,
            redirect_to=f"Page {i + 1}" if i % 7 == 0 else None,
            source=source,
        )
        for i in range(1, count + 1)
    ]


@pytest.fixture
def multistream(tmp_path):
    pages = make_pages(45)
    dump, index = tmp_path / "dump.xml.bz2", tmp_path / "index.txt.bz2"
    offsets = write_multistream(pages, dump, index, pages_per_stream=4)
    return pages, dump, index, offsets


def reasons(records) -> Counter:
    counts = Counter(r.reason for r in records if isinstance(r, SkippedRecord))
    assert set(counts) <= set(SKIP_REASONS), counts  # every reason is a documented one
    return counts


def test_sequential_read_streams_every_page_with_its_fields(multistream):
    pages, dump, _, _ = multistream
    records = list(iter_dump_pages(dump))
    assert records == pages
    redirect = next(r for r in records if r.page_id == 7)
    assert redirect.redirect_to == "Page 8"
    assert {r.ns for r in records} == {0, 10}


def test_work_units_cover_the_file_and_read_the_same_pages(multistream):
    pages, dump, index, offsets = multistream
    assert read_multistream_index(index) == offsets
    for streams_per_unit in (1, 3, 100):
        units = dump_work_units(dump, index, streams_per_unit)
        assert units[0].start == 0 and units[-1].end is None
        assert all(a.end == b.start for a, b in zip(units, units[1:], strict=False))
        assert [r for unit in units for r in read_dump_unit(unit)] == pages
    assert len(dump_work_units(dump, index, 3)) == (len(offsets) + 2) // 3


def test_plain_xml_with_root_and_fragment_without_root(tmp_path):
    pages = make_pages(3, source="plain.xml")
    plain = tmp_path / "plain.xml"
    plain.write_text(site_header() + "".join(page_xml(p) for p in pages) + "</mediawiki>\n", encoding="utf-8")
    assert list(iter_dump_pages(plain)) == pages
    fragment = tmp_path / "fragment.xml"
    fragment.write_text(page_xml(pages[0].model_copy(update={"source": "fragment.xml"})), encoding="utf-8")
    assert [r.title for r in iter_dump_pages(fragment)] == [pages[0].title]


def test_latest_revision_wins_and_namespaced_pages_parse(tmp_path):
    dump = tmp_path / "history.xml"
    dump.write_text(
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><page xmlns="urn:x"><title>A</title>'
        "<ns>0</ns><id>1</id>"
        "<revision><id>9</id><timestamp>2020-05-01T00:00:00Z</timestamp><text>new</text></revision>"
        "<revision><id>3</id><timestamp>2019-01-01T00:00:00Z</timestamp><text>old</text></revision>"
        "</page></mediawiki>",
        encoding="utf-8",
    )
    (page,) = iter_dump_pages(dump)
    assert (page.revision_id, page.text, page.timestamp.year) == (9, "new", 2020)


def test_truncated_bz2_keeps_earlier_pages_and_reports_the_cut(multistream, tmp_path):
    pages, dump, index, offsets = multistream
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(dump.read_bytes()[: offsets[6] + 40])  # inside the 7th page stream
    records = list(iter_dump_pages(cut))
    assert records[:-1] == [p.model_copy(update={"source": "cut.xml.bz2"}) for p in pages[:24]]
    assert reasons(records) == {"truncated_bz2": 1}
    # Read by units (pairs of streams): the unit holding the cut and every unit past the end report it.
    units = dump_work_units(cut, index, 2)
    by_units = [r for unit in units for r in read_dump_unit(unit)]
    assert [r.page_id for r in by_units if isinstance(r, Page)] == [p.page_id for p in pages[:24]]
    past_the_end = sum(unit.start >= offsets[6] + 40 for unit in units)
    # ... and each of them reconciles its pages against the index: the cut unit and those past the end.
    assert past_the_end == 2
    assert reasons(by_units) == {"truncated_bz2": 1 + past_the_end, "index_mismatch": 1 + past_the_end}


def test_truncation_inside_a_page_names_that_page(tmp_path):
    pages = make_pages(30, text_repeat=400)
    xml = (site_header() + "".join(page_xml(p) for p in pages)).encode()
    data = bz2.compress(xml, compresslevel=1)  # 100 kB blocks: early blocks decode before the cut
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(data[: len(data) // 2])
    records = list(iter_dump_pages(cut))
    kept = [r for r in records if isinstance(r, Page)]
    assert 0 < len(kept) < len(pages)
    assert records[: len(kept)] == [p.model_copy(update={"source": "cut.xml.bz2"}) for p in kept]
    assert reasons(records) == {"truncated_bz2": 1}
    assert records[-1].title == pages[len(kept)].title  # the page cut in half is named
    plain = tmp_path / "cut.xml"
    plain.write_bytes(xml[: len(xml) // 2])
    plain_records = list(iter_dump_pages(plain))
    assert reasons(plain_records) == {"truncated_xml": 1}
    assert plain_records[-1].title == pages[len(plain_records) - 1].title


def test_malformed_pages_are_skipped_and_reading_continues(tmp_path):
    good = make_pages(3, source="bad.xml")
    broken = "  <page>\n    <title>Broken &amp; Co</title>\n    <ns>0</ns><id>5</id><revision><text>a < b</text>\n  </page>\n"
    unterminated = "  <page>\n    <title>Never closed</title>\n    <ns>0</ns>\n"
    no_id = "<page><title>No id</title><ns>0</ns><revision><id>1</id><timestamp>2020-01-01T00:00:00Z</timestamp><text>x</text></revision></page>"
    hidden = "<page><title>Hidden</title><ns>0</ns><id>8</id><revision><id>1</id><timestamp>2020-01-01T00:00:00Z</timestamp><text deleted=\"deleted\" /></revision></page>"
    bad_time = "<page><title>Bad time</title><ns>0</ns><id>9</id><revision><id>1</id><timestamp>yesterday</timestamp><text>x</text></revision></page>"
    body = page_xml(good[0]) + broken + page_xml(good[1]) + unterminated + no_id + hidden + bad_time + page_xml(good[2])
    path = tmp_path / "bad.xml"
    path.write_text(site_header() + body + "</mediawiki>\n", encoding="utf-8")
    records = list(iter_dump_pages(path))
    assert len(records) == body.count("<page>")  # every page accounted for
    assert [r for r in records if isinstance(r, Page)] == good
    skipped = {r.title: r.reason for r in records if isinstance(r, SkippedRecord)}
    assert skipped == {
        "Broken & Co": "malformed_xml",
        "Never closed": "malformed_xml",
        "No id": "missing_field",
        "Hidden": "missing_field",
        "Bad time": "invalid_field",
    }
    assert all(r.stage == "read" for r in records if isinstance(r, SkippedRecord))


def test_corrupt_stream_costs_only_its_own_pages(multistream, tmp_path):
    pages, dump, index, offsets = multistream
    data = bytearray(dump.read_bytes())
    data[offsets[3] + 20 : offsets[3] + 60] = b"\x00" * 40  # damage the 4th page stream
    damaged = tmp_path / "damaged.xml.bz2"
    damaged.write_bytes(bytes(data))
    by_units = [r for unit in dump_work_units(damaged, index, 1) for r in read_dump_unit(unit)]
    kept = {r.page_id for r in by_units if isinstance(r, Page)}
    assert kept == {p.page_id for p in pages} - {p.page_id for p in pages[12:16]}
    assert reasons(by_units) == {"corrupt_bz2": 1, "index_mismatch": 1}
    (mismatch,) = [r for r in by_units if getattr(r, "reason", "") == "index_mismatch"]
    assert "the index lists 4 pages in this unit, 0 were read" in mismatch.detail
    # Read sequentially, decoding resumes at the next stream header: the same pages survive.
    sequential = list(iter_dump_pages(damaged))
    assert {r.page_id for r in sequential if isinstance(r, Page)} == kept
    assert reasons(sequential) == {"corrupt_bz2": 1}
    (damage,) = [r for r in sequential if isinstance(r, SkippedRecord)]
    assert f"resumed at compressed byte {offsets[4]}" in damage.detail


def test_missing_or_unreadable_inputs_are_user_errors(tmp_path, multistream):
    _, dump, _, _ = multistream
    with pytest.raises(UserError, match="dump file not found"):
        iter_dump_pages(tmp_path / "nope.xml.bz2")
    with pytest.raises(UserError, match="not a file"):
        iter_dump_pages(tmp_path)
    with pytest.raises(UserError, match="index file not found"):
        dump_work_units(dump, tmp_path / "nope-index.txt.bz2")
    bad_index = tmp_path / "bad-index.txt"
    bad_index.write_text("12:3:Title\nnot an index line\n")
    with pytest.raises(UserError, match="line 2"):
        read_multistream_index(bad_index)
    with pytest.raises(UserError, match="not found"):
        ReadDump(tmp_path / "nope.xml.bz2")
    plain = tmp_path / "plain.xml"
    plain.write_bytes(bz2.decompress(dump.read_bytes()))
    with pytest.raises(UserError, match="not bz2-compressed"):
        ReadDump(plain, bad_index)
    with pytest.raises(UserError, match="need a bz2 multistream dump"):
        iter_dump_pages(plain, (0, 100))


def _run_read_dump(transform: ReadDump, expected: list, beam_options: BeamOptions) -> None:
    with beam.Pipeline(options=pipeline_options(beam_options)) as pipeline:
        records = pipeline | transform | beam.Map(lambda r: r.model_dump_json())
        assert_that(records, equal_to([r.model_dump_json() for r in expected]))


def test_beam_read_equals_the_plain_iterator_in_process_and_multiprocess(multistream):
    pages, dump, index, _ = multistream
    _run_read_dump(ReadDump(dump, index, streams_per_unit=2), pages, BeamOptions())
    _run_read_dump(ReadDump(dump), pages, BeamOptions())
    multiprocess = BeamOptions(direct_num_workers=2, direct_running_mode="multi_processing")
    config = ExtractConfig(dump=str(dump), index=str(index), streams_per_unit=3)
    _run_read_dump(source_transform(config), pages, multiprocess)


EXPECTED_SAMPLE_PAGES = {
    "dbpedia__minidump-en.xml.bz2": (27, 2),
    "dumpster-dive__smallwiki-ltgwiki-pages-articles.xml.bz2": (2004, 195),
    "dumpster-dive__tinywiki-pages-articles.xml": (8, 0),
    "gensim__enwiki-table-markup.xml.bz2": (5, 0),
    "wikibrain__en_test.xml.bz2": (44, 11),
    "wikipedia2vec__enwiki-pages-articles-sample.xml.bz2": (3, 1),
    "wm-2__accessiblecomputing.xml": (1, 1),
    "wm-2__animalia.xml": (1, 0),
}


def test_every_real_wikipedia_sample_reads_completely():
    if not WIKISAMPLES.is_dir():
        pytest.skip("../shared/wikisamples is absent")
    files = sorted(p for p in WIKISAMPLES.iterdir() if p.is_file())
    assert files, "the wikisamples xml folder is empty"
    for path in files:
        records = list(iter_dump_pages(path))
        pages = [r for r in records if isinstance(r, Page)]
        assert len(records) == len(pages), f"{path.name}: {reasons(records)}"
        if path.name in EXPECTED_SAMPLE_PAGES:
            assert (len(pages), sum(p.redirect_to is not None for p in pages)) == EXPECTED_SAMPLE_PAGES[path.name]
        assert all(p.title and p.revision_id > 0 and p.timestamp.tzinfo for p in pages)
    (accessible,) = iter_dump_pages(WIKISAMPLES / "wm-2__accessiblecomputing.xml")
    assert (accessible.title, accessible.redirect_to, accessible.revision_id) == (
        "AccessibleComputing",
        "Computer accessibility",
        631144794,
    )


@pytest.mark.parametrize("block_bytes", [7, 61])
def test_tags_and_stream_headers_split_across_read_blocks(multistream, tmp_path, monkeypatch, block_bytes):
    pages, dump, _, offsets = multistream
    data = bytearray(dump.read_bytes())
    data[offsets[8] + 20 : offsets[8] + 60] = b"\x00" * 40  # damage the 9th page stream
    damaged = tmp_path / "damaged.xml.bz2"
    damaged.write_bytes(bytes(data))
    plain = tmp_path / "plain.xml"
    plain.write_bytes(bz2.decompress(dump.read_bytes()))
    expected_reasons = Counter(r.reason for r in iter_dump_pages(damaged) if isinstance(r, SkippedRecord))
    expected_kept = [r for r in iter_dump_pages(damaged) if isinstance(r, Page)]
    monkeypatch.setattr(dump_module, "BLOCK_BYTES", block_bytes)
    assert [r for r in iter_dump_pages(dump)] == pages
    assert [r.model_copy(update={"source": dump.name}) for r in iter_dump_pages(plain)] == pages
    records = list(iter_dump_pages(damaged))
    assert [r for r in records if isinstance(r, Page)] == expected_kept
    assert len(expected_kept) == len(pages) - 4 and reasons(records) == expected_reasons == {"corrupt_bz2": 1}


def test_shipped_sample_units_match_its_index_and_the_sequential_read():
    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    dump = sample / "enwiki-sample-pages-articles-multistream.xml.bz2"
    index = sample / "enwiki-sample-pages-articles-multistream-index.txt.bz2"
    sequential = list(iter_dump_pages(dump))
    assert all(isinstance(r, Page) for r in sequential) and len(sequential) >= 150
    units = dump_work_units(dump, index, 1)
    by_unit = {unit.start: list(read_dump_unit(unit)) for unit in units}
    assert [r for unit in units for r in by_unit[unit.start]] == sequential
    with bz2.open(index, "rt", encoding="utf-8") as lines:
        entries = [line.rstrip("\n").split(":", 2) for line in lines]
    # Like Wikimedia's, the index writes titles XML-escaped ("AT&amp;T").
    assert [(int(i), html.unescape(t)) for _, i, t in entries] == [(p.page_id, p.title) for p in sequential]
    starts = [unit.start for unit in units]
    for offset, page_id, _ in entries:  # each page is in the unit holding the stream its index line names
        unit_start = starts[bisect.bisect_right(starts, int(offset)) - 1]
        assert int(page_id) in {p.page_id for p in by_unit[unit_start]}


def test_source_arguments_find_the_index_beside_a_multistream_dump(tmp_path):
    parser = argparse.ArgumentParser()
    add_source_arguments(parser)
    dump = tmp_path / "enwiki-20260101-pages-articles-multistream.xml.bz2"
    write_multistream(make_pages(3), dump, tmp_path / "enwiki-20260101-pages-articles-multistream-index.txt.bz2")
    config = ExtractConfig(**source_config(parser.parse_args(["--dump", str(dump), "--streams-per-unit", "2"])))
    assert config.index == str(tmp_path / "enwiki-20260101-pages-articles-multistream-index.txt.bz2")
    transform = source_transform(config)
    assert isinstance(transform, ReadDump) and (transform.index, transform.streams_per_unit) == (config.index, 2)
    other = tmp_path / "other.xml.bz2"
    other.write_bytes(dump.read_bytes())
    assert source_config(parser.parse_args(["--dump", str(other)]))["index"] is None


@pytest.mark.parametrize("block_bytes", [7, 1 << 18])
def test_an_oversized_page_is_skipped_unread_whatever_the_read_blocks(tmp_path, monkeypatch, block_bytes):
    small = make_pages(4, source="big.xml", text_repeat=2)
    huge = make_pages(6, source="big.xml", text_repeat=200)[5]  # ~20 kB of XML
    unclosed = page_xml(make_pages(7, text_repeat=200)[6]).replace("</page>", "")
    body = page_xml(small[0]) + page_xml(huge) + page_xml(small[1]) + unclosed + page_xml(small[2])
    path = tmp_path / "big.xml"
    path.write_text(site_header() + body + page_xml(small[3]) + "</mediawiki>\n", encoding="utf-8")
    monkeypatch.setattr(dump_module, "MAX_PAGE_XML_BYTES", 10_000)
    monkeypatch.setattr(dump_module, "BLOCK_BYTES", block_bytes)
    records = list(iter_dump_pages(path))
    assert [r for r in records if isinstance(r, Page)] == small
    skipped = [(r.title, r.reason) for r in records if isinstance(r, SkippedRecord)]
    assert skipped == [("Page 6 & <co>", "oversized_xml"), ("Page 7 & <co>", "oversized_xml")]


class _PrefixedLocalFileSystem(LocalFileSystem):
    """`hopsmithtest://PATH` is the local PATH: object storage as Beam's FileSystems sees it, for tests."""

    @classmethod
    def scheme(cls):
        return "hopsmithtest"

    @staticmethod
    def _local(path: str) -> str:
        return path.removeprefix("hopsmithtest://")

    def open(self, path, *args, **kwargs):
        return super().open(self._local(path), *args, **kwargs)

    def exists(self, path):
        return super().exists(self._local(path))

    def match(self, patterns, limits=None):
        return super().match([self._local(p) for p in patterns], limits)


def test_dumps_in_object_storage_are_read_through_beam_filesystems(multistream):
    pages, dump, index, _ = multistream
    remote_dump, remote_index = f"hopsmithtest://{dump}", f"hopsmithtest://{index}"
    assert list(iter_dump_pages(remote_dump)) == pages
    units = dump_work_units(remote_dump, remote_index, 3)
    assert units[0].path == remote_dump and [r for u in units for r in read_dump_unit(u)] == pages
    _run_read_dump(ReadDump(remote_dump, remote_index, streams_per_unit=2), pages, BeamOptions())
    with pytest.raises(UserError, match="not found"):
        iter_dump_pages(f"hopsmithtest://{dump}.missing")
    with pytest.raises(UserError, match="cannot be read"):
        iter_dump_pages("nosuchscheme://bucket/dump.xml.bz2")
