"""The Action API reader against a real HTTP server on 127.0.0.1 speaking formatversion=2 JSON."""

from __future__ import annotations

import argparse
import datetime as dt
import email.utils
import re
from collections import Counter

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from cli.sources import add_source_arguments, source_config
from extract.sources.mediawiki_api import SKIP_REASONS, ApiSettings, MediaWikiApi, user_agent
from extract.sources.transforms import ReadFromApi, source_transform
from ground.errors import UserError
from schemas.config import ExtractConfig
from schemas.wiki import Page, SkippedRecord
from tests.mediawiki_server import MediaWikiServer, RecentChange, WikiPage, iso

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
PAGES = [
    WikiPage("Albert Einstein", "{{Infobox scientist|name=Albert Einstein}} '''Albert Einstein''' was ...", 736, 9001,
             "2026-11-20T10:00:00Z"),
    WikiPage("Einstein", "#REDIRECT [[Albert Einstein]]\n{{R from surname}}", 737, 9002, "2020-01-01T00:00:00Z"),
    WikiPage("A.E.", "#redirect [[einstein#Life]]", 738, 9003, "2019-01-01T00:00:00Z"),
    WikiPage("Ulm", "'''Ulm''' is a city on the [[Danube]].", 31836, 9004, "2026-11-25T08:00:00Z"),
    WikiPage("Danube", "The '''Danube''' is a river.", 8073, 9005, "2026-10-01T08:00:00Z"),
    WikiPage("Mileva Marić", "'''Mileva Marić''' was a physicist.", 555, 9006, "2026-11-29T08:00:00Z"),
]
USER_AGENT = re.compile(r"^hopsmith/\S+ \(.+\) requests/\S+$")


def client(wiki: MediaWikiServer, waits: list[float] | None = None, **settings) -> MediaWikiApi:
    sleep = waits.append if waits is not None else (lambda seconds: None)
    return MediaWikiApi(ApiSettings(url=wiki.url, **settings), sleep=sleep)


def by_title(records) -> dict[str, Page | SkippedRecord]:
    records = list(records)
    assert {r.reason for r in records if isinstance(r, SkippedRecord)} <= set(SKIP_REASONS)
    return {r.title: r for r in records}


def assert_polite(wiki: MediaWikiServer) -> None:
    assert wiki.requests
    for request in wiki.requests:
        assert USER_AGENT.match(request.headers["User-Agent"]), request.headers["User-Agent"]
        assert request.params["maxlag"] == "5"
        assert (request.params["format"], request.params["formatversion"]) == ("json", "2")


def test_titles_are_sent_fifty_to_a_request_and_missing_pages_are_skips():
    titles = [p.title for p in PAGES if not p.is_redirect] + [f"No such page {i}" for i in range(116)]
    assert len(titles) == 120
    with MediaWikiServer(PAGES) as wiki:
        records = list(client(wiki).fetch_pages(titles))
    assert sorted(len(r.params["titles"].split("|")) for r in wiki.requests) == [20, 50, 50]  # concurrent
    assert {r.params["rvprop"] for r in wiki.requests} == {"ids|timestamp|content"}
    assert {r.params["rvslots"] for r in wiki.requests} == {"main"}
    assert_polite(wiki)
    kept = [r for r in records if isinstance(r, Page)]
    assert sorted(p.title for p in kept) == ["Albert Einstein", "Danube", "Mileva Marić", "Ulm"]
    assert Counter(r.reason for r in records if isinstance(r, SkippedRecord)) == {"missing_page": 116}
    ulm = by_title(records)["Ulm"]
    assert (ulm.page_id, ulm.revision_id, ulm.ns, ulm.source) == (31836, 9004, 0, wiki.url)
    assert ulm.timestamp == dt.datetime(2026, 11, 25, 8, tzinfo=dt.UTC)
    assert ulm.text == PAGES[3].content


def test_continuation_merges_the_whole_continue_object():
    titles = ["Albert Einstein", "Ulm", "Danube", "Mileva Marić"]
    with MediaWikiServer(PAGES, contents_per_response=1) as wiki:
        records = list(client(wiki).fetch_pages(titles))
    assert len(wiki.requests) == 4
    assert "rvcontinue" not in wiki.requests[0].params
    assert [(r.params["rvcontinue"], r.params["continue"]) for r in wiki.requests[1:]] == [
        ("1", "||"), ("2", "||"), ("3", "||"),
    ]
    assert {r.title: r.text for r in records} == {p.title: p.content for p in PAGES if p.title in titles}


def test_429_and_maxlag_honour_retry_after_then_succeed():
    waits: list[float] = []
    with MediaWikiServer(PAGES, retry_after="0.25") as wiki:
        wiki.fail_next("429", "maxlag")
        records = list(client(wiki, waits).fetch_pages(["Ulm"]))
    assert waits == [0.25, 0.25]
    assert len(wiki.requests) == 3
    assert_polite(wiki)
    assert [r.title for r in records if isinstance(r, Page)] == ["Ulm"]


