"""Stage 1 extraction as plain functions: classification, redirects, window, guards, reconciliation."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

import mwparserfromhell
import pytest

from extract import article
from extract.article import extract_article, is_head
from extract.classify import Redirect, classify_record, resolve_redirects
from extract.oracle import extract_records
from extract.sources import iter_dump_pages
from schemas.config import ExtractConfig
from schemas.wiki import Page, SkippedRecord

AS_OF = dt.datetime(2024, 6, 30, 12, 0, tzinfo=dt.UTC)


def page(title: str, text: str, *, ns: int = 0, page_id: int = 1, days_old: float = 1.0, revision_id: int | None = None,
         redirect_to: str | None = None) -> Page:
    return Page(page_id=page_id, title=title, ns=ns, revision_id=revision_id or page_id * 10,
                timestamp=AS_OF - dt.timedelta(days=days_old), text=text, redirect_to=redirect_to)


FILM = """{{Infobox film
| name = Inception
| image = Inception poster.jpg
| director = [[Christopher Nolan]]
| starring = {{plainlist|
* [[Leonardo DiCaprio]]
* [[Elliot Page]]
}}
| released = {{film date|2010|7|16}}
| country = {{flag|US}}
}}
'''''Inception''''' is a 2010 science fiction film directed by [[Chris Nolan]]. It stars [[Leonardo DiCaprio]].
"""


def test_classify_each_kind_of_page():
    assert isinstance(classify_record(page("Inception", FILM)), Page)
    skipped = classify_record(page("Template:Infobox film", "{{...}}", ns=10))
    assert isinstance(skipped, SkippedRecord) and skipped.reason == "non_article"
    assert classify_record(page("Nolan", "#REDIRECT [[Christopher_Nolan]]")) == Redirect("Nolan", "Christopher Nolan", 1)
    assert classify_record(page("Nolan", "", redirect_to="Christopher Nolan#Career")).target == "Christopher Nolan"
    dab = classify_record(page("Mercury", "'''Mercury''' may refer to:\n{{dab}}"))
    assert isinstance(dab, SkippedRecord) and dab.reason == "disambiguation"
    read_error = SkippedRecord(title="<offset 5>", stage="read", reason="truncated_bz2")
    assert classify_record(read_error) is read_error


def test_redirect_chains_and_cycles():
    table = resolve_redirects({"A": "B", "B": "C", "C": "D", "X": "Y", "Y": "X", "Z": "X", "Self": "Self"})
    assert table.resolve("A") == table.resolve("B") == table.resolve("C") == "D"
    assert table.cycles == {"X", "Y", "Z", "Self"}
    assert table.resolve("D") == "D" and table.resolve("X") == "X"


def test_window_boundaries():
    window = 182
    assert is_head(AS_OF - dt.timedelta(days=window), AS_OF, window)
    assert not is_head(AS_OF - dt.timedelta(days=window, seconds=1), AS_OF, window)
    assert is_head(AS_OF, AS_OF, window)
    assert not is_head(AS_OF + dt.timedelta(seconds=1), AS_OF, window)  # after the snapshot


def test_article_relations_resolve_redirects_and_lead_links():
    table = resolve_redirects({"Chris Nolan": "Christopher Nolan", "US": "United States"})
    result = extract_article(page("Inception", FILM), table.resolve, AS_OF, ExtractConfig())
    rows = [(r.relation, r.mapped, r.tail or r.value, r.source) for r in result.relations]
    assert rows == [  # `name` (the title) and `image` are plumbing: counted, not relations
        ("director", True, "Christopher Nolan", "infobox"),
        ("starring", True, "Leonardo DiCaprio", "infobox"),
        ("starring", True, "Elliot Page", "infobox"),
        ("releaseDate", True, "2010-07-16", "infobox"),
        ("country", True, "United States", "infobox"),
        ("links_to", False, "Christopher Nolan", "link"),
        ("links_to", False, "Leonardo DiCaprio", "link"),
    ]
    assert result.excluded == {"names_page": 1, "image": 1}
    link = result.relations[-1]
    assert link.evidence == "It stars Leonardo DiCaprio."
    director = result.relations[0]
    assert director.provenance.infobox == "infobox film" and director.provenance.parameter == "director"
    assert director.provenance.revision_id == 10 and director.provenance.timestamp == AS_OF - dt.timedelta(days=1)
    released = result.relations[3]
    assert released.date == dt.date(2010, 7, 16) and released.provenance.parameter == "released"
    entity = result.entity
    assert (entity.type, entity.is_head, entity.infobox) == ("Film", True, "infobox film")
    assert entity.description == "Inception is a 2010 science fiction film directed by Chris Nolan."


def test_guards_skip_with_reasons(monkeypatch):
    config = ExtractConfig(max_page_bytes=2000, page_timeout_s=0.2)
    resolve = resolve_redirects({}).resolve
    oversized = extract_article(page("Big", "x" * 2001), resolve, AS_OF, config)
    assert (oversized.reason, oversized.stage) == ("oversized", "extract")
    broken = extract_article(page("Broken", "{{Infobox person\n| name = [[X\n"), resolve, AS_OF, config)
    assert broken.reason == "broken_markup"
    nested = "{{Infobox person\n| name = " + "{{nowrap|" * 45 + "X" + "}}" * 45 + "\n}}\nLead."
    too_deep = extract_article(page("Deep", nested), resolve, AS_OF, config)
    assert too_deep.reason == "parse_error" and "nested 46 deep" in too_deep.detail

    def fails(_):
        raise mwparserfromhell.parser.ParserError("tokenizer exited unexpectedly")

    monkeypatch.setattr(article, "parse_infoboxes", fails)
    assert extract_article(page("Bad", FILM), resolve, AS_OF, config).reason == "parse_error"

    def hangs(_):
        while True:  # a parser that never returns: interrupted by the alarm in the main thread
            sum(range(1000))

    monkeypatch.setattr(article, "parse_infoboxes", hangs)
    timed_out = extract_article(page("Slow", FILM), resolve, AS_OF, config)
    assert timed_out.reason == "timeout" and "alarm" in timed_out.detail


def test_timeout_in_a_worker_thread(monkeypatch):
    """Off the main thread no alarm can be used: the deadline is checked between infobox spans."""
    config = ExtractConfig(page_timeout_s=0.05)
    many_boxes = "\n".join("{{Infobox person|name=X}}" for _ in range(50)) + "\nLead."

    def slow(text):
        time.sleep(0.01)
        return []

    monkeypatch.setattr(article, "parse_infoboxes", slow)
    results = []
    worker = threading.Thread(target=lambda: results.append(
        extract_article(page("Slow", many_boxes), resolve_redirects({}).resolve, AS_OF, config)))
    worker.start()
    worker.join()
    assert results[0].reason == "timeout" and "alarm" not in results[0].detail


def test_records_reconcile_with_duplicates_aliases_and_read_errors():
    records = [
        page("Inception", FILM, page_id=1, days_old=10),
        page("Inception", FILM.replace("2010 science", "2010 American science"), page_id=1, days_old=5,
             revision_id=99),
        page("Chris Nolan", "#REDIRECT [[Nolan]]", page_id=2),
        page("Nolan", "#REDIRECT [[Christopher Nolan]]", page_id=3),
        page("Christopher Nolan", "'''Christopher Nolan''' is a film director.", page_id=4, days_old=400),
        page("Loop A", "#REDIRECT [[Loop B]]", page_id=5),
        page("Loop B", "#REDIRECT [[Loop A]]", page_id=6),
        page("Category:Films", "", ns=14, page_id=7),
        page("Nolan (disambiguation)", "Nolan may refer to:", page_id=8),
        page("List of films by Christopher Nolan", "These are the films of [[Christopher Nolan]].", page_id=9),
        SkippedRecord(title="<offset 99>", stage="read", reason="truncated_bz2"),
    ]
    result = extract_records(records, ExtractConfig())
    counts = result.counts()
    assert counts["pages_in"] == 11 == counts["kept"] + counts["skipped"]
    assert {k: v for k, v in counts.items() if k.startswith("skipped:")} == {
        "skipped:duplicate": 1, "skipped:redirect": 2, "skipped:redirect_cycle": 2, "skipped:non_article": 1,
        "skipped:disambiguation": 1, "skipped:truncated_bz2": 1,
    }
    assert result.as_of == AS_OF - dt.timedelta(days=1)  # newest revision in the input
    by_title = {e.title: e for e in result.entities}
    assert by_title["Christopher Nolan"].aliases == ["Chris Nolan", "Nolan"]
    assert by_title["Christopher Nolan"].is_head is False and by_title["Inception"].is_head is True
    assert by_title["Inception"].revision_id == 99  # the later duplicate wins
    listing = by_title["List of films by Christopher Nolan"]
    assert listing.is_list and listing.type == "List" and not by_title["Inception"].is_list
    director = next(r for r in result.relations if r.relation == "director")
    assert director.tail == "Christopher Nolan"


WIKISAMPLES = Path(__file__).resolve().parents[2] / "shared" / "wikisamples" / "xml"


@pytest.mark.skipif(not WIKISAMPLES.is_dir(), reason="../shared/wikisamples is absent")
@pytest.mark.parametrize("name", sorted(p.name for p in WIKISAMPLES.glob("*")) if WIKISAMPLES.is_dir() else [])
def test_real_dumps_finish_and_reconcile(name):
    path = WIKISAMPLES / name
    records = list(iter_dump_pages(path))
    result = extract_records(records, ExtractConfig(dump=str(path)))
    counts = result.counts()
    assert counts["pages_in"] == counts["kept"] + counts["skipped"] == len(records) > 0
    english_with_infobox = [e for e in result.entities if e.infobox and e.infobox.startswith("infobox")]
    heads_with_facts = {r.head for r in result.relations if r.source == "infobox"}
    assert all(e.title in heads_with_facts for e in english_with_infobox)
    if name.startswith(("dbpedia", "wikibrain", "gensim")):
        assert len(english_with_infobox) >= 3


@pytest.mark.skipif(not WIKISAMPLES.is_dir(), reason="../shared/wikisamples is absent")
def test_real_dump_facts():
    path = WIKISAMPLES / "dbpedia__minidump-en.xml.bz2"
    result = extract_records(iter_dump_pages(path), ExtractConfig())
    facts = {(r.head, r.relation, r.tail or r.value) for r in result.relations}
    assert ("Angela Merkel", "predecessor", "Gerhard Schröder") in facts
    assert ("Angela Merkel", "birthPlace", "Hamburg") in facts
    merkel = next(e for e in result.entities if e.title == "Angela Merkel")
    assert merkel.type == "Politician"
    assert merkel.description.startswith("Angela Dorothea Merkel (born 17 July 1954) is a German politician")
