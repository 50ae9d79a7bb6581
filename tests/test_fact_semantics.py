"""Fact semantics on crafted pages (issue 25): a link inside a phrase is not the value, a linked page whose class
the property's range rules out is not the fact, parenthesised years and end notes become start/end qualifiers,
list pages and plain-text lists are no single value, an officeholder infobox is no occupation, and a question is
as of its oldest fact's page, with ended facts in the past."""

from __future__ import annotations

import datetime as dt

import pytest

from extract.article import ArticleResult, extract_article
from extract.oracle import extract_records
from extract.sources.dump_writer import page_xml, site_header
from extract.stage import run_extract
from ground.io import read_records
from ground.stage import begin_stage
from knowledge.ontology import load_ontology
from pipeline.dataset import stage_dirs
from pipeline.run_summary import window_lines
from schemas.config import ExtractConfig, QuestionConfig
from schemas.wiki import Page, Relation
from synth.question_plan import EntityInfo, QuestionContext, plan_question, question_as_of
from synth.question_writers import write_template
from tests.test_questions import path_of
from tests.walk_graphs import csr, fact
from wikitext.infobox import note_qualifiers, parse_infoboxes
from wikitext.markup import is_list_page

SNAPSHOT = dt.date(2012, 6, 1)


def page(title: str, text: str, when: dt.datetime) -> Page:
    return Page(page_id=abs(hash(title)) % 10**6, title=title, ns=0, revision_id=1, timestamp=when, text=text)


HANS = page("Hans Vogel", """{{Infobox officeholder
| name = Hans Vogel
| office = Chairman of the [[Social Democratic Party of Germany]]
| spouse = [[Greta Vogel]] (1990–2010)
| known_for = Ex-wife of [[Silvio Berlusconi]]
| occupation = civil servant, politician
| children = [[Spouses of the Prime Ministers of the United Kingdom]]
}}
'''Hans Vogel''' (born 1950) is a German politician.""", dt.datetime(2012, 3, 5, tzinfo=dt.UTC))

GRETA = page("Greta Vogel", """{{Infobox officeholder
| name = Greta Vogel
| spouse = {{marriage|[[Hans Vogel]]|1990|2010|end=div}}
| birth_place = [[Aachen]]
| party = [[Social Democratic Party of Germany]] (since 1990)
}}
'''Greta Vogel''' (born 1955) is the former wife of the German politician [[Hans Vogel]].""",
             dt.datetime(2010, 5, 2, tzinfo=dt.UTC))

BISHOP = page("Karl Stein", """{{Infobox officeholder
| name = Karl Stein
| office = [[Bishop of Mainz]]
}}
'''Karl Stein''' (1900–1970) was a German Catholic bishop.""", dt.datetime(2011, 1, 1, tzinfo=dt.UTC))


def read(article: Page) -> ArticleResult:
    result = extract_article(article, lambda title: title, dt.datetime(2012, 6, 1, tzinfo=dt.UTC), ExtractConfig())
    assert isinstance(result, ArticleResult)
    return result


def infobox_facts(result: ArticleResult, relation: str) -> list[tuple]:
    return [(r.tail or r.value, {q.key: q.value for q in r.qualifiers}) for r in result.relations
            if r.source == "infobox" and r.relation == relation]


def test_a_link_inside_a_phrase_is_not_the_value():
    hans = read(HANS)
    assert infobox_facts(hans, "office") == [("Chairman of the Social Democratic Party of Germany", {})]
    assert infobox_facts(hans, "knownFor") == []  # an entity property: the phrase is no entity, so no fact
    assert hans.excluded["link_in_phrase"] == 1
    (box,) = parse_infoboxes("{{Infobox officeholder|office=[[Minister of Finance]] of [[Germany]]}}")
    assert [f.tail for f in box.facts] == ["Minister of Finance"] and box.excluded["link_in_phrase"] == 1
    (box,) = parse_infoboxes("{{Infobox officeholder|office=[[Bundestag]] Leader of the [[CDU/CSU]] in [[Bonn]]"
                             "<br>for [[Bonn]]}}")  # a phrase of several links; a line with a connector and no head
    assert [(f.value_type, f.value) for f in box.facts] == [("string", "Bundestag Leader of the CDU/CSU in Bonn")]
    assert box.excluded["link_in_phrase"] == 1
    (box,) = parse_infoboxes("{{Infobox company|industry=[[Banking]], System of [[payment card]]s, [[Fraud]]}}")
    assert [f.tail for f in box.facts] == ["Banking", "Fraud"]  # in a list, a phrase drops only its own link
    assert box.excluded["link_in_phrase"] == 1
    (box,) = parse_infoboxes("{{Infobox person|citizenship=Austrian subject of the [[Austro-Hungarian Empire]]}}")
    assert [f.tail for f in box.facts] == ["Austro-Hungarian Empire"]  # the head relates the subject to the link
    (box,) = parse_infoboxes("{{Infobox person|birth_place=[[Bonn]], [[West Germany]]}}")  # a place and its container
    assert [(f.tail, f.qualifiers) for f in box.facts] == [("Bonn", [("within", "West Germany")])]
    assert box.excluded == {"place_container": 1}


