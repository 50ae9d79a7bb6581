"""The phrasebook (data/ontology/phrasebook.toml): every reviewed entry rendered in every template slot reads
without a known break; answers are written as a person writes them and still graded in both forms."""

from __future__ import annotations

import itertools

import pytest

from knowledge.phrasebook import PHRASEBOOK, WORK_PHRASEBOOK, answer_breaks, breaks, scan_question
from synth import describe
from synth.matching import match_answer
from synth.phrasing import answer_form, display_title, relation_phrase
from synth.question_gates import answer_aliases, path_gate, written_answer
from synth.question_plan import plan_question
from synth.question_writers import _clue_sentence, _past, final_frames, write_template
from tests.test_questions import context, path_of
from tests.walk_graphs import entity, fact

# Subjects and objects as the writer passes them: a title needing "the", a disambiguated title, a
# demonstrative, the latter, a description.
SUBJECTS = [display_title("United Kingdom"), display_title("Congress of Deputies (Spain)"), "this politician",
            "the latter person", "a German politician born in the 1950s"]
OBJECTS = [display_title("United States"), display_title("King Kong (2005 film)"), "a city in Ireland"]
KNOWN_BREAKS = ["He lives in the the United Kingdom.", "How many childs does X have?",
                "What is the merged with of a political party?", "What is the start of this politician?",
                "What is the child of Angela Merkel?", "X is located in a place.", "X is married to an entity.",
                "X sits in the Congress of Deputies (Spain).", "What is the term_start of X?"]


def rendered(name: str, entry, work: bool) -> list[str]:
    """Every text the writers make of one entry: clauses both ways in both tenses, the nested and plural
    noun phrases, the final question frames for each answer class and tense, the count frame, the
    description's modifiers and predicates, the writer's clue sentences."""
    texts = []
    for subject, obj in itertools.product(SUBJECTS, OBJECTS):
        for past, inverse in itertools.product((False, True), repeat=2):
            texts.append(entry.clause(subject, obj, past=past, inverse=inverse))
        texts += [f"Name {entry.of(subject)}.", f"Name {entry.of(subject, several=True)}.",
                  f"Name the former {entry.noun} of {subject}."]
        for ended, several in itertools.product((False, True), repeat=2):
            texts.append(_clue_sentence(name, subject, obj, ended, work, several))
            texts += describe.relation_clauses(entry, obj, "its", ended, several)
        person = entry.answer == "person"
        for answer_type, answer_noun, ended in itertools.product(
                ("entity", "date", "number", "string"), (None, "city"), (False, True)):
            for frame in final_frames(entry, answer_type, person, None if person else answer_noun, ended):
                texts.append(frame.format(n=entry.noun, s=subject))
        if entry.count_ask:
            texts.append(entry.count_ask.format(s=subject))
    return texts


@pytest.mark.parametrize("name", sorted(PHRASEBOOK))
def test_every_entry_in_every_slot_reads_without_a_known_break(name):
    for work, table in ((False, PHRASEBOOK), (True, WORK_PHRASEBOOK)):
        if name in table:
            for text in rendered(name, table[name], work):
                assert breaks(text) == [], (name, text, breaks(text))


def test_the_scanner_finds_each_known_break():
    for text in KNOWN_BREAKS:
        assert breaks(text), text
    assert breaks("As of March 2012, who was the spouse of the 2005 film King Kong's director?") == []
    assert [n for n, _ in answer_breaks("The Shining (novel)")] == ["disambiguator"]
    assert [n for n, _ in answer_breaks("81799600", "number")] == ["ungrouped_number"]
    assert [n for n, _ in answer_breaks("civil servant, politician", "string")] == ["list_value"]
    assert answer_breaks("Washington, D.C.") == [] and answer_breaks("81,799,600 km²", "number") == []
    assert scan_question("What is the child of X?", "X (novel)") == ["person_asked_with_what", "answer:disambiguator"]


