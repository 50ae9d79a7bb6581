"""Question writing and gates on crafted graphs: alternative answers, leaks, hops, phrasing, aliases, dedup."""

from __future__ import annotations

import datetime as dt
import random
import re

import pytest

from graph.walk_records import to_path
from graph.walk_stage import run_walks
from ground.io import read_records
from schemas.config import QuestionConfig, WalkConfig
from schemas.questions import Path, Question
from schemas.wiki import SkippedRecord
from synth import describe, gates, text_gates
from synth.phrasing import (
    CONSONANT_SOUND,
    as_common_noun,
    date_periods,
    date_variants,
    number_variants,
    period_years,
    phrase,
    type_noun,
)
from synth.question_gates import answer_aliases, structural_gate, written_answer
from synth.question_plan import EntityInfo, QuestionContext, plan_question
from synth.question_writers import write_template
from synth.questions import containers_from, deduplicate, run_questions
from tests.walk_graphs import AS_OF, OLD, csr, entity, fact, write_graph

MERKEL = [
    entity("Angela Merkel", "Politician"),
    entity("Joachim Sauer", "Scientist", head=False),
    entity("Hosena", "Village", head=False, aliases=["Hosena, Brandenburg"]),
    entity("Humboldt University of Berlin", "University", head=False, aliases=["HU Berlin"]),
]
MERKEL_FACTS = [
    fact("Angela Merkel", "spouse", "Joachim Sauer", qualifiers={"start": "1998-12-30"}),
    fact("Joachim Sauer", "birthPlace", "Hosena"),
    fact("Joachim Sauer", "birthDate", "1949-04-19", "date", when=OLD),
    fact("Hosena", "populationTotal", "1200", "number"),
    fact("Joachim Sauer", "almaMater", "Humboldt University of Berlin"),
    fact("Humboldt University of Berlin", "foundingDate", "1809", "date"),
    fact("Humboldt University of Berlin", "city", "Berlin"),
    fact("Angela Merkel", "birthPlace", "Hamburg"),
]


def context(entities, relations, **config) -> QuestionContext:
    """A question context over a crafted graph; the start entity is named unless `describe_start` is given, and
    no path is dropped for fame unless `famous_keep` is given (a crafted graph has no long tail)."""
    graph = csr(entities, relations)
    infos = {e.title: EntityInfo(e.type, e.description, e.aliases) for e in entities}
    containers = containers_from((r.tail, [q.model_dump() for q in r.qualifiers]) for r in relations)
    return QuestionContext(graph=graph, entities=infos, as_of=AS_OF, containers=containers,
                           config=QuestionConfig(**{"describe_start": 0.0, "famous_keep": 1.0, **config}))


def path_of(ctx: QuestionContext, *titles: str) -> Path:
    """The Path through the given node labels (each consecutive pair joined by its unique edge)."""
    graph = ctx.graph
    nodes, edges = [], []
    for head, tail in zip(titles, titles[1:], strict=False):
        node = graph.node_id(head)
        edge = next(e for e in range(graph.indptr[node], graph.indptr[node + 1]) if graph.label(graph.dst[e]) == tail)
        nodes.append(node)
        edges.append(edge)
    nodes.append(int(graph.dst[edges[-1]]))
    return to_path(graph, nodes, edges, seed=0, conditions=[])


def family(distinct_birth_years: bool, same_birthplace: bool = False):
    entities = [entity("Ann Parent"), entity("Bea Child", head=False), entity("Cal Child", head=False)]
    relations = [
        fact("Ann Parent", "child", "Bea Child"),
        fact("Ann Parent", "child", "Cal Child"),
        fact("Bea Child", "birthPlace", "Avon"),
        fact("Cal Child", "birthPlace", "Avon" if same_birthplace else "Bath"),
        fact("Bea Child", "birthDate", "1951-02-03", "date"),
        fact("Cal Child", "birthDate", "1990-06-07" if distinct_birth_years else "1951-09-09", "date"),
    ]
    return entities, relations