RANGE_PAGES = [
    page("Social Democratic Party of Germany", "{{Infobox political party\n| name = SPD\n}}\n'''The Social "
         "Democratic Party of Germany''' is a political party.", dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("SPD", "#REDIRECT [[Social Democratic Party of Germany]]", dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("Silvio Berlusconi", "{{Infobox officeholder\n| name = Silvio Berlusconi\n}}\n'''Silvio Berlusconi''' "
         "is an Italian politician.", dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("Lviv", "{{Infobox settlement\n| settlement_type = City\n}}\n'''Lviv''' is a city.",
         dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("Ukraine", "{{Infobox country\n| conventional_long_name = Ukraine\n}}\n'''Ukraine''' is a country.",
         dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("Anna Weber", """{{Infobox officeholder
| name = Anna Weber
| office = [[Social Democratic Party of Germany]]
| office2 = [[SPD]]
| office3 = [[Chancellor of Germany]]
| party = [[SPD]]
| known_for = [[Silvio Berlusconi]]
}}
'''Anna Weber''' (born 1950) is a German politician.""", dt.datetime(2012, 3, 5, tzinfo=dt.UTC)),
    page("Okean Elzy", "{{Infobox musical artist\n| name = Okean Elzy\n| background = group_or_band\n"
         "| origin = [[Lviv]], [[Ukraine]]\n}}\n'''Okean Elzy''' is a Ukrainian rock band.",
         dt.datetime(2012, 3, 5, tzinfo=dt.UTC)),
]


def fact_row(relation: Relation) -> str:
    return relation.model_dump_json(exclude={"provenance"})


def range_facts(relations, head: str) -> set[tuple]:
    return {(r.relation, r.tail) for r in relations if r.head == head and r.source == "infobox" and r.tail}


def assert_range_checked(relations, counts):
    """A party as an office (linked directly or through a redirect) and a person as what one is known for
    are no such facts; the party as a party, an office the input lacks (unknown class: kept) and, of a band's
    origin "[[Lviv]], [[Ukraine]]", the place itself stay (Ukraine is its container, no second hometown)."""
    assert range_facts(relations, "Anna Weber") == {("office", "Chancellor of Germany"),
                                                    ("party", "Social Democratic Party of Germany")}
    assert range_facts(relations, "Okean Elzy") == {("hometown", "Lviv")}
    assert counts["excluded:range"] == 3  # two offices, the person known for
    assert counts["excluded:place_container"] == 1  # Ukraine in "[[Lviv]], [[Ukraine]]"
    assert counts["range_check:fits"] == 2 and counts["range_check:unknown_class"] == 1


def test_a_linked_page_outside_the_range_is_not_the_fact():
    ontology = load_ontology()
    assert ontology.range_check("office", "PoliticalParty") == "violates"  # object_ranges.tsv: no party
    assert ontology.range_check("knownFor", "Politician") == "violates"  # ... and no person
    assert ontology.range_check("hometown", "Country") == "violates"  # DBpedia's range: Settlement
    assert ontology.range_check("hometown", "City") == "fits"
    assert ontology.range_check("producer", "Person") == "fits"  # Agent includes persons (range_superclasses)
    assert ontology.range_check("starring", "MusicalArtist") == "fits"  # a singer may act (range_role_classes)
    assert ontology.range_check("party", "Organisation") == "broader_class"  # may be a party: kept
    assert ontology.range_check("spouse", "thing") == "unknown_class"
    assert ontology.range_check("occupation", "Person") == "no_range"  # "A lawyer is a person who ...": unchecked
    extraction = extract_records(RANGE_PAGES, ExtractConfig())
    assert_range_checked(extraction.relations, extraction.counts())


FOOTBALL_PAGES = [
    page("Kirkton", "{{Infobox settlement\n| settlement_type = Town\n}}\n'''Kirkton''' is a town.",
         dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("Kirk Park", "{{Infobox stadium\n| location = [[Kirkton]]\n| opened = 1891\n}}\n"
         "'''Kirk Park''' is a football stadium in [[Kirkton]].", dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("Kirkton Rovers F.C.", "{{Infobox football club\n| founded = 1883\n"
         "| ground = [[Kirk Park]],<br />[[Kirkton]], Scotland\n}}\n"
         "'''Kirkton Rovers Football Club''' is a Scottish football club.", dt.datetime(2012, 1, 1, tzinfo=dt.UTC)),
    page("Jim Hall", "{{Infobox football biography\n| birth_date = {{birth date|1939|9|29}}\n"
         "| death_date = {{death date and age|2001|4|14|1939|9|29}}\n"
         "| years1 = 1957–1960 | clubs1 = [[Kirkton Rovers F.C.|Kirkton Rovers]]\n}}\n"
         "'''Jim Hall''' (1939 – 2001) was a Scottish footballer.", dt.datetime(2012, 3, 5, tzinfo=dt.UTC)),
]


def test_a_footballers_club_and_a_clubs_ground_fit_their_ranges():
    """DBpedia types a football club SoccerClub (under SportsClub) and a stadium Venue (under Building and
    ArchitecturalStructure), outside the ranges of team (SportsTeam) and ground (Place): the overlay counts a
    club as a team, and object_ranges.tsv has a ground be a structure, so that of "ground = [[Kirk Park]],
    [[Kirkton]]" the stadium is the ground and the town is not."""
    ontology = load_ontology()
    assert ontology.range_check("team", "SoccerClub") == "fits"
    assert ontology.range_check("ground", "Venue") == "fits"
    assert ontology.range_check("ground", "Town") == "violates"
    relations = extract_records(FOOTBALL_PAGES, ExtractConfig()).relations
    assert range_facts(relations, "Kirkton Rovers F.C.") == {("ground", "Kirk Park")}
    assert range_facts(relations, "Jim Hall") == {("team", "Kirkton Rovers F.C.")}


def test_what_a_dead_man_held_is_past_and_needs_no_as_of():
    """A footballer who died in 2001 played for his club: no end qualifier says so, but a mutable fact of a
    subject dead by the snapshot is over (past tense, no "As of"); the same page without the death date is
    asked as of its date, in the present."""
    extraction = extract_records(FOOTBALL_PAGES, ExtractConfig())
    infos = {e.title: EntityInfo(e.type, e.description, e.aliases) for e in extraction.entities}
    ctx = QuestionContext(graph=csr(extraction.entities, extraction.relations), as_of=SNAPSHOT,
                          config=QuestionConfig(describe_start=0.0), entities=infos)
    path = path_of(ctx, "Jim Hall", "Kirkton Rovers F.C.", "1883")
    plan = plan_question(ctx, path)
    assert 0 in plan.ended and plan.as_of_text is None
    text = write_template(ctx, path, plan).text
    assert "As of" not in text and ("Jim Hall played for" in text or "former team of Jim Hall" in text), text
    children = [*extraction.relations, fact("Jim Hall", "child", "3", "number")]
    ctx = QuestionContext(graph=csr(extraction.entities, children), as_of=SNAPSHOT,
                          config=QuestionConfig(describe_start=0.0), entities=infos)
    path = path_of(ctx, "Jim Hall", "Kirkton Rovers F.C.", "1883")
    assert 0 in plan_question(ctx, path).ended
    path = path_of(ctx, "Jim Hall", "3")  # a count, not a link to another entity: never "Who was the child"
    plan = plan_question(ctx, path)
    assert plan.ended == set() and "how many children does jim hall have" in write_template(ctx, path, plan).text.lower()
    alive = [r for r in extraction.relations if not (r.head == "Jim Hall" and r.relation == "deathDate")]
    ctx = QuestionContext(graph=csr(extraction.entities, alive), as_of=SNAPSHOT,
                          config=QuestionConfig(describe_start=0.0), entities=infos)
    plan = plan_question(ctx, path_of(ctx, "Jim Hall", "Kirkton Rovers F.C.", "1883"))
    assert plan.ended == set() and plan.as_of_text == "March 2012"


def test_the_range_tables_name_known_properties_and_classes():
    ontology = load_ontology()
    assert ontology.object_ranges
    for prop, (range_, excludes) in ontology.object_ranges.items():
        assert prop in ontology.properties, prop
        assert all(cls in ontology.classes for cls in (range_, *excludes) if cls), (prop, range_, excludes)
    named = [*ontology.range_role_classes, *ontology.range_superclasses,
             *(cls for extra in ontology.range_superclasses.values() for cls in extra)]
    assert named and all(cls in ontology.classes for cls in named), named


def test_the_beam_pipeline_range_checks_through_redirects_as_the_oracle_does(tmp_path):
    dump = tmp_path / "range-pages-articles.xml"
    dump.write_text(site_header() + "".join(page_xml(p) for p in RANGE_PAGES) + "</mediawiki>\n")
    config = ExtractConfig(dump=str(dump), output_shards=1)
    manifest = run_extract(config, tmp_path / "graph")
    relations = list(read_records(Relation, tmp_path / "graph" / "relations"))
    assert_range_checked(relations, manifest.counts)
    local = extract_records(RANGE_PAGES, config)
    assert sorted(map(fact_row, relations)) == sorted(map(fact_row, local.relations))
    assert {k: v for k, v in manifest.counts.items() if "range" in k} == {
        k: v for k, v in local.counts().items() if "range" in k}


def test_list_pages_and_plain_text_lists_are_no_single_value():
    hans = read(HANS)
    assert infobox_facts(hans, "child") == [] and hans.excluded["list_page"] == 1
    assert is_list_page("Spouses of the Prime Ministers of the United Kingdom")
    assert not is_list_page("United States of America") and not is_list_page("University of Oxford")
    assert infobox_facts(hans, "occupation") == [("civil servant", {}), ("politician", {})]
    (box,) = parse_infoboxes("{{Infobox company|hq_location=40th floor Samsung Building, 11, Seocho-daero}}")
    assert [f.value for f in box.facts] == ["40th floor Samsung Building, 11, Seocho-daero"]  # an address
    (box,) = parse_infoboxes("{{Infobox university|city=Austin, Texas}}")
    assert [f.value for f in box.facts] == ["Austin, Texas"]  # one place, and the title of its page
    (box,) = parse_infoboxes("{{Infobox band|current_members=Ann Fook – guitar, vocals}}")
    assert [f.value for f in box.facts] == ["Ann Fook – guitar, vocals"]  # a member and her roles
    (box,) = parse_infoboxes("{{Infobox settlement|demonym=Berliner, Berlinerin}}")  # a text property: one value
    assert [f.value for f in box.facts] == ["Berliner, Berlinerin"]


@pytest.mark.parametrize(("note", "qualifiers"), [
    ("1990-2010", [("start", "1990"), ("end", "2010")]),
    ("1924–1944", [("start", "1924"), ("end", "1944")]),
    ("until 2010", [("end", "2010")]),
    ("m. 1980; div. 1995", [("start", "1980"), ("end", "1995"), ("end_reason", "divorced")]),
    ("died 1944", [("end", "1944"), ("end_reason", "died")]),
    ("2005–present", [("start", "2005")]),
    ("1984–2019; his death", [("start", "1984"), ("end", "2019"), ("end_reason", "died")]),
    ("m. 3 May 1980", [("start", "1980-05-03")]),
    ("2010 est.", [("note", "2010 est.")]),
    ("BA", [("note", "BA")]),
    ("2010-1990", [("note", "2010-1990")]),  # a range running backwards is not read as one
    ("1990-2010, Bonn", [("note", "1990-2010, Bonn"), ("start", "1990"), ("end", "2010")]),
])
def test_parenthesised_dates_become_start_and_end(note, qualifiers):
    assert note_qualifiers(note) == qualifiers


def test_an_ended_marriage_is_qualified_from_either_notation():
    assert infobox_facts(read(HANS), "spouse") == [("Greta Vogel", {"start": "1990", "end": "2010"})]
    assert infobox_facts(read(GRETA), "spouse") == [
        ("Hans Vogel", {"start": "1990", "end": "2010", "end_reason": "divorced"})]
    (box,) = parse_infoboxes("{{Infobox person|spouse=[[Anna Roth]] (m. 1921; died 1944)}}")
    assert [(f.tail, f.qualifiers) for f in box.facts] == [
        ("Anna Roth", [("start", "1921"), ("end", "1944"), ("end_reason", "died")])]


def test_an_officeholder_infobox_is_no_occupation():
    assert read(HANS).entity.type == "Politician"  # the lead says politician
    assert read(GRETA).entity.type == "Person"  # a politician's wife with an officeholder box
    assert read(BISHOP).entity.type == "ChristianBishop"
    occupation = page("Otto Weber", "{{Infobox officeholder|occupation=[[Lawyer]]}}\n'''Otto Weber''' was born.",
                      dt.datetime(2011, 1, 1, tzinfo=dt.UTC))
    assert read(occupation).entity.type == "Lawyer"


def test_a_question_is_as_of_its_oldest_fact_and_an_ended_fact_is_past():
    """Hans (revised 2012) --spouse--> Greta (revised 2010) --birthPlace--> Aachen: the marriage ended in
    2010, before the question's as-of (Greta's page, May 2010), so it is stated in the past."""
    results = [read(HANS), read(GRETA)]
    entities = [r.entity for r in results]
    relations = [r for result in results for r in result.relations if r.source == "infobox"]
    ctx = QuestionContext(graph=csr(entities, relations), as_of=SNAPSHOT, config=QuestionConfig(describe_start=0.0),
                          entities={e.title: EntityInfo(e.type, e.description, e.aliases) for e in entities})
    path = path_of(ctx, "Hans Vogel", "Greta Vogel", "Aachen")
    assert question_as_of(path, SNAPSHOT) == dt.date(2010, 5, 2)
    plan = plan_question(ctx, path)
    assert plan.as_of == dt.date(2010, 5, 2) and plan.ended == {0}
    text = write_template(ctx, path, plan).text
    assert "former spouse of Hans Vogel" in text and "is married" not in text, text
    assert "As of" not in text, text  # an ended fact cannot change: no as-of is stated


def test_a_running_fact_is_asked_as_of_its_own_page_not_the_newest():
    """A marriage running on a 2012 page and a party membership running on a 2010 page: asked "As of May
    2010", the older of the two; an unchanging birth place on the 2010 page dates nothing."""
    hans = page("Hans Vogel", HANS.text.replace("(1990–2010)", "(m. 1990)"), HANS.timestamp)
    greta = page("Greta Vogel", GRETA.text.replace("|2010|end=div", ""), GRETA.timestamp)
    results = [read(hans), read(greta)]
    entities = [r.entity for r in results]
    relations = [r for result in results for r in result.relations if r.source == "infobox"]
    ctx = QuestionContext(graph=csr(entities, relations), as_of=SNAPSHOT, config=QuestionConfig(describe_start=0.0),
                          entities={e.title: EntityInfo(e.type, e.description, e.aliases) for e in entities})
    assert question_as_of(path_of(ctx, "Hans Vogel", "Greta Vogel", "Aachen"), SNAPSHOT) == dt.date(2012, 3, 5)
    path = path_of(ctx, "Hans Vogel", "Greta Vogel", "Social Democratic Party of Germany")
    plan = plan_question(ctx, path)
    assert plan.ended == set() and plan.as_of_text == "May 2010"
    assert write_template(ctx, path, plan).text.startswith("As of May 2010, ")


def test_the_run_summary_says_what_the_window_did_to_the_yield(tmp_path):
    dirs = stage_dirs(tmp_path / "out")
    as_of = dt.datetime(2017, 2, 1, tzinfo=dt.UTC)
    begin_stage("extract", dirs["extract"], {}).finish({"kept": 140, "head_entities": 10}, {}, as_of=as_of,
                                                         as_of_reason="the newest plausible revision in the input",
                                                         window_days=182)
    begin_stage("walk", dirs["walk"], {}).finish({"rejected:no_recent_fact": 321}, {})
    lines = window_lines(dirs)
    assert lines[0] == ("recency window: 10 of 140 entities (7%) revised within 182 days before the as-of 2017-02-01 "
                        "(the newest plausible revision in the input) can start a walk; 321 finished walks dropped "
                        "for no fact inside it")
    assert lines[1].startswith("warning: the window holds only 7% of the pages")
    begin_stage("extract", dirs["extract"], {}).finish({"kept": 140, "head_entities": 120}, {}, as_of=as_of,
                                                         as_of_reason="given by --as-of", window_days=182)
    assert len(window_lines(dirs)) == 1


def test_an_established_date_titled_as_another_event_is_no_founding_date():
    # Pasadena's infobox: "Incorporated June 19, 1886" is not when it was founded (the music cluster's reader
    # found "When was this city founded? -> 19 June 1886"); a "Founded" or untitled date still is.
    (box,) = parse_infoboxes("""{{Infobox settlement
| established_title = Incorporated
| established_date = June 19, 1886
| established_title1 = Founded
| established_date1 = 1874
| established_title2 = City status
| established_date2 = 1901
}}""")
    assert [(f.group_index, f.value) for f in box.facts if f.property == "foundingDate"] == [(1, "1874")]
    assert box.excluded["not_a_founding"] == 2
    (box,) = parse_infoboxes("{{Infobox settlement|established_date = 1837}}")
    assert [f.value for f in box.facts if f.property == "foundingDate"] == ["1837"]


def dates(result: ArticleResult, relation: str) -> list[str]:
    return [r.date.isoformat() for r in result.relations if r.relation == relation and r.date is not None]


# Marian Breland Bailey's real page holds, in a section on their work, her first husband's own infobox.
PSYCHOLOGIST = page("Marian Breland Bailey", """{{Infobox person
|name=Marian Breland Bailey
|birth_date={{Birth date|mf=yes|1920|12|2}}
|birth_place=[[Minneapolis]], [[Minnesota]], United States
|death_date={{Death date and age|mf=yes|2001|9|25|1920|12|2}}
}}
'''Marian Breland Bailey''' (December 2, 1920 – September 25, 2001) was an American psychologist.

== Work with Keller Breland ==
{{Infobox person
|name=Keller Breland
|birth_date={{Birth date|1915|3|26|mf=y}}
|birth_place=[[Poplarville, Mississippi]]
|death_date={{death date and age|1965|6|17|1915|3|26|mf=y}}}}
She married Keller Breland in 1941.
[[Category:1920 births]]
[[Category:2001 deaths]]""", dt.datetime(2021, 9, 25, tzinfo=dt.UTC))


def test_an_infobox_naming_another_entity_gives_none_of_its_facts_to_the_page():
    result = read(PSYCHOLOGIST)
    assert dates(result, "birthDate") == ["1920-12-02"] and dates(result, "deathDate") == ["2001-09-25"]
    assert [place for place, _ in infobox_facts(result, "birthPlace")] == ["Minneapolis"]
    assert result.excluded["other_subject"] == 3  # Keller Breland's birth date and place, death date
    # A later box of the same template named as the first ("Sir" aside) is the page's own, and so is a box of
    # another template that names the subject otherwise (an officeholder's military box).
    same = read(page("Keller Breland", PSYCHOLOGIST.text.replace("name=Marian Breland Bailey",
                                                                 "name=Sir Keller Breland"), PSYCHOLOGIST.timestamp))
    assert same.excluded["other_subject"] == 0 and len(dates(same, "birthDate")) == 2
    general = read(page("Dwight D. Eisenhower", """{{Infobox officeholder
| name = Dwight D. Eisenhower
| birth_place = [[Denison, Texas]]
}}
'''Dwight David Eisenhower''' was an American military officer and statesman.
{{Infobox military person
| name = Dwight David Eisenhower
| allegiance = [[United States]]
}}""", PSYCHOLOGIST.timestamp))
    assert general.excluded["other_subject"] == 0 and infobox_facts(general, "allegiance")


def test_a_works_box_on_a_non_works_page_gives_none_of_its_facts():
    # A band's page with one of its albums' boxes (no `name`): an Album (a Work) is not a MusicalArtist.
    band = page("Los Colorados", """{{Infobox musical artist
| name = Los Colorados
| genre = [[Polka]]
}}
'''Los Colorados''' is a Ukrainian polka band.
{{Infobox album
| released = June 1, 2012
| label = [[Motor Music]]
}}""", dt.datetime(2017, 9, 1, tzinfo=dt.UTC))
    result = read(band)
    assert infobox_facts(result, "recordLabel") == [] and dates(result, "releaseDate") == []
    assert result.excluded["other_subject"] == 2


SERIES = """{{Infobox television
| name = Adult Party Cartoon
| first_aired = {{Start date|2003|6|26}}
| last_aired = {{End date|2006|7|18}}
}}
'''''Adult Party Cartoon''''' is an American adult animated television series. It premiered on June 26, 2003,
and was removed from the network on July 24, after airing only three episodes.
"""


@pytest.mark.parametrize("categories, end", [
    ("[[Category:2003 American television series debuts]]\n[[Category:2003 American television series endings]]", []),
    ("[[Category:2003 American television series debuts]]\n[[Category:2006 American television series endings]]",
     ["2006-07-18"]),
    ("[[Category:2000s American adult animated television series]]", ["2006-07-18"]),  # a decade dates nothing
])
def test_a_date_its_own_pages_year_categories_contradict_is_left_out(categories, end):
    # The real page's `last_aired` is the DVD release of the unaired episodes; its categories end the run in 2003.
    result = read(page("Adult Party Cartoon", SERIES + categories, dt.datetime(2021, 11, 29, tzinfo=dt.UTC)))
    assert dates(result, "completionDate") == end
    assert result.excluded["category_year"] == (0 if end else 1)
    assert dates(result, "releaseDate") == ["2003-06-26"]  # the debut agrees with its category


SERIES_REVISED = dt.datetime(2021, 11, 29, tzinfo=dt.UTC)


def test_a_date_is_kept_where_a_category_or_the_lead_agrees_and_checked_in_the_pages_own_box_only():
    city = """{{Infobox settlement
| name = Toronto
| established_date = August 27, 1793
}}
'''Toronto''' is the capital city of Ontario.
[[Category:1834 establishments in Canada]]
[[Category:Populated places established in 1793]]"""
    assert dates(read(page("Toronto", city, SERIES_REVISED)), "foundingDate") == ["1793-08-27"]
    hidden = city.replace("[[Category:Populated places established in 1793]]", "")
    assert dates(read(page("Toronto", hidden, SERIES_REVISED)), "foundingDate") == []  # incorporation only
    commented = hidden.replace("[[Category:1834", "<!-- [[Category:1834").replace("Canada]]", "Canada]] -->")
    assert dates(read(page("Toronto", commented, SERIES_REVISED)), "foundingDate") == ["1793-08-27"]
    activist = """{{Infobox person
| name = Jodie Emery
| birth_date = January 4, 1985
}}
'''Jodie Emery''' (born January 4, 1985) is a Canadian cannabis activist.
[[Category:1975 births]]"""
    assert dates(read(page("Jodie Emery", activist, SERIES_REVISED)), "birthDate") == ["1985-01-04"]
    franchise = SERIES + """{{Infobox television
| first_aired = {{Start date|2008|7|30}}
}}
[[Category:2003 American television series debuts]]
[[Category:2003 American television series endings]]"""
    result = read(page("Adult Party Cartoon", franchise, SERIES_REVISED))
    assert dates(result, "releaseDate") == ["2003-06-26", "2008-07-30"]  # the later box is not checked
    assert dates(result, "completionDate") == []


def test_the_category_year_table_reads_real_category_names():
    from knowledge.category_years import dated_years, form_pattern, year_checks

    ontology = load_ontology()
    assert set(year_checks()) <= set(ontology.properties)  # the names stage 1 writes a mapped fact under
    assert dated_years("foundingDate", ["1989 establishments in Mexico", "1980s establishments in Mexico"]) == {1989}
    assert dated_years("foundingDate", ["Populated places established in 1793", "Places disestablished in 1800"]) == {1793}
    assert dated_years("releaseDate", ["2010 films", "2011 American drama films", "2010s films"]) == {2010, 2011}
    assert dated_years("completionDate", ["Buildings and structures completed in 1931"]) == {1931}
    assert dated_years("birthDate", ["Year of birth missing", "1920 deaths"]) == set()
    for bad in ("births", "{year} {year} births"):
        with pytest.raises(ValueError):
            form_pattern(bad)


def test_a_year_only_date_is_checked_by_its_year():
    company = """{{Infobox company
| name = Alsea
| founded = 1997
}}
'''Alsea''' is a Mexican restaurant operator.
[[Category:1989 establishments in Mexico]]"""
    result = read(page("Alsea", company, SERIES_REVISED))
    assert [r.value for r in result.relations if r.relation == "foundingDate"] == []
    assert result.excluded["category_year"] == 1
    agreeing = read(page("Alsea", company.replace("1989 establishments", "1997 establishments"), SERIES_REVISED))
    assert [r.value for r in agreeing.relations if r.relation == "foundingDate"] == ["1997"]


def test_a_lead_sentence_stating_the_year_beside_its_verb_keeps_the_date():
    company = """{{Infobox company
| name = IBM
| founded = {{Start date and age|1911|06|16}} (as Computing-Tabulating-Recording Company)
}}
'''IBM''' is an American technology company. The company began in 1911, founded in Endicott, New York.
[[Category:1888 establishments in New York (state)]]
[[Category:Technology_companies_established_in_1888]]"""
    assert dates(read(page("IBM", company, SERIES_REVISED)), "foundingDate") == ["1911-06-16"]
    reorganised = company.replace("The company began in 1911, founded in", "In 1911 the company moved to")
    assert dates(read(page("IBM", reorganised, SERIES_REVISED)), "foundingDate") == []  # no founding stated


def test_boxes_of_other_entities_on_a_page_whose_own_box_is_unmapped_or_of_another_kind():
    # A promotion's own box maps to no class; its championship's and channel's boxes name other subjects.
    promotion = page("Progress Wrestling", """{{Infobox wrestling promotion
| name = Progress Wrestling
}}
'''Progress Wrestling''' is a British professional wrestling promotion.
{{Infobox pro wrestling championship
| name = Progress Unified World Championship
| created = 2012
}}
{{Infobox television channel
| name = Demand Progress
| launch_date = {{Start date|2016|8|1}}
}}""", SERIES_REVISED)
    result = read(promotion)
    assert result.entity.type != "TelevisionStation" and not [r for r in result.relations if r.source == "infobox"]
    assert result.excluded["other_subject"] >= 2
    # A film's soundtrack album is another kind of work: its label and producer are not the film's.
    film = page("Kuch Kuch Hota Hai", """{{Infobox film
| name = Kuch Kuch Hota Hai
| released = {{Film date|1998|10|16}}
}}
'''Kuch Kuch Hota Hai''' is a 1998 Indian film.
{{Infobox album
| name = Kuch Kuch Hota Hai
| type = soundtrack
| label = [[Saregama]]
}}""", SERIES_REVISED)
    result = read(film)
    assert infobox_facts(result, "recordLabel") == [] and dates(result, "releaseDate") == ["1998-10-16"]


def test_a_second_box_of_the_same_template_by_its_names_words_and_artist():
    song = page("Hallelujah (Leonard Cohen song)", """{{Infobox song
| name = Hallelujah
| artist = [[Leonard Cohen]]
| released = December 1984
}}
'''"Hallelujah"''' is a song written by Canadian singer Leonard Cohen.
{{Infobox song
| name = Hallelujah
| artist = [[Jeff Buckley]]
| released = 1994
}}""", SERIES_REVISED)
    result = read(song)
    assert infobox_facts(result, "artist") == [("Leonard Cohen", {})] and result.excluded["other_subject"] == 2
    wrestler = page("Dwayne Johnson", """{{Infobox person
| name = Dwayne Johnson
| birth_place = [[Hayward, California]]
}}
'''Dwayne Douglas Johnson''' is an American actor.
{{Infobox person
| name = Dwayne "The Rock" Johnson
| spouse = [[Lauren Hashian]]
}}""", SERIES_REVISED)
    result = read(wrestler)
    assert result.excluded["other_subject"] == 0 and infobox_facts(result, "spouse")
