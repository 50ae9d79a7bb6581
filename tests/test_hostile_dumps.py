"""Crafted hostile dumps (issue 10 items 5, 6, 12, 18; issue 11 item 6): huge ids, implausible revision
times, wrong multistream index offsets, duplicate pages, bidi controls in titles, old export schemas."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from graph.csr import build_csr
from pipeline.extract import IMPLAUSIBLE_COUNT, extract_records, run_extract
from pipeline.io import read_manifest, read_table
from pipeline.sources import iter_dump_pages
from pipeline.sources.dump_writer import page_xml, site_header
from schemas.base import arrow_schema
from schemas.config import ExtractConfig
from schemas.wiki import Entity, Page, Relation, SkippedRecord

DUMP_DAY = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)


def _page(page_id: int, title: str, text: str = "", stamp: dt.datetime = DUMP_DAY, revision_id: int = 0) -> Page:
    text = text or f"'''{title}''' is a place in [[Europe]]."
    return Page(page_id=page_id, title=title, ns=0, revision_id=revision_id or 1000 + page_id, timestamp=stamp,
                text=text)


def _write(path, body: str) -> str:
    path.write_text(site_header() + body + "</mediawiki>\n", encoding="utf-8")
    return str(path)


def test_ids_beyond_int64_in_a_dump_are_counted_skips_and_the_rest_is_written(tmp_path):
    good = page_xml(_page(1, "Ulm"))
    huge_page = page_xml(_page(2, "Huge page id")).replace("<id>2</id>", f"<id>{2**63}</id>")
    huge_revision = page_xml(_page(3, "Huge revision id")).replace("<id>1003</id>", f"<id>{2**64}</id>")
    dump = _write(tmp_path / "ids.xml", good + huge_page + huge_revision)
    records = list(iter_dump_pages(dump))
    skips = {r.title: r for r in records if isinstance(r, SkippedRecord)}
    assert set(skips) == {"Huge page id", "Huge revision id"}
    assert {r.reason for r in skips.values()} == {"invalid_field"}
    assert "page_id" in skips["Huge page id"].detail and "revision_id" in skips["Huge revision id"].detail
    assert skips["Huge revision id"].page_id == 3 and skips["Huge page id"].page_id is None
    manifest = run_extract(ExtractConfig(dump=dump), tmp_path / "graph")
    assert (manifest.counts["kept"], manifest.counts["skipped:invalid_field"]) == (1, 2)


def test_implausible_revision_times_do_not_choose_the_as_of(tmp_path):
    pages = [_page(1, "Ulm", stamp=DUMP_DAY - dt.timedelta(days=2)),
             _page(2, "Future", stamp=dt.datetime(2030, 1, 1, tzinfo=dt.UTC)),
             _page(3, "Doomsday", stamp=dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC))]
    dump = _write(tmp_path / "testwiki-20240601-pages-articles.xml", "".join(page_xml(p) for p in pages))
    manifest = run_extract(ExtractConfig(dump=dump), tmp_path / "graph")
    assert manifest.as_of == DUMP_DAY - dt.timedelta(days=2)
    assert manifest.counts[IMPLAUSIBLE_COUNT] == 2
    assert "newest plausible revision" in manifest.as_of_reason and "2024-06-01" in manifest.as_of_reason
    assert read_manifest(tmp_path / "graph").as_of_reason == manifest.as_of_reason
    table = read_table(Entity, tmp_path / "graph" / "entities")
    heads = dict(zip(table.column("title").to_pylist(), table.column("is_head").to_pylist(), strict=True))
    assert heads == {"Ulm": True, "Future": False, "Doomsday": False}


def test_without_a_dated_file_name_the_ceiling_is_the_time_of_the_run():
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    pages = [_page(1, "Ulm", stamp=dt.datetime(2026, 11, 1, tzinfo=dt.UTC)),
             _page(2, "Future", stamp=dt.datetime(2027, 1, 1, tzinfo=dt.UTC))]
    result = extract_records(pages, ExtractConfig(), now=now)
    assert result.as_of == dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    assert result.counts()[IMPLAUSIBLE_COUNT] == 1
    assert "time of the run" in result.as_of_choice.reason
    given = extract_records(pages, ExtractConfig(as_of=dt.datetime(2027, 2, 1, tzinfo=dt.UTC)), now=now)
    assert given.as_of.year == 2027 and given.as_of_choice.reason.startswith("given by --as-of")


def test_window_flags_survive_the_last_representable_day():
    far = dt.datetime(9999, 12, 31, 23, 0, tzinfo=dt.UTC)
    result = extract_records([_page(1, "Ulm", stamp=far), _page(2, "Europe", stamp=far)],
                             ExtractConfig(as_of=far), now=far)
    entities = pa.Table.from_pylist([e.model_dump() for e in result.entities], schema=arrow_schema(Entity))
    relations = pa.Table.from_pylist([r.model_dump() for r in result.relations], schema=arrow_schema(Relation))
    assert relations.num_rows
    graph = build_csr(entities, relations, as_of=far.date(), window_days=30)
    assert graph.num_edges and graph.in_window.all()  # revised within the window before the last day