def test_alternative_answer_gate_rejects_an_ambiguous_chain_and_keeps_a_unique_one():
    # "Where was the child of Ann Parent, a person born in the 1950s, born?": two children, one per decade.
    ctx = context(*family(distinct_birth_years=True))
    path = path_of(ctx, "Ann Parent", "Bea Child", "Avon")
    by_type = [gates.Clue(position=1, type_noun="person")]
    assert "2 objects of child" in gates.alternative_answer(ctx.facts, path, by_type)
    with_decade = [gates.Clue(position=1, type_noun="person", attribute="birthDate", years=(1950, 1959))]
    assert gates.alternative_answer(ctx.facts, path, with_decade) is None
    # Both children born in the same decade: the date clue no longer separates them.
    ctx = context(*family(distinct_birth_years=False))
    assert gates.alternative_answer(ctx.facts, path_of(ctx, "Ann Parent", "Bea Child", "Avon"), with_decade)
    # Both born in the same town: one answer, but the hop to "a child" still names two people: rejected.
    ctx = context(*family(distinct_birth_years=False, same_birthplace=True))
    path = path_of(ctx, "Ann Parent", "Bea Child", "Avon")
    assert gates.unique_chain(ctx.facts, path, by_type, start_described=False)[0] == "multi_valued_hop"


def test_alternative_answer_gate_through_the_stage(tmp_path):
    entities, relations = family(distinct_birth_years=False, same_birthplace=True)
    graph_dir = write_graph(tmp_path / "graph", entities, relations)
    run_walks(graph_dir, tmp_path / "paths", WalkConfig(hops=[2], walks_per_start=20, hub_quantile=1.0))
    config = QuestionConfig(describe_start=0.0, reject_dominant_answer=False)  # both children: Avon, 1950s
    manifest = run_questions(graph_dir, tmp_path / "paths", tmp_path / "q", config, cache_dir=None)
    skipped = list(read_records(SkippedRecord, tmp_path / "q" / "skipped"))
    # Every path goes through "a child of Ann Parent born in the 1950s": nothing tells the two children apart.
    assert manifest.counts["questions:kept"] == 0
    assert {s.reason for s in skipped} == {"multi_valued_hop"}
    assert manifest.counts["rejected:multi_valued_hop"] == len(skipped) == manifest.counts["paths:read"] >= 2


def test_fewer_hops_gate():
    ctx = context(MERKEL, [*MERKEL_FACTS, fact("Angela Merkel", "residence", "Hosena")])
    path = path_of(ctx, "Angela Merkel", "Joachim Sauer", "Hosena")
    assert structural_gate(ctx, path, plan_question(ctx, path))[0] == "fewer_hops"
    ctx = context(MERKEL, MERKEL_FACTS)
    assert structural_gate(ctx, path_of(ctx, "Angela Merkel", "Joachim Sauer", "Hosena"), plan_question(ctx, path)) is None


def test_an_answer_the_question_suggests_is_vague():
    # "A Jesuit university's religion", "a publisher's industry": the phrasebook marks such relations guessable.
    entities = [entity("Lea Vance", "Person"), entity("Hill College", "University", head=False)]
    facts = [fact("Lea Vance", "almaMater", "Hill College"), fact("Hill College", "religion", "Catholic Church"),
             fact("Hill College", "city", "Avon")]
    ctx = context(entities, facts)
    assert phrase("religion").guessable and not phrase("city").guessable  # data/ontology/phrasebook.toml
    gate, why = structural_gate(ctx, path_of(ctx, "Lea Vance", "Hill College", "Catholic Church"),
                                plan_question(ctx, path_of(ctx, "Lea Vance", "Hill College", "Catholic Church")))
    assert gate == "vague_answer" and "religion" in why
    path = path_of(ctx, "Lea Vance", "Hill College", "Avon")
    assert structural_gate(ctx, path, plan_question(ctx, path)) is None


def test_leak_gates():
    assert text_gates.answer_leak("Where was the spouse of X born, near Hosena?", "Hosena", []) == "Hosena"
    assert text_gates.answer_leak("Which university did HU Berlin's rival...?", "Humboldt University of Berlin", ["HU Berlin"])
    assert text_gates.answer_leak("Who founded Hosenaville?", "Hosena", []) is None  # token boundaries
    evidence = ["Sauer was born in Hosena, a village near Senftenberg in the Lusatia region of Brandenburg."]
    leaky = "Which village near Senftenberg in the Lusatia region of Brandenburg was the spouse born in?"
    assert text_gates.evidence_leak(leaky, evidence, 8)
    assert text_gates.evidence_leak("Where was the spouse of Angela Merkel born?", evidence, 8) is None
    assert text_gates.intermediate_leak("Where was Joachim Sauer born?", ["Joachim Sauer"]) == "Joachim Sauer"
    assert text_gates.intermediate_leak("Where was Paris born?", ["Paris (band)"]) == "Paris (band)"


