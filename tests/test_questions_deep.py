"""Deep-search questions on crafted graphs: open-world uniqueness, described start entities, tree questions,
tense from qualifiers, the answer-prior gate and the per-answer cap."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random

from ground.io import write_records
from schemas.questions import Question
from schemas.wiki import Relation
from synth import describe, gates
from synth.phrasing import has_ended, phrase
from synth.question_gates import bare_run, plan_gate, self_named_clue, structural_gate
from synth.question_plan import plan_question
from synth.question_writers import write_template
from synth.questions import cap_answers, place_containers
from synth.report import identifying_fact_named
from tests.test_questions import assert_reads_as_english, context, path_of
from tests.walk_graphs import entity, fact
from wikitext.infobox import parse_infoboxes

RIVERS = [
    entity("Ohio River", "River"),
    entity("Allegheny River", "River"),
    entity("Cincinnati", "Settlement", head=False),
    entity("Pittsburgh", "Settlement", head=False),
]
RIVER_FACTS = [
    fact("Ohio River", "nearestCity", "Cincinnati"),
    fact("Ohio River", "nearestCity", "Louisville"),  # a city without a page: nothing is known about it
    fact("Cincinnati", "country", "United States"),
    fact("Cincinnati", "mayor", "Aftab Pureval"),
    fact("Allegheny River", "nearestCity", "Pittsburgh"),
    fact("Pittsburgh", "country", "United States"),
    fact("Pittsburgh", "mayor", "Ed Gainey"),
]


def test_a_city_without_a_page_is_an_alternative_and_a_unique_hop_is_kept():
    ctx = context(RIVERS, RIVER_FACTS)
    # "The Ohio River flows through a city in the United States. Who is its mayor?": Louisville may be
    # such a city too (the graph says nothing against it), so the hop is not unique.
    path = path_of(ctx, "Ohio River", "Cincinnati", "Aftab Pureval")
    plan = plan_question(ctx, path, "clues")
    gate, why = structural_gate(ctx, path, plan)
    assert gate == "multi_valued_hop" and "Louisville" in why
    path = path_of(ctx, "Allegheny River", "Pittsburgh", "Ed Gainey")
    plan = plan_question(ctx, path, "clues")
    assert structural_gate(ctx, path, plan) is None
    assert_reads_as_english(write_template(ctx, path, plan).text)


FILM = [entity("Dune (2021 film)", "Film"), *(entity(n, "Person", head=False) for n in ("Jon Spaihts", "Eric Roth"))]
FILM_FACTS = [
    fact("Dune (2021 film)", "writer", "Jon Spaihts"),
    fact("Dune (2021 film)", "writer", "Eric Roth"),
    fact("Dune (2021 film)", "writer", "Denis Villeneuve"),  # no page
    fact("Jon Spaihts", "birthPlace", "Chattanooga"),
    fact("Eric Roth", "birthPlace", "New York City"),
    fact("Jon Spaihts", "birthDate", "1970-03-12", "date"),
    fact("Eric Roth", "birthDate", "1945-03-22", "date"),
]


def test_a_hop_with_several_objects_is_rejected_even_when_its_clues_split_the_pages():
    ctx = context(FILM, FILM_FACTS)
    path = path_of(ctx, "Dune (2021 film)", "Jon Spaihts", "Chattanooga")
    # The birth date tells the two screenwriters with a page apart, but not the third one without a page.
    clues = [gates.Clue(position=1, attribute="birthDate", years=(1970, 1979))]
    gate, why = gates.unique_chain(ctx.facts, path, clues, start_described=False)
    assert gate == "multi_valued_hop" and "Denis Villeneuve" in why
    assert structural_gate(ctx, path, plan_question(ctx, path, "clues"))[0] == "multi_valued_hop"


PEOPLE = [
    entity("Ada Lane", "Writer", description="Ada Lane (born 1961) is an Irish novelist."),
    entity("Bea Lane", "Writer", description="Bea Lane (born 1962) is an Irish novelist."),
    entity("Cara Moss", "Writer", description="Cara Moss (born 1985) is an Irish novelist."),
    entity("Galway", "Settlement", head=False),
]
PEOPLE_FACTS = [
    fact("Ada Lane", "birthDate", "1961-01-01", "date"),
    fact("Bea Lane", "birthDate", "1962-05-05", "date"),
    fact("Cara Moss", "birthDate", "1985-07-07", "date"),
    fact("Ada Lane", "almaMater", "Trinity College Dublin"),
    fact("Bea Lane", "almaMater", "University College Cork"),
    fact("Cara Moss", "almaMater", "Trinity College Dublin"),
    *(fact(name, "birthPlace", "Galway") for name in ("Ada Lane", "Bea Lane", "Cara Moss")),
    fact("Galway", "twinTown", "Lorient"),  # not "country": a place's country is a trivial final hop
]


def test_the_start_is_described_by_attributes_that_single_it_out():
    ctx = context(PEOPLE, PEOPLE_FACTS, describe_start=1.0, attributes_per_entity=0)
    path = path_of(ctx, "Ada Lane", "Galway", "Lorient")
    plan = plan_question(ctx, path)
    assert plan.start_described and structural_gate(ctx, path, plan) is None
    start = [c for c in plan.clues if c.position == 0]
    assert len(start) >= 2 and gates.described_candidates(ctx.facts, start) == {ctx.graph.node_id("Ada Lane")}
    text = write_template(ctx, path, plan).text
    assert_reads_as_english(text)
    # Galway, a place described by nothing else, is named through its relation: "the birthplace of an Irish ..."
    assert "Ada Lane" not in text and "the birthplace of an Irish novelist " in text and "a place" not in text
    assert any(o.startswith("entity:Ada Lane->an Irish novelist") for o in plan.obfuscations)
    # One attribute alone fits two novelists (born in the early 1960s, or studied at Trinity).
    for clue in start[1:]:
        assert len(gates.described_candidates(ctx.facts, [start[0], clue])) == 2
    # A description that fits several entities is rejected.
    loose = [gates.Clue(position=0, type_noun="writer"), gates.Clue(position=0, attribute="birthPlace", object="Galway")]
    gate, why = gates.unique_chain(ctx.facts, path, loose, start_described=True)
    assert gate == "start_not_unique" and "3 entities" in why
    # Neither attribute alone finds her, together they do: the start is where two branches meet (a tree).
    assert plan.tree_positions == [0] and plan.shape == "tree" and "tree_at:0" in plan.obfuscations
    assert gates.start_intersection(ctx.facts, start, ctx.graph.node_id("Ada Lane")) is None


def test_a_start_drawn_to_be_a_tree_is_described_by_facts_that_only_together_find_it():
    # Ada Lane also holds an award no one else holds: alone it names her (a chain's description). Drawn to be
    # a tree, her start is instead described by a birth period and a college, each shared with another novelist.
    facts = [*PEOPLE_FACTS, fact("Ada Lane", "award", "Galway Pen Prize")]
    ctx = context(PEOPLE, facts, describe_start=1.0, attributes_per_entity=0)
    path = path_of(ctx, "Ada Lane", "Galway", "Lorient")
    ada = ctx.graph.node_id("Ada Lane")
    chain = plan_question(ctx, path)
    assert chain.shape == "chain" and [a.relation for a in chain.attributes[0]] == ["award"]
    ctx.tree_share = 1.0
    tree = plan_question(ctx, path)
    assert structural_gate(ctx, path, tree) is None
    assert tree.tree_positions == [0] and sorted(a.relation for a in tree.attributes[0]) == ["almaMater", "birthDate"]
    said = [c for c in tree.clues if c.position == 0]
    assert gates.described_candidates(ctx.facts, said) == {ada}
    for branch in said[1:]:  # each branch, checked over the whole graph, fits another novelist too
        assert len(gates.described_candidates(ctx.facts, [said[0], branch])) == 2
    text = write_template(ctx, path, tree).text
    assert_reads_as_english(text)
    assert "Galway Pen Prize" not in text and "Ada Lane" not in text and " and whose" not in text


def test_the_start_intersection_gate_checks_each_branch():
    ctx = context(PEOPLE, [*PEOPLE_FACTS, fact("Ada Lane", "award", "Galway Pen Prize")])
    ada = ctx.graph.node_id("Ada Lane")
    writer = gates.Clue(position=0, type_noun="writer")
    early_60s = gates.Clue(position=0, attribute="birthDate", years=(1960, 1963))
    trinity = gates.Clue(position=0, attribute="almaMater", object="Trinity College Dublin")
    prize = gates.Clue(position=0, attribute="award", object="Galway Pen Prize")
    galway = gates.Clue(position=0, attribute="birthPlace", object="Galway")
    assert gates.start_intersection(ctx.facts, [writer, early_60s, trinity], ada) is None
    assert gates.start_intersection(ctx.facts, [writer, trinity], ada) == "fewer than two branches"
    assert gates.start_intersection(ctx.facts, [writer, galway, trinity], ada) == "the branches together fit 2 entities"
    assert gates.start_intersection(ctx.facts, [writer, early_60s, trinity, galway], ada) == \
        "branch birthPlace is not needed"
    assert gates.start_intersection(ctx.facts, [writer, prize, galway], ada) == "branch birthPlace is not needed"


# Ida Orbit's children: a relation whose infobox list is the whole family (a company's `product` list, which
# these tests used first, is a selection the partial_list gate refuses to single a value out of by a date).
STUDIO = [
    entity("Orbit Pictures", "Company"),
    *(entity(title, "Person", head=False) for title in ("Red Moon", "Blue Sun", "Grey Star")),
]
STUDIO_FACTS = [
    fact("Orbit Pictures", "founder", "Ida Orbit"),
    fact("Orbit Pictures", "foundingDate", "1931-04-01", "date"),
    *(fact(title, "employer", "Orbit Pictures") for title in ("Red Moon", "Blue Sun", "Grey Star")),
    fact("Red Moon", "birthDate", "1952-01-01", "date"),
    fact("Blue Sun", "birthDate", "1987-01-01", "date"),
    fact("Grey Star", "birthDate", "1999-01-01", "date"),
    fact("Red Moon", "almaMater", "Lee Park"),
    fact("Blue Sun", "almaMater", "Lee Park"),
    fact("Grey Star", "almaMater", "Max Ode"),
    fact("Ida Orbit", "child", "Red Moon"),
    fact("Ida Orbit", "child", "Blue Sun"),
    fact("Ida Orbit", "child", "Grey Star"),
]


# A person outside Ida Orbit's children, born near Blue Sun and at the same college: no branch on the
# answer singles Blue Sun out of the whole graph, only together with the hop from Ida Orbit.
GOLD_RAIN = [fact("Gold Rain", "birthDate", "1988-06-01", "date"), fact("Gold Rain", "almaMater", "Lee Park"),
             fact("Gold Rain", "employer", "Orbit Pictures")]


def test_a_tree_question_needs_each_branch_and_each_holds():
    entities = [*STUDIO, entity("Ida Orbit", "Person", head=False), entity("Gold Rain", "Person", head=False)]
    ctx = context(entities, STUDIO_FACTS + GOLD_RAIN, max_attributes=3)
    path = path_of(ctx, "Orbit Pictures", "Ida Orbit", "Blue Sun")
    plan = plan_question(ctx, path, "clues")
    assert plan.shape == "tree" and plan.branches and plan.tree_positions == [2]
    assert len(gates.described_candidates(ctx.facts, [b.clue for b in plan.branches])) > 1  # not alone
    answer = ctx.graph.node_id("Blue Sun")
    branch_clues = [b.clue for b in plan.branches]
    assert all(gates.holds(ctx.facts, answer, clue) for clue in branch_clues)  # each branch holds
    assert gates.tree_branches(ctx.facts, path, branch_clues) is None  # and each is needed
    assert structural_gate(ctx, path, plan) is None
    text = write_template(ctx, path, plan).text
    assert_reads_as_english(text)
    assert any(b.predicate in text for b in plan.branches) and "shape:tree" in plan.obfuscations
    # The final hop alone reaches three children; the branches leave one.
    final = {int(o) for o in ctx.graph.objects(ctx.graph.node_id("Ida Orbit"), ctx.graph.relation_id("child"))}
    assert len(final) == 3
    assert {o for o in final if all(gates.satisfies(ctx.facts, o, c) for c in branch_clues)} == {answer}
    # A branch that does not hold for the answer, or one that is not needed, fails the gate.
    wrong = gates.Clue(position=2, attribute="birthDate", years=(1950, 1959))
    assert "does not hold" in gates.tree_branches(ctx.facts, path, [wrong])
    exact = gates.Clue(position=2, attribute="birthDate", years=(1987, 1987))
    redundant = gates.Clue(position=2, attribute="almaMater", object="Lee Park")
    assert "not needed" in gates.tree_branches(ctx.facts, path, [exact, redundant])


def test_a_branch_that_alone_singles_out_the_answer_makes_no_tree():
    # Without Gold Rain, "born in the late 1980s" picks Blue Sun out of the whole graph: the hop from Ida
    # Orbit adds nothing to find it, so the question is kept but not counted as a tree.
    entities = [*STUDIO, entity("Ida Orbit", "Person", head=False)]
    ctx = context(entities, STUDIO_FACTS, max_attributes=3)
    path = path_of(ctx, "Orbit Pictures", "Ida Orbit", "Blue Sun")
    plan = plan_question(ctx, path, "clues")
    assert plan.branches and plan.branching and structural_gate(ctx, path, plan) is None
    assert gates.described_candidates(ctx.facts, [b.clue for b in plan.branches]) == {ctx.graph.node_id("Blue Sun")}
    assert plan.shape == "chain" and plan.tree_positions == [] and "shape:chain" in plan.obfuscations


PRODUCERS = [entity("Glass Harbour", "Film"),
             *(entity(name, "Person", head=False) for name in ("Rae Lind", "Oto Vance", "Pia Lind", "Sol Marr"))]
PRODUCER_FACTS = [
    fact("Glass Harbour", "producer", "Rae Lind"),
    fact("Glass Harbour", "producer", "Oto Vance"),
    fact("Glass Harbour", "releaseDate", "2001-05-05", "date"),
    fact("Rae Lind", "birthPlace", "Hobart"),
    fact("Oto Vance", "birthPlace", "Darwin"),
    fact("Rae Lind", "spouse", "Sol Marr"),
    fact("Oto Vance", "spouse", "Pia Lind"),
    fact("Sol Marr", "birthPlace", "Perth"),
]


def _glass_harbour_with_mae_tull(mae_tull_spouse: str):
    """The producers' graph and a second person born in Hobart, Mae Tull, who produced nothing:
    (context, the path Glass Harbour -> Rae Lind -> Sol Marr, its plan)."""
    entities = [*PRODUCERS, entity("Mae Tull", "Person", head=False)]
    facts = [*PRODUCER_FACTS, fact("Mae Tull", "birthPlace", "Hobart"), fact("Mae Tull", "spouse", mae_tull_spouse)]
    ctx = context(entities, facts)
    path = path_of(ctx, "Glass Harbour", "Rae Lind", "Sol Marr")
    return ctx, path, plan_question(ctx, path, "clues")


def test_an_intermediate_pinned_down_by_two_branches_is_a_tree():
    # "The producer of Glass Harbour who was born in Hobart": two producers, and two people born in Hobart
    # (Mae Tull produced nothing here), so neither branch alone finds Rae Lind; together they do.
    ctx, path, plan = _glass_harbour_with_mae_tull("Pia Lind")
    assert structural_gate(ctx, path, plan) is None  # the intersection is unique
    assert plan.shape == "tree" and plan.tree_positions == [1] and "tree_at:1" in plan.obfuscations
    rae, graph = ctx.graph.node_id("Rae Lind"), ctx.graph
    producers = {int(o) for o in graph.objects(graph.node_id("Glass Harbour"), graph.relation_id("producer"))}
    assert rae in producers and len(producers) == 2  # the hop holds, and alone it is not unique
    said = [c for c in plan.clues if c.position == 1]
    assert all(gates.holds(ctx.facts, rae, c) for c in said if c.attribute)  # each branch holds
    assert len(gates.described_candidates(ctx.facts, said)) == 2  # the description alone is not unique
    text = write_template(ctx, path, plan).text
    assert_reads_as_english(text)
    assert "born in Hobart" in text and "Rae Lind" not in text
    # Without Mae Tull, "a person born in Hobart" alone is Rae Lind: a shortcut, not a tree.
    ctx = context(PRODUCERS, PRODUCER_FACTS)
    plan = plan_question(ctx, path_of(ctx, "Glass Harbour", "Rae Lind", "Sol Marr"), "clues")
    assert plan.shape == "chain" and plan.tree_positions == []


def test_a_clue_whose_every_fit_reaches_the_answer_is_a_shortcut():
    # "The producer of Glass Harbour born in Hobart: whom is this person married to?" If the other person
    # born in Hobart is married to Sol Marr too, "a person born in Hobart" answers it without the film.
    ctx, path, plan = _glass_harbour_with_mae_tull("Sol Marr")
    gate, why = plan_gate(ctx, path, plan)  # (Sol Marr, two spouses' spouse, also fails dominant_answer)
    assert gate == "clue_shortcut" and "all 2 entities" in why
    # Married to someone else, Mae Tull keeps the film needed: the tree of the test above stands.
    ctx, path, plan = _glass_harbour_with_mae_tull("Pia Lind")
    assert gates.clue_shortcut(ctx.facts, path, plan.clues) is None


def test_a_tree_over_a_single_valued_property_is_rejected():
    # Two birth dates recorded for one person are noise, not alternatives that a branch could choose from.
    entities = [entity("Vic Hale", "Person"), entity("Wyn Hale", "Person", head=False)]
    facts = [fact("Vic Hale", "spouse", "Wyn Hale"), fact("Wyn Hale", "birthDate", "1950-01-01", "date"),
             fact("Wyn Hale", "birthDate", "1951-01-01", "date"), fact("Wyn Hale", "birthPlace", "Leeds")]
    ctx = context(entities, facts)
    path = path_of(ctx, "Vic Hale", "Wyn Hale", "1950-01-01")
    branch = gates.Clue(position=2, attribute="birthPlace", object="Leeds")
    assert "birthDate is single-valued" in gates.tree_branches(ctx.facts, path, [branch])


def test_an_ended_marriage_is_asked_in_the_past_without_an_as_of_date():
    entities = [entity("Tom Reed", "Person"), entity("Una Vale", "Person", head=False)]
    facts = [fact("Tom Reed", "spouse", "Una Vale", qualifiers={"start": "1990", "end": "2001"}),
             fact("Una Vale", "birthPlace", "Perth"), fact("Una Vale", "birthDate", "1960-01-01", "date")]
    ctx = context(entities, facts)
    path = path_of(ctx, "Tom Reed", "Una Vale", "Perth")
    for style in ("clues", "nested"):
        plan = plan_question(ctx, path, style)
        text = write_template(ctx, path, plan).text
        assert plan.ended == {0} and plan.as_of_text is None and not text.startswith("As of")
        assert " is married to" not in text and ("was married to" in text or "former spouse" in text), text
    # Described by the ended marriage, Una Vale's husband is her former spouse.
    attributes = describe.attributes(ctx, ctx.graph.node_id("Una Vale"), 1, random.Random(0), True, set(), set())
    assert [a.modifier for a in attributes if a.relation == "spouse"] == []  # Una Vale states no spouse herself
    reverse = [*facts, fact("Una Vale", "spouse", "Tom Reed", qualifiers={"start": "1990", "end": "2001"})]
    ctx = context(entities, reverse)
    attributes = describe.attributes(ctx, ctx.graph.node_id("Una Vale"), 1, random.Random(0), True, set(), set())
    assert [a.modifier for a in attributes if a.relation == "spouse"] == ["whose former spouse is Tom Reed"]
    # A former and a present spouse: one spouse now ("whose spouse is", not "whose spouses include").
    remarried = [*reverse, fact("Una Vale", "spouse", "Vic Hale", qualifiers={"start": "2005"})]
    ctx = context(entities, remarried)
    attributes = describe.attributes(ctx, ctx.graph.node_id("Una Vale"), 1, random.Random(0), True, set(), set())
    assert sorted(a.modifier for a in attributes if a.relation == "spouse") == \
        ["whose former spouse is Tom Reed", "whose spouse is Vic Hale"]
    ongoing = [fact("Tom Reed", "spouse", "Una Vale", qualifiers={"start": "1990"}), *facts[1:]]
    ctx = context(entities, ongoing)
    plan = plan_question(ctx, path_of(ctx, "Tom Reed", "Una Vale", "Perth"), "clues")
    assert plan.as_of_text == "March 2026" and "is married to" in write_template(ctx, path, plan).text


def test_a_term_of_office_bounds_its_group_and_decides_the_tense():
    """`office3` ... `term_end3`: the group's facts carry the term; an ended term reads in the past without
    an as-of date, a running one (or one that ends after the snapshot) in the present with one."""
    box = parse_infoboxes("""{{Infobox officeholder
| office = Chancellor of Germany
| term_start = 22 November 2005
| office3 = [[Leader of the Opposition (Germany)|Leader of the Opposition]]
| term_start3 = {{start date|2002|9|22}}
| term_end3 = {{end date|2005|11|22}}
| successor3 = [[Wolfgang Gerhardt]]
| birth_place = [[Hamburg]]
}}""")[0]
    qualifiers = {(f.property, f.group_index): dict(f.qualifiers) for f in box.facts}
    assert qualifiers[("office", 3)] == qualifiers[("successor", 3)] == {"start": "2002-09-22", "end": "2005-11-22"}
    assert qualifiers[("office", None)] == {"start": "2005-11-22"} and qualifiers[("birthPlace", None)] == {}

    entities = [entity("Ana Lind", "Politician"), entity("Leader of the Opposition", "Thing", head=False)]

    def question(term: dict[str, str]):
        facts = [fact("Ana Lind", "office", "Leader of the Opposition", qualifiers=term),
                 fact("Ana Lind", "birthDate", "1954-07-17", "date"),
                 fact("Leader of the Opposition", "foundingDate", "1949-09-07", "date")]
        ctx = context(entities, facts)
        path = path_of(ctx, "Ana Lind", "Leader of the Opposition", "1949-09-07")
        plan = plan_question(ctx, path, "clues")
        return plan, write_template(ctx, path, plan).text

    plan, text = question({"start": "2002-09-22", "end": "2005-11-22"})
    assert plan.ended == {0} and plan.as_of_text is None and "held the office of" in text, text
    assert_reads_as_english(text)
    for running in ({"start": "2002-09-22"}, {"start": "2002-09-22", "end": "2031-01-01"}):
        plan, text = question(running)
        assert plan.ended == set() and plan.as_of_text == "March 2026" and "holds the office of" in text, text
    assert has_ended({"end": "2026-03-01"}, dt.date(2026, 3, 31)) and not has_ended({"end": "2027"}, dt.date(2026, 3, 31))
    assert has_ended({"end": "div."}, dt.date(2026, 3, 31)) and not has_ended({"start": "1990"}, dt.date(2026, 3, 31))


def test_a_dominant_answer_is_rejected_and_one_answer_is_capped():
    entities = [entity(f"Person {i}", "Person") for i in range(5)]
    facts = [fact(f"Person {i}", "spouse", f"Person {(i + 1) % 5}") for i in range(5)]
    facts += [fact(f"Person {i}", "birthPlace", "Springfield" if i else "Shelbyville") for i in range(5)]
    ctx = context(entities, facts)
    common = path_of(ctx, "Person 0", "Person 1", "Springfield")
    assert "most common object of birthPlace" in gates.dominant_answer(ctx.facts, common)
    assert gates.dominant_answer(ctx.facts, path_of(ctx, "Person 4", "Person 0", "Shelbyville")) is None
    make = lambda i: Question(question_id=f"{i:02d}", text=f"q{i}", answer="A" if i < 6 else f"B{i}",  # noqa: E731
                              as_of=dt.date(2026, 3, 1), hops=2, engine="template",
                              path=common.model_copy(update={"path_id": f"{i:02d}"}))
    kept, skipped = cap_answers([make(i) for i in range(60)], share=0.05)
    assert sum(q.answer == "A" for q in kept) == 2 <= 0.05 * len(kept) < 3
    assert {s.reason for s in skipped} == {"answer_cap"} and len(skipped) == 4


def test_a_next_work_is_said_in_its_own_words():
    """"A book followed by 'Salem's Lot", not "a book whose sequel is ...": the next book is no sequel."""
    entities = [entity("Carrie (novel)", "Book"), entity("'Salem's Lot", "Book", head=False)]
    ctx = context(entities, [fact("Carrie (novel)", "subsequentWork", "'Salem's Lot"),
                             fact("'Salem's Lot", "previousWork", "Carrie (novel)")])
    after = describe.attributes(ctx, ctx.graph.node_id("Carrie (novel)"), 0, random.Random(0), False, set(), set())
    before = describe.attributes(ctx, ctx.graph.node_id("'Salem's Lot"), 0, random.Random(0), False, set(), set())
    assert [a.modifier for a in after] == ["followed by 'Salem's Lot"]
    assert [a.modifier for a in before] == ["that followed the novel Carrie"]


def test_a_description_that_needs_the_hop_is_preferred_to_one_that_bypasses_it():
    # Rae Lind is the only person born in the early 1960s (that alone finds her, the hop from the film adds
    # nothing), but two people were born in Hobart: the plan describes her by the latter, so the film's
    # producers and the birthplace only together pin her down.
    entities = [*PRODUCERS, entity("Kit Moss", "Person", head=False)]
    facts = [*PRODUCER_FACTS, fact("Rae Lind", "birthDate", "1960-02-02", "date"),
             fact("Oto Vance", "birthDate", "1990-03-03", "date"), fact("Kit Moss", "birthPlace", "Hobart"),
             fact("Kit Moss", "spouse", "Pia Lind")]
    ctx = context(entities, facts)
    path = path_of(ctx, "Glass Harbour", "Rae Lind", "Sol Marr")
    plan = plan_question(ctx, path, "clues")
    assert structural_gate(ctx, path, plan) is None
    assert plan.tree_positions == [1] and [a.relation for a in plan.attributes[1]] == ["birthPlace"]
    text = write_template(ctx, path, plan).text
    assert_reads_as_english(text)
    assert "born in Hobart" in text and "1960" not in text


def _countries(second_currency: str, second_capital: str = "Sylvan City"):
    """A film from two countries that share a language; Freedonia's capital Fredville is in the world the
    capital of one country only, so "a country whose capital is Fredville" needs no film."""
    entities = [entity("Glass Film", "Film"), entity("Freedonia", "Country", head=False),
                entity("Sylvania", "Country", head=False)]
    facts = [fact("Glass Film", "country", "Freedonia"), fact("Glass Film", "country", "Sylvania"),
             fact("Freedonia", "capital", "Fredville"), fact("Sylvania", "capital", second_capital),
             fact("Freedonia", "officialLanguage", "Fredish"), fact("Sylvania", "officialLanguage", "Fredish"),
             fact("Freedonia", "currency", "Fred dollar"), fact("Sylvania", "currency", second_currency),
             fact("Freedonia", "anthem", "Hail Freedonia"), fact("Sylvania", "anthem", "Hail Sylvania")]
    return entities, facts


def test_a_world_identifying_clue_at_an_intermediate_is_replanned_or_rejected():
    # The currency tells the two countries apart and identifies neither in the world: it is chosen, not the
    # capital or the anthem, although each of those fits one country of the graph too.
    ctx = context(*_countries("Sylvan mark"))
    path = path_of(ctx, "Glass Film", "Freedonia", "Fredish")
    plan = plan_question(ctx, path, "clues")
    assert [c.attribute for c in plan.clues if c.position == 1 and c.attribute] == ["currency"]
    # Its final hop, a country's official language, is common knowledge: only that gate rejects it (issue 25),
    # on the path alone (`path_gate`, before planning).
    assert plan_gate(ctx, path, plan) is None and "officialLanguage" in gates.trivial_final_hop(ctx.facts, path)
    text = write_template(ctx, path, plan).text
    assert_reads_as_english(text)
    assert "Fred dollar" in text and "Fredville" not in text and "Hail Freedonia" not in text
    # With one currency for both, only the capital or the anthem singles Freedonia out: rejected, counted.
    ctx = context(*_countries("Fred dollar"))
    path = path_of(ctx, "Glass Film", "Freedonia", "Fredish")
    plan = plan_question(ctx, path, "clues")
    gate, why = plan_gate(ctx, path, plan)
    assert gate == "identifying_clue" and "position 1" in why
    assert gates.identifies(ctx.facts, gates.Clue(position=1, attribute="capital", object="Fredville"))
    assert not gates.identifies(ctx.facts, gates.Clue(position=1, attribute="currency", object="Fred dollar"))
    assert not gates.identifies(ctx.facts, gates.Clue(position=1, attribute="capital", years=(1900, 1909)))


def test_a_clue_that_fits_one_graph_entity_but_many_in_the_world_is_kept():
    # "A country whose currency is Fred dollar" fits Freedonia alone here; many countries share a currency
    # in the world, so the film hop stays needed and nothing rejects it.
    ctx = context(*_countries("Sylvan mark"))
    path = path_of(ctx, "Glass Film", "Freedonia", "Fredish")
    plan = plan_question(ctx, path, "clues")
    said = [c for c in plan.clues if c.position == 1]
    assert gates.described_candidates(ctx.facts, said) == {ctx.graph.node_id("Freedonia")}
    assert gates.identifying_clue(ctx.facts, plan.clues) is None and gates.clue_shortcut(ctx.facts, path, plan.clues) is None


def _novels(genre_tells_apart: bool):
    """Glass Novel, followed by Glass Sequel (which finds it in the world), shares its publisher with Third
    Novel and (unless `genre_tells_apart`) its genre with Other Novel too."""
    entities = [entity("Glass Novel", "Book"), entity("Other Novel", "Book"), entity("Third Novel", "Book"),
                entity("Ann Writer", "Person", head=False)]
    facts = [fact("Glass Novel", "author", "Ann Writer"), fact("Ann Writer", "birthPlace", "Leeds"),
             fact("Glass Novel", "subsequentWork", "Glass Sequel"),
             fact("Glass Novel", "publisher", "Harbour Press"), fact("Third Novel", "publisher", "Harbour Press"),
             fact("Glass Novel", "genre", "Fantasy"), fact("Third Novel", "genre", "Fantasy" if not genre_tells_apart
                                                          else "Crime"),
             fact("Other Novel", "genre", "Fantasy"), fact("Other Novel", "publisher", "Bay Books")]
    return entities, facts


def test_a_start_is_not_described_by_a_fact_that_identifies_it_in_the_world():
    # "A novel followed by Glass Sequel" is Glass Novel to any searcher: the start is described by its
    # publisher and genre, which only together single it out.
    ctx = context(*_novels(genre_tells_apart=True), describe_start=1.0)
    path = path_of(ctx, "Glass Novel", "Ann Writer", "Leeds")
    plan = plan_question(ctx, path)
    assert plan.start_described
    assert {c.attribute for c in plan.clues if c.position == 0 and c.attribute} == {"publisher", "genre"}
    assert plan_gate(ctx, path, plan) is None
    text = write_template(ctx, path, plan).text
    assert_reads_as_english(text)
    assert "Glass Sequel" not in text and "Harbour Press" in text
    # When nothing else singles it out, the identifying fact is the only description: rejected, counted.
    ctx = context(*_novels(genre_tells_apart=False), describe_start=1.0)
    plan = plan_question(ctx, path_of(ctx, "Glass Novel", "Ann Writer", "Leeds"))
    gate, why = plan_gate(ctx, path, plan)
    assert gate == "identifying_clue" and "subsequentWork 'Glass Sequel'" in why and "position 0" in why


def test_the_report_counts_a_start_named_by_a_fact_that_identifies_it():
    ctx = context(*_novels(genre_tells_apart=True))
    novel = ctx.graph.node_id("Glass Novel")
    said = "A novel followed by Glass Sequel was written by a person. Where was this person born?"
    assert identifying_fact_named(ctx.graph, novel, said) == "Glass Sequel"
    # The name stated for another fact, or a fact that finds many, does not count.
    assert identifying_fact_named(ctx.graph, novel, "A novel whose editor is Glass Sequel ...") is None
    assert identifying_fact_named(ctx.graph, novel, "A novel whose publisher is Harbour Press ...") is None


def test_a_notable_work_identifies_its_writer_but_not_a_film_person():
    # overlay: notableWork is inverse-functional only for written works (a novel has one author; a film is
    # the notable work of its director, writers and stars).
    entities = [entity("Glass Novel", "Novel"), entity("Glass Film", "Film"), entity("Ann Writer", "Person"),
                entity("Bo Director", "Person")]
    facts = [fact("Ann Writer", "notableWork", "Glass Novel"), fact("Bo Director", "notableWork", "Glass Film"),
             fact("Ann Writer", "notableWork", "Lost Poem")]  # no page, no class: not known to identify
    ctx = context(entities, facts)

    def identifies(work):
        return gates.identifies(ctx.facts, gates.Clue(position=0, attribute="notableWork", object=work))
    assert identifies("Glass Novel") and not identifies("Glass Film") and not identifies("Lost Poem")
    said = "A writer whose notable works include the novel Glass Novel lived in Leeds. Where ...?"
    assert identifying_fact_named(ctx.graph, ctx.graph.node_id("Ann Writer"), said) == "Glass Novel"
    said = "A director whose notable works include the film Glass Film lived in Leeds. Where ...?"
    assert identifying_fact_named(ctx.graph, ctx.graph.node_id("Bo Director"), said) is None


COUNTRY = [entity("Canada", "Country"), entity("Toronto", "Settlement", head=False),
           entity("Dune (2021 film)", "Film"), entity("Dune (novel)", "Book", head=False),
           entity("Hull City A.F.C.", "SoccerClub"), entity("Kingston upon Hull", "Settlement", aliases=["Hull"])]
COUNTRY_FACTS = [
    fact("Canada", "currency", "Canadian dollar"),  # no page: the words alone give Canada away
    fact("Canada", "largestCity", "Toronto"),
    fact("Toronto", "foundingDate", "1793-08-27", "date"),
    fact("Dune (2021 film)", "basedOn", "Dune (novel)"),
    fact("Dune (2021 film)", "director", "Denis Villeneuve"),
    fact("Hull City A.F.C.", "ground", "Kingston upon Hull"),
]


def test_a_clue_written_with_the_described_entitys_own_name_or_demonym_is_rejected():
    ctx = context(COUNTRY, COUNTRY_FACTS)
    path = path_of(ctx, "Canada", "Toronto", "1793-08-27")
    why = self_named_clue(ctx, path, [gates.Clue(position=0, attribute="currency", object="Canadian dollar")])
    assert why is not None and "'Canadian'" in why and "Canada" in why  # the demonym (attributes.toml)
    film = path_of(ctx, "Dune (2021 film)", "Dune (novel)")
    why = self_named_clue(ctx, film, [gates.Clue(position=0, attribute="basedOn", object="Dune (novel)")])
    assert why is not None and "'Dune'" in why  # the bare title, disambiguator aside
    assert self_named_clue(ctx, film, [gates.Clue(position=0, attribute="director", object="Denis Villeneuve")]) is None
    club = path_of(ctx, "Hull City A.F.C.", "Kingston upon Hull")
    why = self_named_clue(ctx, club, [gates.Clue(position=1, attribute="name", object="Hull City A.F.C.")])
    assert why is not None and "'Hull'" in why  # a redirect title of the entity counts as its name
    # The sixth reading: "The home ground of this football club is a football stadium in Burnley": the clue
    # writes the name of the club the hop comes from, so it finds the stadium (and the club) by itself.
    ctx_club = context([entity("Burnley F.C.", "SoccerClub"), entity("Turf Moor", "Stadium", head=False)],
                       [fact("Burnley F.C.", "ground", "Turf Moor"), fact("Turf Moor", "location", "Burnley")])
    ground = path_of(ctx_club, "Burnley F.C.", "Turf Moor")
    why = self_named_clue(ctx_club, ground, [gates.Clue(position=1, attribute="location", object="Burnley")])
    assert why == ("location 'Burnley' of the entity at position 1 (Turf Moor) shares the name 'Burnley' with the "
                   "entity before it (Burnley F.C.)")
    assert self_named_clue(ctx_club, ground, [gates.Clue(position=1, attribute="location", object="Leeds")]) is None
    # The plan gate counts it as an identifying clue.
    ctx = context(COUNTRY, COUNTRY_FACTS, describe_start=1.0, require_named_anchor=False,
                  start_description_search_top_k=0, description_search_top_k=0, one_search_top_k=0)
    plan = plan_question(ctx, path, "clues")
    assert any(c.attribute == "currency" for c in plan.clues)  # the only fact to describe Canada by
    assert plan_gate(ctx, path, plan) == ("identifying_clue", "currency 'Canadian dollar' writes the name "
                                          "'Canadian' of the entity at position 0 (Canada)")


CHAIN = [entity("Slow Tide", "Film"), entity("Ivo Brant", "Person", head=False),
         entity("Karst University", "University", head=False), entity("Lendt", "Settlement", head=False)]
CHAIN_FACTS = [
    fact("Slow Tide", "director", "Ivo Brant"),
    fact("Ivo Brant", "almaMater", "Karst University"),
    fact("Karst University", "city", "Lendt"),
    fact("Lendt", "populationTotal", "48200", "number"),
]


def test_a_run_of_intermediates_stated_by_their_type_alone_is_limited():
    # "Slow Tide was directed by a person. This person studied at a university. This university is located in a
    # city. What is its population?": three intermediates, nothing stated of any.
    path_args = ("Slow Tide", "Ivo Brant", "Karst University", "Lendt", "48200")
    ctx = context(CHAIN, CHAIN_FACTS)
    path = path_of(ctx, *path_args)
    plan = plan_question(ctx, path, "clues")
    assert not any(c.attribute for c in plan.clues)  # the crafted graph offers no fact to describe them by
    gate, why = plan_gate(ctx, path, plan)
    assert gate == "bare_run" and "3 intermediates in a row" in why and "at most 1" in why
    ctx = context(CHAIN, CHAIN_FACTS, max_bare_run=3)
    assert plan_gate(ctx, path, plan_question(ctx, path, "clues")) is None
    ctx = context(CHAIN, CHAIN_FACTS, max_bare_run=None)
    assert plan_gate(ctx, path, plan_question(ctx, path, "clues")) is None
    # One stated fact in the middle splits the run: two runs of one pass the default.
    described = [gates.Clue(position=2, attribute="city", object="Lendt")]
    ctx = context(CHAIN, CHAIN_FACTS)
    assert bare_run(ctx, path, dataclasses.replace(plan, clues=described)) is None


def test_a_scientist_is_described_by_a_doctoral_student_and_the_list_is_never_a_hop():
    """The fifth reading's scientists were described by a university and a decade, which hundreds share; a
    doctoral student has one or two advisors, so "who supervised the doctorate of X" anchors the start. A
    scientist's infobox lists some of the students only (data/questions/partial_lists.toml): never a hop."""
    entities = [entity("Otto Brenn", "Scientist"), entity("Lise Haas", "Scientist", head=False),
                entity("University of Kessel", "University", head=False)]
    facts = [fact("Otto Brenn", "doctoralStudent", "Lise Haas"), fact("Otto Brenn", "almaMater", "University of Kessel"),
             fact("University of Kessel", "foundingDate", "1734", "date")]
    ctx = context(entities, facts, describe_start=1.0, start_description_search_top_k=0,
                  description_search_top_k=0, one_search_top_k=0, reject_dominant_answer=False)
    path = path_of(ctx, "Otto Brenn", "University of Kessel", "1734")
    plan = plan_question(ctx, path, "clues")
    assert [c.object for c in plan.clues if c.position == 0 and c.attribute] == ["Lise Haas"]
    assert structural_gate(ctx, path, plan) is None
    text = write_template(ctx, path, plan).text
    assert text.startswith("A scientist who supervised the doctorate of Lise Haas studied at a university.")
    assert_reads_as_english(text)
    hop = path_of(ctx, "Otto Brenn", "Lise Haas")
    assert structural_gate(ctx, hop, plan_question(ctx, hop, "clues"))[0] == "partial_list"


