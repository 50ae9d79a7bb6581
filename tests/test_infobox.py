"""Infobox facts and the cheap wikitext scanner, on hand-written wikitext (no Beam, no dump)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from wikitext.infobox import is_skipped_parameter, normalize_parameter, parse_infoboxes
from wikitext.markup import (
    BrokenMarkup,
    infobox_spans,
    is_disambiguation,
    lead_sentences,
    normalize_title,
    parse_quantity,
    parse_text_date,
    redirect_target,
    title_namespace,
)

PERSON = """{{Short description|American politician}}
{{Infobox person
| name = Barack Obama <!-- a comment -->
| image = Obama portrait.jpg
| image_size = 220px
| caption = Official portrait, [[2012]]
| alt = A man in a suit
| signature = Obama signature.svg
| birth_date = {{birth date and age|1961|8|4}}
| death_date = {{death date and age|2099|4|21|1961|8|4}}
| birth_place = [[Kapiolani Medical Center|Kapiolani Medical Center for Women and Children]], [[Honolulu]], [[Hawaii]], U.S.
| spouse = {{marriage|[[Michelle Obama|Michelle Robinson]]|October 3, 1992}}
| spouse2 = {{marriage|Jane Doe|1980|1985|end=div.}}
| children = {{plainlist|
* [[Malia Obama|Malia]]
* Sasha<ref>{{cite web|url=http://example.org|title=Sasha}}</ref>
}}
| alma_mater = [[Occidental College]]<br>[[Columbia University]] ([[Bachelor of Arts|BA]])<br />[[Harvard Law School]]
| height = {{convert|1.87|m|ftin|abbr=on}}
| nationality = {{flag|United States}}
| population = 1,234,567 (2010 est.)
| demonym = Berliner (m), Berlinerin (f)
| founded = 1998
| awards = {{ubl|[[Nobel Peace Prize]]|Grammy Award}}
| genre = {{hlist|[[Memoir]]|[[Politics]]}}
| languages = {{flatlist|
* [[English language|English]]
* [[Indonesian language|Indonesian]]
}}
| area = 346 km
| released = {{film date|2010|7|16|[[Los Angeles]]|2010|7|22|US}}
| term_start = {{start date|2009}}
| module = {{Infobox officeholder | office = [[President of the United States|President]] | term_start = {{start date|2009|1|20}} }}
| 1 = positional value
| website = {{URL|barackobama.com}}
| empty =
}}
'''Barack Hussein Obama II''' ({{IPAc-en|b|ə|ˈ|r|ɑː|k}}; born {{birth date|1961|8|4}}) is an American politician who served as the 44th [[President of the United States|president of the United States]] from 2009 to 2017.<ref>A ref with [[Ignored Link]]</ref> He was born in [[Honolulu]], [[Hawaii]].

[[File:Obama.jpg|thumb|A picture with a [[Caption Link]]]]
Obama graduated from [[Columbia University]] in 1983.

== Early life ==
Body text with [[Body Link]].
"""


def facts_of(text: str) -> list[tuple]:
    boxes = parse_infoboxes(text[infobox_spans(text)[0].start :])
    return [
        (f.relation, f.group_index, f.value_type, f.tail or f.value, f.unit, tuple(f.qualifiers), f.infobox)
        for box in boxes
        for f in box.facts
    ]


@pytest.fixture(scope="module")
def facts():
    return facts_of(PERSON)


def relation(facts, name):
    return [(kind, value, unit, qualifiers) for rel, _, kind, value, unit, qualifiers, _ in facts if rel == name]


def test_entity_links_outside_parentheses_are_objects(facts):
    # A place written with its containers ("[[hospital]], [[Honolulu]], [[Hawaii]], U.S.") is its first link:
    # Honolulu and Hawaii contain the birth place, they are not more birth places.
    assert relation(facts, "birth_place") == [("entity", "Kapiolani Medical Center", None,
                                               (("within", "Honolulu"), ("within", "Hawaii")))]
    # The link inside parentheses is a qualifier, not an object.
    assert ("entity", "Columbia University", None, (("note", "BA"),)) in relation(facts, "alma_mater")
    assert [v for _, v, _, _ in relation(facts, "alma_mater")] == [
        "Occidental College", "Columbia University", "Harvard Law School"
    ]


def test_dates_from_templates(facts):
    assert relation(facts, "birth_date") == [("date", "1961-08-04", None, ())]
    assert relation(facts, "death_date") == [("date", "2099-04-21", None, ())]
    assert relation(facts, "term_start")[0] == ("date", "2009", None, ())  # partial date
    assert relation(facts, "released") == [
        ("date", "2010-07-16", None, (("location", "Los Angeles"),)),
        ("date", "2010-07-22", None, (("location", "US"),)),
    ]
    assert relation(facts, "founded") == [("date", "1998", None, ())]  # a bare year in a date-like parameter


def test_marriage_qualifiers_and_group_index(facts):
    spouses = [(g, kind, value, q) for rel, g, kind, value, _, q, _ in facts if rel == "spouse"]
    assert spouses == [
        (None, "entity", "Michelle Obama", (("start", "1992-10-03"),)),
        (2, "string", "Jane Doe", (("start", "1980"), ("end", "1985"), ("end_reason", "divorced"))),
    ]


def test_list_templates_split_into_items(facts):
    assert relation(facts, "children") == [("entity", "Malia Obama", None, ()), ("string", "Sasha", None, ())]
    assert [v for _, v, _, _ in relation(facts, "awards")] == ["Nobel Peace Prize", "Grammy Award"]
    assert [v for _, v, _, _ in relation(facts, "genre")] == ["Memoir", "Politics"]
    assert [v for _, v, _, _ in relation(facts, "languages")] == ["English language", "Indonesian language"]


def test_typed_literals(facts):
    assert relation(facts, "height") == [("quantity", "1.87", "m", ())]
    assert relation(facts, "area") == [("quantity", "346", "km", ())]
    assert relation(facts, "population") == [("number", "1234567", None, (("note", "2010 est."),))]
    assert relation(facts, "nationality") == [("entity", "United States", None, ())]
    assert relation(facts, "demonym") == [("string", "Berliner, Berlinerin", None, (("note", "m"), ("note", "f")))]


def test_plumbing_is_left_out_and_counted():
    """The page's own name, pictures and their sizes, captions, alt text and the website are plumbing: no
    fact, one count per parameter by reason."""
    box = parse_infoboxes(PERSON[infobox_spans(PERSON)[0].start :])[0]
    assert not {"name", "website", "image", "image_size"} & {f.relation for f in box.facts}
    assert box.excluded == {"names_page": 1, "image": 2, "image_size": 1, "caption": 2, "identifier": 1,
                            "place_container": 2}
    text = ("{{Infobox officeholder\n| order = 22nd\n| flag_s = Flag of Germany.svg\n| colour = #800020\n"
            "| party = [[Democratic Party (United States)|Democratic]]\n}}")
    box = parse_infoboxes(text)[0]
    assert [(f.relation, f.property, f.tail) for f in box.facts] == [
        ("party", "party", "Democratic Party (United States)")]
    assert box.excluded == {"ordinal": 1, "image": 1, "colour": 1}


def test_parameters_map_to_ontology_properties(facts):
    box = parse_infoboxes(PERSON[infobox_spans(PERSON)[0].start :])[0]
    assert box.cls == "Person"
    mapped = {(f.relation, f.property) for f in box.facts}
    assert {("birth_place", "birthPlace"), ("birth_date", "birthDate"), ("children", "child"),
            ("alma_mater", "almaMater"), ("spouse", "spouse"), ("awards", "award")} <= mapped
    assert ("area", None) in mapped  # Infobox person maps no area, and `area`'s domain is not a person's


def test_skipped_parameters_refs_and_positional(facts):
    names = {rel for rel, *_ in facts}
    assert not names & {"image", "image_size", "caption", "alt", "signature", "1", "empty", "module"}
    values = " ".join(str(v) for *_, v, _, _, _ in facts)
    assert "cite" not in values and "example.org" not in values and "comment" not in values


def test_nested_infobox_is_its_own_box(facts):
    nested = [f for f in facts if f[6] == "infobox officeholder"]
    assert [(f[0], f[3]) for f in nested] == [("office", "President of the United States"), ("term_start", "2009-01-20")]


def test_parameter_names():
    assert normalize_parameter("Spouse2") == ("spouse", 2)
    assert normalize_parameter(" birth date ") == ("birth_date", None)
    assert normalize_parameter("years3") == ("years", 3)
    assert normalize_parameter("clubs_12") == ("clubs", 12)
    assert normalize_parameter("area_total_km2") == ("area_total_km2", None)  # a unit, not a group index
    assert is_skipped_parameter("shield_size") and is_skipped_parameter("image_caption")
    assert not is_skipped_parameter("size") and not is_skipped_parameter("altitude")


def test_lead_sentences_links_and_description():
    sentences = lead_sentences(PERSON)
    assert sentences[0].text == (
        "Barack Hussein Obama II (born 4 August 1961) is an American politician who served as the 44th "
        "president of the United States from 2009 to 2017."
    )
    assert [link.target for link in sentences[0].links] == ["President of the United States"]
    assert [link.target for link in sentences[1].links] == ["Honolulu", "Hawaii"]
    targets = {link.target for s in sentences for link in s.links}
    assert "Columbia University" in targets
    assert not targets & {"Ignored Link", "Caption Link", "Body Link"}  # refs, files and the body are not lead


def test_broken_markup_is_detected():
    with pytest.raises(BrokenMarkup):
        infobox_spans("{{Infobox person\n| name = X\n| spouse = [[Y\n")
    with pytest.raises(BrokenMarkup):
        infobox_spans("{{Infobox person\n| name = [[X]]]]\n}}\nText.")
    # A brace inside a comment does not close the template.
    text = "{{Infobox film\n| name = A <!-- }} -->\n| director = [[B]]\n}}\nLead."
    assert infobox_spans(text)[0].end == text.index("\nLead")


def test_page_classification_helpers():
    assert redirect_target("#REDIRECT [[united_states#History]]") == "United states"
    assert redirect_target("#redirect: [[Paris]] {{R from move}}") == "Paris"
    assert redirect_target("Paris is a city.") is None
    assert is_disambiguation("Mercury", "'''Mercury''' may refer to:\n* ...\n{{disambiguation|geo}}")
    assert is_disambiguation("John Smith", "{{hndis|Smith, John}}")
    assert is_disambiguation("Mercury (disambiguation)", "")
    assert is_disambiguation("X", "{{Place name disambiguation}}")
    assert not is_disambiguation("Mercury (planet)", "{{Infobox planet}} Mercury is a planet.")
    assert normalize_title(" barack_Obama#Early life") == "Barack Obama"
    assert title_namespace("File:X.jpg") == "file" and title_namespace("fr:Paris") == "fr"
    assert title_namespace("Star Wars: A New Hope") is None


def test_written_dates_and_quantities():
    assert parse_text_date("August 4, 1961") == "1961-08-04"
    assert parse_text_date("4 Aug 1961") == "1961-08-04"
    assert parse_text_date("March 2003") == "2003-03"
    assert parse_text_date("31 February 2003") is None
    assert parse_quantity("1,234.5 km") == ("1234.5", "km")
    assert parse_quantity("1.2 million") == ("1200000", None)
    assert parse_quantity("Paris") is None


WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "wikisamples" / "wikitext"


@pytest.mark.skipif(not WIKITEXT.is_dir(), reason="../shared/wikisamples is absent")
def test_real_infoboxes_parse():
    """Every real page with an infobox in the shared samples yields typed facts from the scanner's spans."""
    with_facts = 0
    for path in sorted(WIKITEXT.glob("*/*")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            spans = infobox_spans(text)
        except BrokenMarkup:
            continue
        facts = [f for span in spans for box in parse_infoboxes(text[span.start : span.end]) for f in box.facts]
        with_facts += bool(facts)
        for fact in facts:
            assert fact.relation and not fact.relation.startswith(("image", "caption"))
            assert (fact.tail is None) != (fact.value is None)
            if fact.value_type == "date":
                assert fact.date is None or isinstance(fact.date, dt.date)
    assert with_facts >= 40
    freddie = (WIKITEXT / "infobox-parser" / "freddie-mercury.txt").read_text()
    facts = facts_of(freddie)
    assert ("birth_date", None, "date", "1946-09-05", None, (), "infobox person") in facts


def test_lead_templates_render_recursively_and_long_leads_cut_at_lines():
    text = "'''Islamabad''' ({{lang-ur|{{Nastaliq|x}} {{nowrap|[[Urdu]] name}}}}) is the [[capital city|capital]]."
    sentence = lead_sentences(text)[0]
    assert sentence.text == "Islamabad (Urdu name) is the capital."
    assert [link.target for link in sentence.links] == ["Urdu", "Capital city"]
    long_lead = "First line is whole.\n" + "More [[words]] here. " * 10
    assert [s.text for s in lead_sentences(long_lead, max_chars=40)] == ["First line is whole."]


def test_a_soft_line_break_does_not_end_the_lead_sentence():
    # An older page breaks a line inside its first sentence; a blank line or a list item ends a paragraph.
    text = ("'''Anton Reicha''' ([[February 26]],\n[[1770]] – [[May 28]], [[1836]]) was a [[Czech Republic|Czech]]"
            "-born [[France|French]] [[composer]].\n\nSecond paragraph.\n* a list item\nAfter the list.")
    assert [s.text for s in lead_sentences(text)] == [
        "Anton Reicha (February 26, 1770 – May 28, 1836) was a Czech-born French composer.",
        "Second paragraph.", "After the list."]


def test_a_place_chain_is_one_place_and_a_list_of_places_is_several():
    boxes = parse_infoboxes("""{{Infobox person
| birth_place = [[Wakefield]], [[West Yorkshire]], England
| death_place = [[Duluth, Minnesota|Duluth]], [[Minnesota]]
| residence = [[Cincinnati]], [[Ohio]] and [[Covington, Kentucky]]
| resting_place = [[Baltimore]]<br />[[Annapolis, Maryland|Annapolis]]
| spouse = [[Ann Lee]], [[Bo Lee]]
}}""")
    (box,) = boxes
    places = {(f.relation, f.tail) for f in box.facts}
    assert {tail for rel, tail in places if rel == "birth_place"} == {"Wakefield"}
    assert {tail for rel, tail in places if rel == "death_place"} == {"Duluth, Minnesota"}
    assert {tail for rel, tail in places if rel == "residence"} == {"Cincinnati", "Ohio", "Covington, Kentucky"}
    assert {tail for rel, tail in places if rel == "resting_place"} == {"Baltimore", "Annapolis, Maryland"}
    assert {tail for rel, tail in places if rel == "spouse"} == {"Ann Lee", "Bo Lee"}  # not a place: two people
    assert box.excluded["place_container"] == 2
