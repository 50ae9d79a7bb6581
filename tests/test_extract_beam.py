"""Stage 1 through Beam on a damaged dump: every page accounted for, the same output in-process, with two
worker processes, and from the plain-function path; the CLI's error line for a missing input."""

from __future__ import annotations

import bz2
import datetime as dt

import pytest

from cli.main import main
from extract.oracle import extract_records
from extract.sources import iter_dump_pages
from extract.sources.dump_writer import page_xml, site_header
from extract.stage import run_extract
from extract.tables import TABLES
from ground.io import read_manifest, read_records, read_table
from schemas.config import BeamOptions, ExtractConfig
from schemas.wiki import Page

NEWEST = dt.datetime(2024, 6, 30, tzinfo=dt.UTC)


def _page(page_id: int, title: str, text: str, days_old: int = 1, ns: int = 0) -> Page:
    return Page(page_id=page_id, title=title, ns=ns, revision_id=1000 + page_id,
                timestamp=NEWEST - dt.timedelta(days=days_old), text=text)


def _person(name: str, spouse: str, place: str) -> str:
    return (f"{{{{Infobox person\n| name = {name}\n| image = {name}.jpg\n| spouse = {{{{marriage|[[{spouse}]]|1990|2000"
            f"|end=div}}}}\n| birth_place = [[{place}]]\n}}}}\n'''{name}''' is a person from [[{place}]]. "
            f"{name} married [[{spouse}]].\n== Life ==\nText.")


GOOD = [
    _page(1, "Ada Lovelace", _person("Ada Lovelace", "William King", "London")),
    _page(2, "William King", _person("William King", "Ada Lovelace", "Ockham"), days_old=200),
    _page(3, "London", "{{Infobox settlement\n| name = London\n| area_total_km2 = {{convert|1572|km2}}\n}}\n"
          "'''London''' is the capital of [[England]].", days_old=182),
    _page(4, "Lovelace", "#REDIRECT [[Countess Lovelace]]"),
    _page(5, "Countess Lovelace", "#REDIRECT [[Ada Lovelace]]"),
    _page(6, "Template:Infobox person", "{{{name}}}", ns=10),
    _page(7, "Ada (disambiguation)", "'''Ada''' may refer to:\n* [[Ada Lovelace]]\n{{disambiguation}}"),
    _page(8, "Oversized", "'''Oversized''' is big. " + "word " * 6000),
    _page(9, "Broken", "{{Infobox person\n| name = Broken\n| spouse = [[Nobody\n\n'''Broken''' is broken."),
    _page(10, "England", "'''England''' is a country. Its capital is [[London]].", days_old=500),
]
MALFORMED = (b"  <page>\n    <title>Malformed</title>\n    <ns>0</ns>\n    <id>11</id>\n    <revision><id>1011</id>"
             b"<timestamp>2024-06-01T00:00:00Z</timestamp><text>unclosed <b></revision>\n  </page>\n")
LAST = _page(12, "Cut Short", "'''Cut Short''' never arrives whole. " * 40)