# "a" before a vowel unless it sounds a consonant ("a university", "a Ukrainian": phrasing's own list).
ARTICLE_ERRORS = re.compile(rf"\b(a (?!(?i:{'|'.join(CONSONANT_SOUND)}))[aeiouAEIOU]\w+|an [b-df-hj-np-tv-zB-DF-HJ-NP-TV-Z]\w+)")


def assert_reads_as_english(text: str) -> None:
    assert text[0].isupper() and text[-1] in "?.", text
    assert "  " not in text and " ," not in text and ",?" not in text and " ?" not in text, text
    assert not ARTICLE_ERRORS.search(text), text
    words = text.lower().split()
    assert all(a != b or len(a) <= 2 for a, b in zip(words, words[1:], strict=False)), text  # "J. R. R."
    assert "_" not in text and "{" not in text, text
    # readers found "Name the mother of this royal" stilted, and "Name the spouse of this person who was born in X"
    # ambiguous (the clause reads as the person's); a phrasebook `ask` may still say "Name the office X holds."
    assert not re.search(r"\bName the [\w -]+ of ", text), text


def test_template_questions_read_well_and_obfuscate_intermediates():
    ctx = context(MERKEL, MERKEL_FACTS)
    chains = [
        ("Angela Merkel", "Joachim Sauer", "Hosena"),
        ("Angela Merkel", "Joachim Sauer", "1949-04-19"),
        ("Angela Merkel", "Joachim Sauer", "Hosena", "1200"),
        ("Angela Merkel", "Joachim Sauer", "Humboldt University of Berlin", "Berlin"),
    ]
    styles = set()
    for titles in chains:
        path = path_of(ctx, *titles)
        for style in ("nested", "clues"):
            draft = write_template(ctx, path, plan_question(ctx, path, style))
            assert_reads_as_english(draft.text)
            assert text_gates.intermediate_leak(draft.text, path.nodes[1:-1]) is None
            assert text_gates.answer_leak(draft.text, path.answer, answer_aliases(ctx, path)) is None
            assert "Angela Merkel" in draft.text
            assert draft.text.startswith("As of March 2026, ")  # a spouse can change
            styles.update(o for o in draft.obfuscations if o.startswith("style:"))
    assert styles == {"style:nested", "style:clues"}
    path = path_of(ctx, "Angela Merkel", "Joachim Sauer", "Humboldt University of Berlin", "Berlin")
    draft = write_template(ctx, path, plan_question(ctx, path, "clues"))
    assert "a scientist born in" in draft.text and "a university founded in" in draft.text
    assert any(o.startswith("date:1949-04-19->") for o in draft.obfuscations)
    assert "1949" not in draft.text


def test_as_of_only_when_a_fact_can_change():
    entities = [entity("Dora Writer", "Infobox writer"), entity("Ely Town", "Infobox settlement", head=False)]
    ctx = context(entities, [fact("Dora Writer", "birthPlace", "Ely Town"), fact("Ely Town", "country", "Ruritania")])
    path = path_of(ctx, "Dora Writer", "Ely Town", "Ruritania")
    draft = write_template(ctx, path, plan_question(ctx, path))
    assert not draft.text.startswith("As of") and "as_of" not in " ".join(draft.obfuscations)
    assert_reads_as_english(draft.text)


def test_surface_forms_vary_with_the_seed():
    texts = set()
    for seed in range(12):
        ctx = context(MERKEL, MERKEL_FACTS, seed=seed)
        path = path_of(ctx, "Angela Merkel", "Joachim Sauer", "Hosena")
        texts.add(write_template(ctx, path, plan_question(ctx, path)).text)
    assert len(texts) >= 4