def test_the_latter_is_the_object_by_construction():
    """Every clause names its subject first and its object last, so "the latter <noun>" in the next sentence
    is the entity the clause introduced ("X was succeeded in office by Y", never "Y succeeded X")."""
    for entry in [*PHRASEBOOK.values(), *WORK_PHRASEBOOK.values()]:
        for clause in (entry.forward, entry.forward_past):
            assert clause.index("{s}") < clause.index("{o}"), clause
    ctx = context([entity("Old Premier", "Politician"), entity("New Premier", "Politician", head=False)],
                  [fact("Old Premier", "successor", "New Premier"), fact("New Premier", "birthDate", "1950-02-03", "date"),
                   fact("Old Premier", "birthDate", "1920-01-01", "date")], describe_start=1.0)
    path = path_of(ctx, "Old Premier", "New Premier", "1950-02-03")
    text = write_template(ctx, path, plan_question(ctx, path, style="clues")).text
    assert "was succeeded in office by a" in text and "succeeded a" not in text.replace("succeeded in office by a", ""), text


def test_a_bare_vague_intermediate_is_named_through_its_relation():
    ctx = context([entity("Some College", "University"), entity("Hilltown", "Place", head=False)],
                  [fact("Some College", "location", "Hilltown"), fact("Hilltown", "elevation", "120", "number")])
    path = path_of(ctx, "Some College", "Hilltown", "120")
    text = write_template(ctx, path, plan_question(ctx, path, style="clues")).text
    assert "a place" not in text and "the location of Some College" in text, text


def test_a_bare_intermediate_a_noun_hop_names_is_folded_into_its_relation():
    """The fourth reading: "The home ground of this football club is a venue." says nothing the hop does not;
    "When did the home ground of this football club open?" does the same work. A verb hop keeps its sentence."""
    ctx = context([entity("Town Rovers F.C.", "SoccerClub"), entity("Rover Park", "Stadium", head=False),
                   entity("Ann Lee", "Scientist"), entity("Hill University", "University", head=False)],
                  [fact("Town Rovers F.C.", "ground", "Rover Park"), fact("Rover Park", "openingDate", "1898", "date"),
                   fact("Ann Lee", "almaMater", "Hill University"), fact("Hill University", "foundingDate", "1850", "date")])
    ground = path_of(ctx, "Town Rovers F.C.", "Rover Park", "1898")
    text = write_template(ctx, ground, plan_question(ctx, ground, style="clues")).text
    assert "the home ground of Town Rovers F.C." in text and " is a " not in text, text
    studied = path_of(ctx, "Ann Lee", "Hill University", "1850")
    text = write_template(ctx, studied, plan_question(ctx, studied, style="clues")).text
    assert "studied at a university" in text, text


def test_no_final_question_says_name_the_x_of():
    """Readers found "Name the award of this novel" and "Name the mother of this royal" stilted (a reviewed
    `ask` of the phrasebook may still say "Name the office {s} holds.")."""
    for name, entry in PHRASEBOOK.items():
        for answer_type, person, ended in itertools.product(("entity", "date", "number", "string"), (False, True),
                                                            (False, True)):
            frames = final_frames(entry, answer_type, person, "city", ended)
            assert not [f for f in frames if f.startswith("Name the {n} of")], name


def test_historical_states_and_x_of_y_institutions_take_the_article_mid_sentence():
    """A birthplace's country of 1900 reads "born in the German Empire", not "born in German Empire"; an
    "X University of Y" takes "the" too, a state named by its disambiguator reads "the state of New York"; a
    plain country, town or "X University" name stays bare."""
    assert display_title("German Empire") == "the German Empire"
    assert display_title("Soviet Union") == "the Soviet Union"
    assert display_title("Duchy of Holstein") == "the Duchy of Holstein"
    assert display_title("Province of Westphalia") == "the Province of Westphalia"
    assert display_title("Humboldt University of Berlin") == "the Humboldt University of Berlin"
    assert display_title("Courant Institute of Mathematical Sciences") == "the Courant Institute of Mathematical Sciences"
    assert display_title("National Gallery of Canada") == "the National Gallery of Canada"
    assert display_title("Ising model") == "the Ising model"
    assert display_title("Riemann hypothesis") == "the Riemann hypothesis"
    assert display_title("Hilbert space") == "Hilbert space"
    assert display_title("Natural History Museum of Oslo") == "the Natural History Museum of Oslo"
    assert display_title("Germany") == "Germany"
    assert display_title("Oranienburg") == "Oranienburg"
    assert display_title("Bradley University") == "Bradley University"
    assert display_title("New York (state)") == "the state of New York"
    assert display_title("Georgia (U.S. state)") == "the U.S. state of Georgia"
    assert display_title("King Kong (2005 film)") == "the 2005 film King Kong"
    # the fourth reading: "whose former managerial club is England national football team"
    assert display_title("England national football team") == "the England national football team"