def test_retry_after_is_really_waited_with_the_default_sleep():
    with MediaWikiServer(PAGES, retry_after="0.1") as wiki:
        wiki.fail_next("429", "maxlag")
        records = list(MediaWikiApi(ApiSettings(url=wiki.url)).fetch_pages(["Danube"]))
    assert [r.title for r in records] == ["Danube"] and len(wiki.requests) == 3


def test_retries_are_bounded_and_failures_become_skips():
    waits: list[float] = []
    with MediaWikiServer(PAGES) as wiki:
        wiki.fail_next(*["500"] * 10)
        records = list(client(wiki, waits, max_retries=2, backoff_s=0.5).fetch_pages(["Ulm", "Danube"]))
    assert len(wiki.requests) == 3
    assert waits == [0.5, 1.0]  # exponential backoff when the server gives no Retry-After
    assert {(r.title, r.reason) for r in records} == {("Ulm", "api_unavailable"), ("Danube", "api_unavailable")}
    assert "HTTP 500" in records[0].detail


def test_api_error_bodies_retry_only_when_transient():
    waits: list[float] = []
    with MediaWikiServer(PAGES) as wiki:
        wiki.fail_next("ratelimited", "html")
        assert [r.title for r in client(wiki, waits, backoff_s=0.3).fetch_pages(["Ulm"])] == ["Ulm"]
        assert waits == [0.3, 0.6] and len(wiki.requests) == 3
        wiki.fail_next("readonly")
        (record,) = client(wiki, waits).fetch_pages(["Danube"])
    assert (record.reason, len(wiki.requests)) == ("api_error", 4)
    assert "readonly" in record.detail


def test_retry_after_as_an_http_date(monkeypatch):
    later = email.utils.format_datetime(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30), usegmt=True)
    waits: list[float] = []
    with MediaWikiServer(PAGES, retry_after=later) as wiki:
        wiki.fail_next("429")
        list(client(wiki, waits).fetch_pages(["Ulm"]))
    assert len(waits) == 1 and 20 < waits[0] <= 30


def test_an_api_url_must_be_http():
    with pytest.raises(UserError, match="http"):
        MediaWikiApi(ApiSettings(url="en.wikipedia.org/w/api.php"))
    with pytest.raises(UserError, match="http"):
        ReadFromApi(ApiSettings(url="ftp://example.org/api.php"), titles=["A"])


def test_redirect_chains_become_redirect_pages_and_targets_are_fetched():
    with MediaWikiServer(PAGES) as wiki:
        records = by_title(client(wiki).fetch_pages(["A.E.", "albert_Einstein"]))
    assert set(records) == {"A.E.", "Einstein", "Albert Einstein"}
    assert records["A.E."].redirect_to == "Einstein"
    assert records["Einstein"].redirect_to == "Albert Einstein"
    assert records["Albert Einstein"].redirect_to is None
    assert all(isinstance(r, Page) for r in records.values())


def test_invalid_titles_are_skipped_with_their_reason():
    with MediaWikiServer(PAGES) as wiki:
        records = by_title(client(wiki).fetch_pages(["Ulm", "Bad [title]", "Pipe|title", " "]))
    assert {title: r.reason for title, r in records.items() if isinstance(r, SkippedRecord)} == {
        "Bad [title]": "invalid_title", "Pipe|title": "invalid_title", " ": "invalid_title"}
    assert isinstance(records["Ulm"], Page)
    # A title holding "|" is sent with MediaWiki's \x1f separator, so it cannot split into two titles.
    assert wiki.requests[0].params["titles"] == "\x1fUlm\x1fBad [title]\x1fPipe|title"


def test_recent_changes_list_main_namespace_titles_within_the_window():
    changes = [
        RecentChange("Ulm", iso(NOW - dt.timedelta(days=5))),
        RecentChange("Mileva Marić", iso(NOW - dt.timedelta(days=1))),
        RecentChange("Ulm", iso(NOW - dt.timedelta(days=2))),
        RecentChange("Talk:Ulm", iso(NOW - dt.timedelta(days=1)), ns=1),
        RecentChange("Danube", iso(NOW - dt.timedelta(days=3))),
        RecentChange("Albert Einstein", iso(NOW - dt.timedelta(days=10))),
    ]
    with MediaWikiServer(PAGES, changes, rc_limit=2) as wiki:
        api = client(wiki)
        assert api.recent_titles(7, now=NOW) == ["Mileva Marić", "Ulm", "Danube"]
        first = wiki.requests[0].params
        assert (first["list"], first["rcnamespace"], first["rcprop"]) == ("recentchanges", "0", "title|timestamp|ids")
        assert (first["rcstart"], first["rcend"]) == (iso(NOW), iso(NOW - dt.timedelta(days=7)))
        assert wiki.requests[1].params["rccontinue"] == "2"
        assert_polite(wiki)
        with pytest.raises(UserError, match="30 days"):
            api.recent_titles(31, now=NOW)
        with pytest.raises(UserError, match="between 1 and 30"):
            api.recent_titles(0, now=NOW)