def test_date_fuzzing_and_literal_aliases():
    # Each period with the years a reader takes it to mean (data/questions/date_periods.toml).
    assert date_periods(1993)[:2] == [("the early 1990s", (1990, 1993)), ("the 1990s", (1990, 1999))]
    assert date_periods(1995)[:2] == [("the mid-1990s", (1994, 1996)), ("the 1990s", (1990, 1999))]
    assert date_periods(1998)[:2] == [("the late 1990s", (1997, 1999)), ("the 1990s", (1990, 1999))]
    # Parts of a century are read wider than said: "the late 20th century" fits 1969 as well as 1983 to a
    # reader, so it does not tell them apart; "the mid-20th century" reaches into the 1970s.
    assert date_periods(1983)[-1] == ("the late 20th century", (1960, 2000))
    assert date_periods(1969)[-1] == ("the mid-20th century", (1930, 1975))
    assert date_periods(2000)[-1] == ("the early 21st century", (2000, 2045))  # 2000 as a reader counts it
    # "The 1900s" and "the early 1200s" read as centuries: a century's first decade has its own words.
    assert date_periods(1209) == [("the first decade of the 13th century", (1200, 1210)),
                                  ("the early 13th century", (1200, 1245))]
    assert date_periods(1900)[0] == ("the first decade of the 20th century", (1900, 1910))
    assert date_periods(2002)[:2] == [("the early 2000s", (2000, 2003)), ("the 2000s", (2000, 2009))]
    assert date_periods(45) == []  # "the 40s" would read as the 1940s
    for year in (1209, 1900, 1969, 1983, 2004):
        for label, span in date_periods(year):
            assert span[0] <= year <= span[1] and period_years(label) == span
    assert date_variants("1990-05-12") == ["1990-05-12", "12 May 1990", "May 12, 1990"]
    assert date_variants("1990-05") == ["1990-05", "May 1990"]
    assert number_variants("8848", "m") == ["8848 m", "8,848 m", "8848", "8,848"]
    ctx = context(MERKEL, MERKEL_FACTS)
    assert answer_aliases(ctx, path_of(ctx, "Angela Merkel", "Joachim Sauer", "Hosena")) == ["Hosena, Brandenburg"]
    # A date is answered as the pages write it; its ISO value and other spellings stay accepted aliases.
    born = path_of(ctx, "Angela Merkel", "Joachim Sauer", "1949-04-19")
    assert written_answer(ctx, born) == "19 April 1949"
    assert answer_aliases(ctx, born) == ["1949-04-19", "April 19, 1949"]


def test_descriptions_join_phrases_and_relative_clauses_as_english():
    def attribute(kind, modifier):
        return describe.Attribute("r", kind, modifier, "", gates.Clue(position=0))
    released, in_us = attribute("date", "released in the 2020s"), attribute("place", "in the United States")
    directed, starring = attribute("relation", "whose director is Ida Orbit"), attribute("relation", "whose lead actors include Al Bo")
    died = attribute("date", "who died in the 2000s")
    assert describe.described("film", [released, directed]) == "a film released in the 2020s whose director is Ida Orbit"
    assert describe.described("film", [directed, starring]) == \
        "a film whose director is Ida Orbit and whose lead actors include Al Bo"
    assert describe.described("company", [released, in_us]) == "a company in the United States released in the 2020s"
    assert describe.described("author", [died, directed]) == "an author who died in the 2000s and whose director is Ida Orbit"
    # A place the noun already names by its adjective is not stated again (data/questions/attributes.toml).
    us = describe.Attribute("country", "place", "from the United States", "", gates.Clue(position=0, object="United States"))
    assert describe.restates("American thriller film", us) and not describe.restates("thriller film", us)
    born, born_in = attribute("date", "born in the 1940s"), attribute("place", "born in Chicago")
    died_in = attribute("place", "who died in Los Angeles")
    assert describe.described("author", [born, born_in]) == "an author born in Chicago in the 1940s"
    assert describe.described("author", [died, died_in, directed]) == \
        "an author who died in Los Angeles in the 2000s and whose director is Ida Orbit"


def test_common_noun_objects_read_in_lower_case_and_a_second_person_is_the_latter():
    assert phrase("occupation").common_objects and not phrase("spouse").common_objects  # data/ontology/phrasebook.toml
    # the fourth reading: "a university whose campus setting is Urban" (an infobox literal, capitalised)
    assert phrase("campus").common_objects and as_common_noun("Urban") == "urban"
    assert as_common_noun("Film director") == "film director" and as_common_noun("CEO") == "CEO"
    entities = [entity("Cy Nolan", "Person", description=""), entity("Jo Nolan", "Person", head=False),
                entity("Zed Nolan", "Person", head=False), entity("Ann Bay", "Person", head=False)]
    facts = [fact("Cy Nolan", "spouse", "Jo Nolan"), fact("Cy Nolan", "occupation", "Filmmaker"),
             fact("Ann Bay", "occupation", "Filmmaker"), fact("Cy Nolan", "birthDate", "1970-07-30", "date"),
             fact("Zed Nolan", "birthDate", "1991-01-01", "date"), fact("Zed Nolan", "occupation", "Actor"),
             fact("Ann Bay", "birthDate", "1931-01-01", "date"), fact("Jo Nolan", "birthPlace", "Avon"),
             fact("Jo Nolan", "education", "Georgetown University")]
    # An occupation is no anchor, and a selection that rules no one out (Zed the actor may direct too; his
    # birth date rules him out): with
    # three attributes asked for, the planner states it beside the date.
    ctx = context(entities, facts, describe_start=1.0, require_named_anchor=False, start_attributes=3)
    path = path_of(ctx, "Cy Nolan", "Jo Nolan", "Georgetown University")
    plan = plan_question(ctx, path, "clues")
    text = write_template(ctx, path, plan).text
    assert_reads_as_english(text)
    assert structural_gate(ctx, path, plan) is None
    wordings = ("whose occupations include", "whose occupation is", "who worked as a", "with a career as a")
    assert any(f"{wording} filmmaker" in text for wording in wordings), text
    assert "Filmmaker" not in text and " is married to a person" in text and "the latter person" in text, text