def test_a_place_clue_fits_a_place_written_within_it():
    """The fifth reading: The Prestige names both Nolans as writers, born in "[[Westminster]], [[London]]" and in
    "[[London]]"; "written by a person born in London" fits both, not only the one whose first link is London."""
    entities = [entity("The Prestige (film)", "Film"), entity("Christopher Nolan", "Person", head=False),
                entity("Jonathan Nolan", "Person", head=False), entity("London", "City", head=False),
                entity("Westminster", "Settlement", head=False)]
    facts = [fact("The Prestige (film)", "writer", "Christopher Nolan"),
             fact("The Prestige (film)", "writer", "Jonathan Nolan"),
             fact("Christopher Nolan", "birthPlace", "Westminster", qualifiers={"within": "London"}),
             fact("Jonathan Nolan", "birthPlace", "London"),
             fact("Jonathan Nolan", "birthDate", "1976-06-06", "date"),
             fact("Christopher Nolan", "birthDate", "1970-07-30", "date")]
    ctx = context(entities, facts)
    assert ctx.containers == {"Westminster": ("London",)}
    path = path_of(ctx, "The Prestige (film)", "Jonathan Nolan", "1976-06-06")
    born_in_london = gates.Clue(position=1, attribute="birthPlace", object="London")
    gate, why = gates.unique_chain(ctx.facts, path, [born_in_london], start_described=False)
    assert gate == "multi_valued_hop" and "Christopher Nolan" in why
    christopher, jonathan = ctx.facts.node("Christopher Nolan"), ctx.facts.node("Jonathan Nolan")
    assert gates.holds(ctx.facts, christopher, born_in_london) and gates.holds(ctx.facts, jonathan, born_in_london)
    assert gates.described_candidates(ctx.facts, [born_in_london]) == {christopher, jonathan}
    # Westminster does not hold London: "born in Westminster" fits Christopher alone.
    born_in_westminster = gates.Clue(position=1, attribute="birthPlace", object="Westminster")
    assert gates.described_candidates(ctx.facts, [born_in_westminster]) == {christopher}
    assert gates.unique_chain(ctx.facts, path_of(ctx, "The Prestige (film)", "Christopher Nolan", "1970-07-30"),
                              [born_in_westminster], start_described=False) is None


