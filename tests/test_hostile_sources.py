"""Hostile sources (issue 10 items 5, 7, 8, 9): a MediaWiki API on 127.0.0.1 that misbehaves, loops, drips
and overflows. Each case is a counted, reasoned skip of the titles concerned, within bounded time."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from extract.sources.mediawiki_api import SKIP_REASONS, ApiSettings, MediaWikiApi
from schemas.wiki import MAX_ID, Page, SkippedRecord
from tests.mediawiki_server import MediaWikiServer, WikiPage

PAGES = [
    WikiPage("Ulm", "'''Ulm''' is a city on the [[Danube]].", 31836, 9004, "2026-11-25T08:00:00Z"),
    WikiPage("Danube", "The '''Danube''' is a river.", 8073, 9005, "2026-10-01T08:00:00Z"),
]


def fetch(wiki: MediaWikiServer, titles: list[str], **settings) -> list[Page | SkippedRecord]:
    settings = {"max_retries": 0, "min_interval_s": 0.0, **settings}
    records = list(MediaWikiApi(ApiSettings(url=wiki.url, **settings), sleep=lambda s: None).fetch_pages(titles))
    assert {r.reason for r in records if isinstance(r, SkippedRecord)} <= set(SKIP_REASONS)
    return records


def reasons(records) -> dict[str, str]:
    return {r.title: (r.reason if isinstance(r, SkippedRecord) else "page") for r in records}


def revision_reply(pageid, revid, title="Ulm"):
    return {"query": {"pages": [{"pageid": pageid, "ns": 0, "title": title, "revisions": [
        {"revid": revid, "timestamp": "2026-11-25T08:00:00Z", "slots": {"main": {"content": "x"}}}]}]}}


@pytest.mark.parametrize("pageid, revid", [(2**63, 1), (1, 2**64 + 5), (-3, 1)])
def test_ids_outside_int64_are_invalid_field_skips(pageid, revid):
    with MediaWikiServer(PAGES) as wiki:
        wiki.reply_next(revision_reply(pageid, revid))
        records = fetch(wiki, ["Ulm"])
    (record,) = records
    assert (record.reason, record.page_id) == ("invalid_field", None if pageid >= 2**63 or pageid < 0 else pageid)
    assert "id" in record.detail


MALFORMED = "malformed_reply"


@pytest.mark.parametrize("titles, reply, expected", [
    (["ulm", "Danube"], {"query": {"normalized": [{"to": "Ulm"}], "pages": []}},
     {"ulm": MALFORMED, "Danube": MALFORMED}),
    (["fr:Ulm"], {"query": {"interwiki": [{"iw": "fr"}]}}, {"fr:Ulm": MALFORMED}),
    (["Ulm", "Danube"], {"query": []}, {"Ulm": MALFORMED, "Danube": MALFORMED}),
    (["Ulm", "Danube"], {"query": None}, {"Ulm": MALFORMED, "Danube": MALFORMED}),
    (["Ulm", "Danube"], {"query": {"pages": {"1": {"title": "Ulm"}}}}, {"Ulm": MALFORMED, "Danube": MALFORMED}),
    (["Ulm"], {"query": {"pages": [{"title": "Ulm", "pageid": 1, "ns": 0, "revisions": "none"}]}},
     {"Ulm": "missing_field"}),
    (["Ulm"], {"query": {"pages": [{"title": "Ulm", "pageid": 1, "ns": 0, "revisions": [{"slots": []}]}]}},
     {"Ulm": MALFORMED}),
    (["Ulm", "Danube"], {"query": {"pages": [{"title": 5}]}}, {"Ulm": MALFORMED, "Danube": MALFORMED}),
    (["Ulm", "Danube"], {"error": "database is down"}, {"Ulm": "api_error", "Danube": "api_error"}),
    (["Ulm"], {"batchcomplete": True, "continue": "rv|1"}, {"Ulm": MALFORMED}),
])
def test_malformed_replies_are_counted_skips_of_their_titles(titles, reply, expected):
    with MediaWikiServer(PAGES) as wiki:
        wiki.reply_next(reply)
        records = fetch(wiki, titles)
    assert reasons(records) == expected
    assert all(r.detail for r in records)


def test_a_repeated_continue_token_stops_with_a_reason():
    with MediaWikiServer(PAGES, loop=True, contents_per_response=1) as wiki:
        records = fetch(wiki, ["Ulm", "Danube"])
    assert reasons(records) == {"Ulm": "api_loop", "Danube": "api_loop"}
    assert len(wiki.requests) == 2  # the first reply and the one whose continuation repeats it


def test_requests_are_paced():
    # Measured on the client: a loaded machine can delay the first request's arrival at the server and so
    # shrink the gap the server sees, but the second request cannot start before the pacer lets it.
    with MediaWikiServer(PAGES, contents_per_response=1) as wiki:
        started = time.monotonic()
        fetch(wiki, ["Ulm", "Danube"], min_interval_s=0.3)
        elapsed = time.monotonic() - started
        assert len(wiki.requests) == 2
    assert elapsed >= 0.3


def test_replies_per_query_are_bounded():
    with MediaWikiServer(PAGES, loop=True) as wiki:
        api = MediaWikiApi(ApiSettings(url=wiki.url, min_interval_s=0.0, max_query_responses=3))
        wiki.reply_next(*({"query": {}, "continue": {"rvcontinue": str(n)}} for n in range(10)))
        with pytest.raises(Exception, match="more than 3 replies"):
            list(api.query({"titles": "Ulm"}))
    assert len(wiki.requests) == 3


@pytest.mark.parametrize("drip_headers", [False, True])
def test_a_dripping_server_meets_the_request_deadline(drip_headers):
    with MediaWikiServer(PAGES, drip_s=0.2, drip_headers=drip_headers) as wiki:
        started = time.monotonic()
        records = fetch(wiki, ["Ulm"], deadline_s=1.0, timeout_s=5.0)
        elapsed = time.monotonic() - started
    assert reasons(records) == {"Ulm": "api_deadline"}
    assert "deadline" in records[0].detail
    assert elapsed < 4.0  # each read arrives within the 5 s read timeout: only the deadline ends it


def test_a_slow_but_complete_reply_within_the_deadline_is_kept():
    with MediaWikiServer(PAGES, drip_s=0.001) as wiki:
        records = fetch(wiki, ["Danube"], deadline_s=30.0)
    assert reasons(records) == {"Danube": "page"}


def test_an_overflowing_reply_stops_at_the_size_cap():
    with MediaWikiServer(PAGES, overflow_bytes=400 << 20) as wiki:
        records = fetch(wiki, ["Ulm"], max_response_bytes=1 << 20)
        time.sleep(0.2)
        sent = wiki.overflow_sent
    assert reasons(records) == {"Ulm": "api_oversized"}
    assert sent < 64 << 20  # the client hung up long before the 400 MB were sent


def test_a_declared_oversized_reply_is_refused_before_its_body():
    big = WikiPage("Big", "x" * (2 << 20), 1, 2, "2026-11-25T08:00:00Z")
    with MediaWikiServer([big]) as wiki:
        records = fetch(wiki, ["Big"], max_response_bytes=1 << 20)
    assert reasons(records) == {"Big": "api_oversized"}
    assert "declared" in records[0].detail


def test_hostile_ids_round_trip_is_bounded_in_the_schema():
    assert MAX_ID == 2**63 - 1
    with pytest.raises(ValueError):
        Page(page_id=2**63, title="A", ns=0, revision_id=1, timestamp="2020-01-01T00:00:00Z", text="")
    assert Counter(type(r).__name__ for r in [SkippedRecord(title="A", stage="read", reason="x")]) == {
        "SkippedRecord": 1}