def test_a_relation_stated_often_is_worded_in_several_ways_one_per_entity():
    # data/questions/attributes.toml [relation_variants]: "whose occupations include X" is one wording of three.
    names = [f"Person {i}" for i in range(30)]
    entities = [entity(n, "Person") for n in names]
    facts = [fact(n, "occupation", "Screenwriter") for n in names] + [fact(n, "occupation", "Actor") for n in names]
    ctx = context(entities, facts)

    def wordings(name, seed):
        options = describe.attributes(ctx, ctx.graph.node_id(name), 1, random.Random(seed), True, set(), set())
        return {o.modifier.removesuffix("screenwriter") for o in options if o.clue.object == "Screenwriter"}
    per_entity = [wordings(n, 0) for n in names]
    assert all(len(w) == 1 and wordings(n, 7) == w for n, w in zip(names, per_entity, strict=True))  # stable
    assert set().union(*per_entity) == {"whose occupations include ", "who worked as a ", "with a career as a "}
    options = describe.attributes(ctx, ctx.graph.node_id("Person 0"), 1, random.Random(0), True, set(), set())
    said = describe.described('American screenwriter', options[:1])
    assert_reads_as_english(f"{said[:1].upper()}{said[1:]} wrote it.")


def test_relation_phrases_and_type_nouns():
    assert phrase("birthPlace").noun == "birthplace" and phrase("spouse").mutable  # the phrasebook
    assert phrase("numberOfEmployees").noun == "number of employees"  # the phrasebook, for `num_employees`
    with pytest.raises(KeyError):  # no reviewed entry: never asked
        phrase("mergedWith")
    assert type_noun("Politician") == "politician" and type_noun("Settlement") == "place"
    assert type_noun("HockeyTeam") == "sports club" and type_noun("Village") == "village"  # through ancestors
    assert type_noun("SoccerClub") == "football club" and type_noun("Stadium") == "stadium"
    assert type_noun("thing") == "entity" and type_noun("frobnicator") == "entity"
    # Buildings by kind, never all "a structure"; a library is no "educational institution" though its class
    # descends from one; a church (HistoricBuilding) and a railway station through their ancestors.
    assert [type_noun(c) for c in ("Museum", "Library", "Bridge", "HistoricBuilding", "RailwayStation")] == [
        "museum", "library", "bridge", "building", "station"]
    assert type_noun("Dam") == "structure"  # no nearer noun listed: the ArchitecturalStructure fallback


def test_duplicate_questions_are_dropped():
    ctx = context(MERKEL, MERKEL_FACTS)
    path = path_of(ctx, "Angela Merkel", "Joachim Sauer", "Hosena")
    other = path.model_copy(update={"path_id": "ffff" + path.path_id})
    make = lambda p, text: Question(question_id=p.path_id, text=text, answer=p.answer, as_of=dt.date(2026, 3, 1),  # noqa: E731
                                    hops=2, path=p, engine="template")
    kept, skipped = deduplicate([make(path, "Where was X born?"), make(other, "Where  was X born ?")])
    assert [q.path.path_id for q in kept] == [path.path_id] and [s.reason for s in skipped] == ["duplicate"]