def test_place_containers_are_read_from_the_graphs_relation_rows(tmp_path):
    rows = [fact("Christopher Nolan", "birthPlace", "Westminster", qualifiers={"within": "London"}),
            fact("Ada Lane", "birthPlace", "Westminster", qualifiers={"within": "England"}),
            fact("Ada Lane", "spouse", "Bo Lane", qualifiers={"start": "1990"})]
    write_records(Relation, rows, tmp_path / "relations" / "relations-00000-of-00001.parquet")
    assert place_containers(tmp_path) == {"Westminster": ("England", "London")}


def test_a_clue_names_its_object_as_the_answer_would_and_a_form_of_government_is_no_anchor():
    """Held-out real pages (Canada's infobox): "a country whose forms of government include federalism and
    whose languages include Gwich'in language". A language reads as its answer does ("Gwich'in"), and a form
    of government, which dozens of states share, does not anchor a start (data/questions/broad_anchors.toml)."""
    assert describe._name("Gwich’in language", phrase("language")) == "Gwich’in"
    assert describe._name("Language", phrase("language")) == "Language"  # nothing left to name: kept whole
    ctx = context([entity("Canada", "Country")], [fact("Canada", "governmentType", "Federalism")])
    assert gates.broad_anchor(ctx.facts, gates.Clue(position=0, attribute="governmentType", object="Federalism"))


def test_an_industry_reads_as_english_not_as_an_infobox_field():
    """The sixth reading: "a company whose industry is film" (data/questions/attributes.toml `industry`); the
    object keeps its phrasebook form, lower case as a common noun."""
    ctx = context([entity("Northlight Pictures", "Company")], [fact("Northlight Pictures", "industry", "Film")])
    node = ctx.facts.node("Northlight Pictures")
    said = {a.relation: a.modifier for a in describe.offered(ctx, node, 0, False, set(), set())}
    assert said["industry"] == "in the film industry"