def test_in_flight_requests_are_bounded():
    titles = [f"Title {i}" for i in range(200)]
    with MediaWikiServer(PAGES, delay_s=0.2) as wiki:
        records = list(client(wiki, max_in_flight=2).fetch_pages(titles))
    assert len(wiki.requests) == 4 and len(records) == 200
    assert wiki.in_flight_peak <= 2


def test_user_agent_names_the_project_its_contact_and_requests(monkeypatch):
    monkeypatch.setenv("HOPSMITH_CONTACT", "data-team@example.org")
    agent = user_agent()
    assert USER_AGENT.match(agent) and "(data-team@example.org)" in agent


def test_beam_read_from_api_equals_the_plain_reader_and_keeps_each_page_once():
    titles = ["A.E."] + [f"Missing {i}" for i in range(55)] + ["Einstein", "Ulm"]
    changes = [RecentChange("Ulm", iso(NOW - dt.timedelta(days=1))), RecentChange("Einstein", iso(NOW))]
    with MediaWikiServer(PAGES, changes) as wiki:
        settings = ApiSettings(url=wiki.url)
        expected = list(MediaWikiApi(settings).fetch_pages(titles))
        expected_recent = list(MediaWikiApi(settings).fetch_pages(["Einstein", "Ulm"]))
        with beam.Pipeline() as pipeline:
            from_titles = pipeline | "Titles" >> ReadFromApi(settings, titles=titles)
            assert_that(from_titles | "T" >> beam.Map(lambda r: r.model_dump_json()),
                        equal_to([r.model_dump_json() for r in expected]), label="titles")
            recent = pipeline | "Recent" >> ReadFromApi(settings, recent_days=3, now=NOW)
            assert_that(recent | "R" >> beam.Map(lambda r: r.model_dump_json()),
                        equal_to([r.model_dump_json() for r in expected_recent]), label="recent")
    assert len({r.title for r in expected}) == len(expected) == 59  # 56 titles + 3 reached by redirects
    with pytest.raises(UserError, match="30 days"):
        ReadFromApi(ApiSettings(url="http://127.0.0.1:9/w/api.php"), recent_days=45)


def _parse(*argv: str):
    parser = argparse.ArgumentParser(prog="hopsmith extract")
    add_source_arguments(parser)
    return parser, parser.parse_args(list(argv))


def test_source_arguments_choose_the_api_and_say_recentchanges_reaches_30_days(tmp_path, capsys):
    parser, args = _parse("--api", "https://en.wikipedia.org/w/api.php", "--titles", "Ulm", "Danube")
    help_text = " ".join(parser.format_help().split())
    assert "only reaches back 30 days" in help_text
    config = ExtractConfig(**source_config(args))
    assert (config.api_url, config.api_titles, config.dump) == ("https://en.wikipedia.org/w/api.php", ["Ulm", "Danube"], None)
    transform = source_transform(config)
    assert isinstance(transform, ReadFromApi) and transform.titles == ["Ulm", "Danube"]
    titles_file = tmp_path / "titles.txt"
    titles_file.write_text("# wanted\nUlm\n\nMileva Marić\n", encoding="utf-8")
    _, args = _parse("--api", "http://x/api.php", "--titles-file", str(titles_file), "--api-max-in-flight", "2")
    assert source_config(args)["api_titles"] == ["Ulm", "Mileva Marić"]
    assert source_config(args)["api_max_in_flight"] == 2
    _, args = _parse("--api", "http://x/api.php", "--recent-days", "30")
    assert ExtractConfig(**source_config(args)).api_recent_days == 30
    with pytest.raises(SystemExit):
        _parse("--api", "http://x/api.php", "--recent-days", "31")
    assert "only reaches back 30 days" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    ((), "choose one source"),
    (("--dump", "d.xml.bz2", "--api", "http://x/api.php"), "choose one source"),
    (("--api", "http://x/api.php"), "needs --titles"),
    (("--api", "http://x/api.php", "--titles", "A", "--recent-days", "3"), "one of them"),
    (("--dump", "d.xml.bz2", "--titles", "A"), "belong to --api"),
    (("--api", "http://x/api.php", "--index", "i.txt"), "--index belongs to --dump"),
    (("--api", "http://x/api.php", "--titles-file", "/nonexistent/titles.txt"), "titles file not found"),
])
def test_inconsistent_source_choices_are_user_errors(argv, message):
    _, args = _parse(*argv)
    with pytest.raises(UserError, match=message):
        source_config(args)