@pytest.fixture(scope="module")
def damaged_dump(tmp_path_factory):
    """A bz2 multistream dump with a malformed page and a truncated last stream."""
    path = tmp_path_factory.mktemp("dump") / "damaged-pages-articles.xml.bz2"
    last = bz2.compress(page_xml(LAST).encode() + b"</mediawiki>\n")
    path.write_bytes(
        bz2.compress(site_header().encode())
        + bz2.compress("".join(page_xml(p) for p in GOOD[:6]).encode())
        + bz2.compress(MALFORMED)
        + bz2.compress("".join(page_xml(p) for p in GOOD[6:]).encode())
        + last[: len(last) // 2]
    )
    return path


CONFIG = {"max_page_bytes": 20_000, "output_shards": 2}


@pytest.fixture(scope="module")
def in_process(damaged_dump, tmp_path_factory):
    out = tmp_path_factory.mktemp("in_process")
    config = ExtractConfig(dump=str(damaged_dump), **CONFIG)
    return run_extract(config, out), out


def _rows(out, table):
    return sorted(map(repr, read_table(TABLES[table], out / table).to_pylist()))


def test_damaged_dump_every_page_accounted_for(in_process):
    manifest, out = in_process
    counts = manifest.counts
    assert counts["pages_in"] == counts["kept"] + counts["skipped"] == 12
    reasons = {s.title: s.reason for s in read_records(TABLES["skipped"], out / "skipped")}
    # Half a bz2 stream decompresses to nothing, so the cut page is known only by its offset.
    truncated = [title for title, reason in reasons.items() if reason == "truncated_bz2"]
    assert len(truncated) == 1 and truncated[0].startswith("<offset ")
    del reasons[truncated[0]]
    assert reasons == {
        "Lovelace": "redirect", "Countess Lovelace": "redirect", "Template:Infobox person": "non_article",
        "Ada (disambiguation)": "disambiguation", "Oversized": "oversized", "Broken": "broken_markup",
        "Malformed": "malformed_xml",
    }
    assert counts["skipped:truncated_bz2"] == 1 and counts["skipped:malformed_xml"] == 1
    assert manifest.as_of == NEWEST - dt.timedelta(days=1) and manifest.window_days == 182
    assert [i.path for i in manifest.inputs] == [manifest.config["dump"]] and len(manifest.inputs[0].sha256) == 64
    entities = {e.title: e for e in read_records(TABLES["entities"], out / "entities")}
    assert sorted(entities) == ["Ada Lovelace", "England", "London", "William King"]
    assert entities["Ada Lovelace"].aliases == ["Countess Lovelace", "Lovelace"]  # the chain resolved
    # London is exactly 182 days old: inside the window; William King (200) and England (500) are not.
    assert {t for t, e in entities.items() if e.is_head} == {"Ada Lovelace", "London"}
    assert counts["head_entities"] == 2
    relations = list(read_records(TABLES["relations"], out / "relations"))
    spouse = next(r for r in relations if r.head == "Ada Lovelace" and r.relation == "spouse")
    assert spouse.tail == "William King"
    assert {(q.key, q.value) for q in spouse.qualifiers} == {("start", "1990"), ("end", "2000"),
                                                              ("end_reason", "divorced")}
    assert not [r for r in relations if r.relation == "image"]
    pages = [p.title for p in read_records(TABLES["pages"], out / "pages")]
    assert sorted(pages) == sorted(entities)


def test_same_output_as_plain_functions(in_process, damaged_dump):
    _, out = in_process
    local = extract_records(iter_dump_pages(damaged_dump), ExtractConfig(dump=str(damaged_dump), **CONFIG))
    for table in TABLES:
        expected = sorted(repr(row) for row in _model_rows(TABLES[table], getattr(local, table)))
        assert _rows(out, table) == expected, table


def _model_rows(model, records):
    from schemas.base import to_table

    return to_table(model, records).to_pylist()


def test_two_worker_processes_give_identical_output(in_process, damaged_dump, tmp_path):
    manifest, out = in_process
    config = ExtractConfig(dump=str(damaged_dump), **CONFIG)
    parallel = run_extract(config, tmp_path, BeamOptions(direct_num_workers=2))
    assert parallel.counts == manifest.counts and parallel.outputs == manifest.outputs
    for table in TABLES:
        for shard in manifest.outputs[table]:
            assert (out / shard).read_bytes() == (tmp_path / shard).read_bytes(), shard


def test_rerun_is_skipped(in_process, damaged_dump):
    manifest, out = in_process
    again = run_extract(ExtractConfig(dump=str(damaged_dump), **CONFIG), out)
    assert again.finished_at == manifest.finished_at == read_manifest(out).finished_at


def test_cli_as_of_and_window(damaged_dump, tmp_path, capsys):
    out = tmp_path / "graph"
    code = main(["extract", "--dump", str(damaged_dump), "--out", str(out), "--as-of", "2024-01-01",
                 "--window", "30", "--max-page-bytes", "20000", "--shards", "1"])
    assert code == 0
    assert "12 pages in, 4 entities (2 head)" in capsys.readouterr().out
    manifest = read_manifest(out)
    assert manifest.as_of == dt.datetime(2024, 1, 1, tzinfo=dt.UTC) and manifest.window_days == 30
    heads = [e.title for e in read_records(TABLES["entities"], out / "entities") if e.is_head]
    # 19 and 1 day(s) before the given as-of; England is older than 30 days, Ada Lovelace newer than as-of.
    assert heads == ["London", "William King"]
    assert manifest.outputs["entities"] == ["entities/part-00000-of-00001.parquet"]


def test_cli_missing_dump_is_one_error_line(tmp_path, capsys):
    code = main(["extract", "--dump", str(tmp_path / "missing.xml.bz2"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and err.startswith("hopsmith: error:") and "missing.xml.bz2" in err
    assert not (tmp_path / "out").exists()


def test_api_source(tmp_path):
    """The same stage over the Action API reader (a real HTTP server on 127.0.0.1)."""
    from tests.mediawiki_server import MediaWikiServer, WikiPage, iso

    pages = [
        WikiPage("Ada Lovelace", _person("Ada Lovelace", "William King", "London"), 1, 11, iso(NEWEST)),
        WikiPage("Lovelace", "#REDIRECT [[Ada Lovelace]]", 2, 12, iso(NEWEST - dt.timedelta(days=3))),
        WikiPage("London", "'''London''' is a city in [[England]].", 3, 13, iso(NEWEST - dt.timedelta(days=300))),
    ]
    with MediaWikiServer(pages) as wiki:
        config = ExtractConfig(api_url=wiki.url, api_titles=["Ada Lovelace", "Lovelace", "London"])
        manifest = run_extract(config, tmp_path)
    assert manifest.inputs == [] and manifest.config["api_fetch_day"] == dt.datetime.now(dt.UTC).date().isoformat()
    assert (manifest.counts["pages_in"], manifest.counts["kept"], manifest.counts["skipped:redirect"]) == (3, 2, 1)
    entities = {e.title: e for e in read_records(TABLES["entities"], tmp_path / "entities")}
    assert entities["Ada Lovelace"].aliases == ["Lovelace"] and entities["Ada Lovelace"].is_head
    assert not entities["London"].is_head and manifest.as_of == NEWEST
    relations = {(r.head, r.relation, r.tail) for r in read_records(TABLES["relations"], tmp_path / "relations")}
    assert {("Ada Lovelace", "spouse", "William King"), ("London", "links_to", "England")} <= relations


def test_an_api_outage_leaves_extract_unfinished_and_a_rerun_the_same_day_fetches_again(tmp_path, monkeypatch):
    """Transient API failures are not finished work (issue 10 item 13): no manifest, a rerun retries."""
    import functools

    import extract.sources.transforms as sources
    from ground.errors import StageIncomplete
    from tests.mediawiki_server import MediaWikiServer, WikiPage, iso

    monkeypatch.setattr(sources, "ApiSettings", functools.partial(sources.ApiSettings, max_retries=1, backoff_s=0.01))
    pages = [WikiPage("Ada Lovelace", _person("Ada Lovelace", "William King", "London"), 1, 11, iso(NEWEST))]
    with MediaWikiServer(pages) as wiki:
        config = ExtractConfig(api_url=wiki.url, api_titles=["Ada Lovelace"])
        wiki.fail_next("500", "500")
        with pytest.raises(StageIncomplete, match="1 of 1 titles could not be fetched"):
            run_extract(config, tmp_path)
        assert not (tmp_path / "manifest.json").exists()
        manifest = run_extract(config, tmp_path)
    assert (manifest.counts["pages_in"], manifest.counts["kept"]) == (1, 1)