def test_a_record_label_released_an_album_and_a_band_has_recorded_for_it():
    """An album's `label` is the label that released it; a band's lists every label it ever
    recorded for, undated, so never "is signed to"."""
    ctx = context([entity("Some Album", "Album"), entity("Some Band", "Band"),
                   entity("Some Label", "RecordLabel", head=False)],
                  [fact("Some Album", "recordLabel", "Some Label"), fact("Some Band", "recordLabel", "Some Label"),
                   fact("Some Label", "foundingDate", "1993", "date")])
    album = write_template(ctx, path := path_of(ctx, "Some Album", "Some Label", "1993"),
                           plan_question(ctx, path, style="clues")).text
    assert "Some Album was released by a company." in album and "record label of" not in album, album
    band = write_template(ctx, path := path_of(ctx, "Some Band", "Some Label", "1993"),
                          plan_question(ctx, path, style="clues")).text
    assert "Some Band has recorded for a company." in band and "is signed to" not in band, band


def test_answers_are_written_as_a_person_writes_them_and_graded_in_both_forms():
    assert answer_form("The Shining (novel)", "entity", "notableWork") == "The Shining"
    assert answer_form("Independent (politician)", "entity", "party") == "Independent"
    assert answer_form("German language", "entity", "officialLanguage") == "German"
    assert answer_form("German language", "entity", "spouse") == "German language"  # only where the entry says so
    assert answer_form("81799600", "number", "populationTotal") == "81,799,600"
    assert answer_form("357022", "number", "areaTotal", "km2") == "357,022 km²"
    assert answer_form("2780400 km2", "quantity", "areaTotal") == "2,780,400 km²"
    assert answer_form("14.4 per km2", "quantity", "populationDensity") == "14.4 per km²"
    assert answer_form("1.57", "number", "percentageOfAreaWater") == "1.57%"  # the entry's unit
    assert answer_form("1969-09-03", "date", "birthDate") == "3 September 1969"
    ctx = context([entity("Writer", "Writer"), entity("The Shining (novel)", "Book", head=False),
                   entity("Germany", "Country", head=False)],
                  [fact("Writer", "notableWork", "The Shining (novel)"), fact("The Shining (novel)", "country", "Germany"),
                   fact("Germany", "populationTotal", "81799600", "number")])
    for titles, written in ((("Writer", "The Shining (novel)"), "The Shining"),
                            (("The Shining (novel)", "Germany", "81799600"), "81,799,600")):
        path = path_of(ctx, *titles)
        aliases = answer_aliases(ctx, path)
        assert written_answer(ctx, path) == written and path.answer in aliases
        for reply in (written, path.answer):
            assert match_answer(reply, written, aliases).correct, reply


def test_unreviewed_relations_and_list_answers_are_counted_skips():
    ctx = context([entity("Party A", "PoliticalParty"), entity("Party B", "PoliticalParty", head=False),
                   entity("Official", "Politician")],
                  [fact("Party A", "mergedWith", "Party B"), fact("Party B", "foundingDate", "1990", "date"),
                   fact("Official", "party", "Party B"), fact("Party B", "leader", "Official"),
                   fact("Official", "occupation", "civil servant, politician", "string")])
    assert path_gate(ctx, path_of(ctx, "Party A", "Party B", "1990"))[0] == "unreviewed_relation"
    assert path_gate(ctx, path_of(ctx, "Party B", "Official", "civil servant, politician"))[0] == "list_answer"


def test_the_searcher_phrase_names_relations_as_questions_do():
    assert relation_phrase("child", "Angela Merkel") == "the child of Angela Merkel"
    assert relation_phrase("child", "United Kingdom", several=True) == "one of the children of the United Kingdom"
    assert relation_phrase("birthPlace", "King Kong (2005 film)") == "the birthplace of the 2005 film King Kong"
    assert display_title("Cork (city)") == "the city of Cork"  # a place's kind reads "the city of", not "the city Cork"
    assert _past("Who is the spouse of {s}?") == "Who was the spouse of {s}?"