def test_every_path_is_accounted_for_and_rerun_skips(tmp_path):
    graph_dir = write_graph(tmp_path / "graph", MERKEL, MERKEL_FACTS)
    run_walks(graph_dir, tmp_path / "paths", WalkConfig(hops=[2, 3], walks_per_start=30, hub_quantile=1.0))
    config = QuestionConfig(paths_per_unit=2, shards=2, describe_start=0.0, max_answer_share=1.0)
    manifest = run_questions(graph_dir, tmp_path / "paths", tmp_path / "q", config, cache_dir=None)
    questions = list(read_records(Question, tmp_path / "q" / "questions"))
    skipped = list(read_records(SkippedRecord, tmp_path / "q" / "skipped"))
    assert len(questions) + len(skipped) == manifest.counts["paths:read"] > 0
    assert {q.hops for q in questions} == {2, 3}
    assert all(q.engine == "template" and q.model is None for q in questions)
    assert {q.as_of for q in questions} == {AS_OF}  # each has a fact that can change, revised on the snapshot day
    assert manifest.engines == {"writer": "template"}
    again = run_questions(graph_dir, tmp_path / "paths", tmp_path / "q", config, cache_dir=None)
    assert again.finished_at == manifest.finished_at
    run_questions(graph_dir, tmp_path / "paths", tmp_path / "q2", config, cache_dir=None)
    assert [q.model_dump() for q in read_records(Question, tmp_path / "q2" / "questions")] == [
        q.model_dump() for q in questions
    ]


@pytest.mark.parametrize("answer_type", ["entity", "date", "number"])
def test_answers_follow_the_path_in_the_graph(answer_type):
    ctx = context(MERKEL, MERKEL_FACTS)
    end = {"entity": "Hosena", "date": "1949-04-19", "number": None}[answer_type]
    titles = ("Angela Merkel", "Joachim Sauer", "Hosena", "1200") if end is None else ("Angela Merkel", "Joachim Sauer", end)
    path = path_of(ctx, *titles)
    assert path.answer_type == answer_type
    assert gates.path_node_ids(ctx.facts, path)[-1] == gates.answer_node(ctx.facts, path)
    assert gates.unique_chain(ctx.facts, path, [], start_described=False) is None


def test_cli_walk_then_questions(tmp_path, capsys):
    from cli.main import main

    graph_dir = write_graph(tmp_path / "graph", MERKEL, MERKEL_FACTS)
    paths_dir, out = tmp_path / "paths", tmp_path / "questions"
    assert main(["walk", "--graph", str(graph_dir), "--out", str(paths_dir), "--hops", "2", "3",
                 "--hub-quantile", "1.0", "--walks-per-start", "20"]) == 0
    # the crafted graph describes its starts by places alone (no anchor beyond the slice): they are named here
    assert main(["questions", "--graph", str(graph_dir), "--paths", str(paths_dir), "--out", str(out),
                 "--cache", str(tmp_path / "cache"), "--describe-start", "0"]) == 0
    printed = capsys.readouterr().out
    assert "walk: " in printed and "rejected:hub" in printed and "questions: " in printed
    assert list(read_records(Question, out / "questions"))
    assert main(["walk", "--graph", str(tmp_path / "missing"), "--out", str(paths_dir)]) == 2
    assert main(["walk", "--graph", str(graph_dir), "--out", str(tmp_path / "p9"), "--hops", "9"]) == 2
    assert main(["questions", "--graph", str(graph_dir), "--paths", str(paths_dir), "--out", str(out),
                 "--writer-base-url", "http://127.0.0.1:9/v1"]) == 2  # a base URL without a model
    assert "needs --writer-model" in capsys.readouterr().err


def test_another_seed_s_wording_of_the_same_path_is_another_question(tmp_path):
    """Runs of several seeds merged keep every wording under its own id (the reader found one id with three
    texts over seeds 0-2); the same text keeps its id."""
    graph_dir = write_graph(tmp_path / "graph", MERKEL, MERKEL_FACTS)
    run_walks(graph_dir, tmp_path / "paths", WalkConfig(hops=[2, 3], walks_per_start=30, hub_quantile=1.0))
    by_seed = {}
    for seed in range(4):
        config = QuestionConfig(describe_start=0.0, max_answer_share=1.0, seed=seed)
        run_questions(graph_dir, tmp_path / "paths", tmp_path / f"q{seed}", config, cache_dir=None)
        by_seed[seed] = list(read_records(Question, tmp_path / f"q{seed}" / "questions"))
    texts_of_id = {}
    for questions in by_seed.values():
        for q in questions:
            texts_of_id.setdefault(q.question_id, set()).add(q.text)
    assert all(len(texts) == 1 for texts in texts_of_id.values())
    assert len(texts_of_id) > len(by_seed[0])  # some path worded differently by another seed
