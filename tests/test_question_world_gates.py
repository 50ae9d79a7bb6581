"""Issue 25's world-grounded gates and the question report's independent probes, on crafted questions: each
gate rejects its pattern with its reason, and each report figure moves when bad questions are fed to it."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.phrasebook import scan_question
from schemas.questions import Qualifier
from synth import gates, text_gates
from synth.census import Census, count_census, load_census, save_census
from synth.question_gates import answer_aliases, path_gate, plan_gate, untimed_hop, world_unique_start
from synth.question_plan import WORLD_FITS_TAG, plan_question, world_fits, world_unique_reason
from synth.questions import cap_relation_answers
from synth.report import (
    TfidfProbe,
    description_first,
    prior_guess_hits,
    question_search_hits,
    world_fits_over,
)
from tests.dataset_fixtures import make_question
from tests.test_questions import context, path_of
from tests.walk_graphs import entity, fact, write_graph

PLACES = [
    entity("Ada Stone", "Person"),
    entity("Lyon", "City", head=False),
    entity("France", "Country", head=False),
    entity("Paris", "City", head=False),
    entity("Hill College", "University", head=False),
]
PLACE_FACTS = [
    fact("Ada Stone", "birthPlace", "Lyon"),
    fact("Lyon", "country", "France"),
    fact("France", "capital", "Paris"),
    fact("Ada Stone", "almaMater", "Hill College"),
    fact("Hill College", "city", "Paris"),
]


def test_a_final_hop_of_common_knowledge_is_trivial():
    ctx = context(PLACES, PLACE_FACTS)
    # "... was born in a city. In which country is this city?": a city's country is one well-known hop.
    why = gates.trivial_final_hop(ctx.facts, path_of(ctx, "Ada Stone", "Lyon", "France"))
    assert why and "country of 'Lyon'" in why
    # A university's city is not in the table; but a question naming France has Paris one hop away.
    path = path_of(ctx, "Ada Stone", "Hill College", "Paris")
    assert gates.trivial_final_hop(ctx.facts, path) is None
    assert gates.trivial_from_named(ctx.facts, path, ["Ada Stone"]) is None
    assert "capital" in gates.trivial_from_named(ctx.facts, path, ["Ada Stone", "France"])
    # The table's head classes hold: a person's "country" is no place's country.
    assert gates._trivial_from(ctx.graph, "country", ctx.graph.node_id("Ada Stone")) is None
    assert set(gates.trivial_hops()) >= {"capital", "currency", "officialLanguage", "country"}


def test_an_ended_fact_over_a_many_valued_relation_needs_its_time():
    entities = [entity("Ann Vale", "Politician"), entity("Bo Reed", "Scientist", head=False)]
    facts = [fact("Ann Vale", "spouse", "Bo Reed", qualifiers={"start": "1990", "end": "2010"}),
             fact("Bo Reed", "birthDate", "1949-04-19", "date")]
    ctx = context(entities, facts)
    path = path_of(ctx, "Ann Vale", "Bo Reed", "1949-04-19")
    assert path.hops[0].qualifiers == [Qualifier(key="start", value="1990"), Qualifier(key="end", value="2010")]
    plan = plan_question(ctx, path)
    assert 0 in plan.ended
    assert "ended" in untimed_hop(path, plan, "Ann Vale was married to a scientist. When was he born?")
    assert untimed_hop(path, plan, "Ann Vale was married from 1990 to a scientist. When was he born?") is None


@dataclass
class _Page:
    title: str


class _Index:
    """A search environment over crafted pages, ranked by the TF-IDF probe (the gate only reads the ranks)."""

    def __init__(self, pages):
        self.probe, self.known = TfidfProbe(pages), {title for title, _ in pages}

    def resolve(self, title):
        return _Page(title) if title in self.known else None

    def titles(self, query, top_k):
        return tuple(self.probe.rank(query, top_k))


PAGES = [("Memento (film)", "Memento is an American neo-noir psychological thriller film produced by Jennifer Todd."),
         ("Insomnia (film)", "Insomnia is an American psychological thriller film starring Al Pacino."),
         ("Jennifer Todd", "Jennifer Todd is an American film producer.")]


def test_a_description_that_finds_its_entity_alone_is_rejected():
    index = _Index(PAGES)
    copied = ("Memento (film)", "an American neo-noir psychological thriller film")  # the lead's own phrase
    why = text_gates.description_search(index, [copied], 1)
    assert why and "'Memento (film)' at rank 1" in why
    assert text_gates.description_search(index, [("Memento (film)", "a work released in the 2000s")], 1) is None


def test_the_pages_a_description_names_do_not_hide_its_entity():
    """"a film produced by Jennifer Todd" ranks her own page first; a searcher reads it and is one click from
    the film, so the gate ranks without the pages the description names."""
    index = _Index(PAGES)
    index.titles = lambda query, top_k: ("Jennifer Todd", "Memento (film)", "Insomnia (film)")[:top_k]
    named = ("Memento (film)", "a film produced by Jennifer Todd")
    assert text_gates.description_search(index, [named], 1) is None  # the anchor ranked first hid the film
    why = text_gates.description_search(index, [(*named, ["Jennifer Todd"])], 1)
    assert why and "'Memento (film)' at rank 1 (leaving out the 1 page(s) it names)" in why
    # Only the named pages are left out: the film ranked after the one found stays outside the top 1.
    assert text_gates.description_search(index, [("Insomnia (film)", named[1], ["Jennifer Todd"])], 1) is None
    assert text_gates.description_search(index, [("Insomnia (film)", named[1], ["Jennifer Todd"])], 2)


def test_a_fresh_plan_leaves_out_what_the_lead_sentence_says():
    """The third plan on draws attributes afresh: none whose object the entity's own lead names."""
    from graph.csr import LITERAL_PREFIX
    from synth.describe import Attribute, copies_lead

    lead = PAGES[0][1]

    def stated(obj):
        return Attribute("producer", "relation", f"whose producer is {obj}", "", gates.Clue(0, attribute="producer", object=obj))
    assert copies_lead(lead, stated("Jennifer Todd")) and not copies_lead(lead, stated("Emma Thomas"))
    assert copies_lead(lead, stated("Jennifer Todd (producer)"))  # the title's disambiguator is not read
    assert not copies_lead(lead, stated(f"{LITERAL_PREFIX}string{LITERAL_PREFIX}Jennifer Todd"))  # a literal names no page


def _questions(answers: list[str], relation: str = "spouse"):
    questions = []
    for i, answer in enumerate(answers):
        question = make_question(i)
        question.path.hops[-1].relation = relation
        questions.append(question.model_copy(update={"answer": answer}))
    return questions


def test_the_answer_prior_is_capped_per_final_relation():
    repeated = _questions(["Sam Lee"] * 5 + [f"Person {i}" for i in range(10)])
    assert prior_guess_hits(repeated) == 5  # the probe: the commonest other answer is right for all five
    kept, skipped = cap_relation_answers(repeated, 0.10, 10)
    assert {s.reason for s in skipped} == {"relation_answer_cap"} and len(skipped) == 4
    assert prior_guess_hits(kept) == 0
    # Fewer than the minimum: one question per answer (the cap 10% gives at 10 questions).
    kept, skipped = cap_relation_answers(_questions(["Sam Lee", "Sam Lee", "Kim Ray"]), 0.10, 10)
    assert len(kept) == 2 and len(skipped) == 1
    # Deterministic: the same questions in another order keep the same ones.
    again, _ = cap_relation_answers(list(reversed(repeated)), 0.10, 10)
    assert [q.question_id for q in again] == [q.question_id for q in cap_relation_answers(repeated, 0.10, 10)[0]]


def test_the_report_probes_move_on_bad_questions():
    probe = TfidfProbe(PAGES)
    good, bad = make_question(1), make_question(2)
    good.path.nodes[0] = good.path.start = "Memento (film)"
    bad.path.nodes[0] = bad.path.start = "Memento (film)"
    good.obfuscations = ["entity:Memento (film)->a work released in the 2000s"]
    bad.obfuscations = ["entity:Memento (film)->an American neo-noir psychological thriller film",
                        f"entity:{bad.path.nodes[1]}->a person"]
    assert description_first(probe, [good]) == (0, 0)
    assert description_first(probe, [bad, good]) == (1, 0)
    finds = make_question(3).model_copy(update={"answer": "Jennifer Todd", "text": "Who produced the neo-noir film?"})
    misses = make_question(4).model_copy(update={"answer": "Jennifer Todd", "text": "Who is this person?"})
    assert question_search_hits(probe, [finds, misses], 1) == 1
    assert prior_guess_hits(_questions(["A", "B", "C"])) == 0 and prior_guess_hits(_questions(["A", "A", "C"])) == 2
    for text, answer in [("Who is the childs of X?", "Y"), ("It lies in the the United Kingdom.", "Y"),
                         ("What is located in a place?", "Y"), ("Who sat in Congress of Deputies (Spain)?", "Y"),
                         ("How many people live there?", "81799600"), ("Who wrote it?", "The Shining (novel)")]:
        assert scan_question(text, answer), (text, answer)
    assert scan_question("Who is the child of the director of this film?", "Sam Lee") == []


def _two_alumni(ada_born_in_lyon: bool, lyon_population: str | None = "40000"):
    entities = [*PLACES, entity("Bob Stone", "Person")]
    facts = [*PLACE_FACTS, fact("Ada Stone", "birthDate", "1950-02-03", "date"),
             fact("Bob Stone", "birthDate", "1990-05-05", "date"), fact("Bob Stone", "almaMater", "Hill College")]
    if lyon_population is not None:
        facts.append(fact("Lyon", "populationTotal", lyon_population, "quantity"))
    if not ada_born_in_lyon:
        facts = [f for f in facts if not (f.head == "Ada Stone" and f.relation == "birthPlace")]
    return entities, facts


def test_a_described_start_is_unique_beyond_the_slice():
    # A place alone is no anchor: "a person born in Lyon" (a town of 40,000 here) fits the town's many natives
    # (data/questions/broad_anchors.toml `places.anchor_alone`); beside a narrow anchor of another kind (a
    # person, a work, an organisation) the description is unique beyond the slice.
    ctx = context(*_two_alumni(True), describe_start=1.0, reject_dominant_answer=False)
    path = path_of(ctx, "Ada Stone", "Hill College", "Paris")
    plan = plan_question(ctx, path)
    assert plan.start_described and any(c.object == "Lyon" for c in plan.clues if c.position == 0)
    assert "'Lyon' is a place" in world_unique_start(ctx, plan)
    assert plan_gate(ctx, path, plan)[0] == "not_unique_in_world"
    lyon = gates.Clue(position=0, attribute="birthPlace", object="Lyon")
    spouse = gates.Clue(position=0, attribute="spouse", object="Bob Stone")
    assert world_unique_reason(ctx, [lyon, spouse]) is None and world_unique_reason(ctx, [lyon]) is not None
    # A census of a full dump says 5,000 people were born in Lyon: the description fits thousands.
    ctx.census = Census({"birthPlace\tLyon": 5000}, {}, 10, "crafted")
    assert plan_gate(ctx, path, plan)[0] == "not_unique_in_world"
    # Only a date tells Ada from Bob here ("a person born in the 1950s"): no named anchor, no census.
    ctx = context(*_two_alumni(False), describe_start=1.0, reject_dominant_answer=False)
    plan = plan_question(ctx, path)
    assert plan.start_described and plan_gate(ctx, path, plan)[0] == "not_unique_in_world"
    assert "named anchor" in world_unique_start(ctx, plan)


def test_a_hub_is_no_anchor_without_a_census():
    # Lyon with 2,000,000 inhabitants: tens of thousands were born there, so "a person born in Lyon" is not
    # unique in the world; with no population recorded it stays an anchor (data/questions/broad_anchors.toml).
    ctx = context(*_two_alumni(True, "2000000"), describe_start=1.0, reject_dominant_answer=False)
    path = path_of(ctx, "Ada Stone", "Hill College", "Paris")
    plan = plan_question(ctx, path)
    assert plan.start_described and plan_gate(ctx, path, plan)[0] == "not_unique_in_world"
    assert "2,000,000 inhabitants" in world_unique_start(ctx, plan)
    # A country (by its class, whatever the relation) or a genre (by the relation) is broad; a person, a
    # college or a place of unrecorded size is not.
    ctx = context(*_two_alumni(True, None))
    broad = {(relation, obj): gates.broad_anchor(ctx.facts, gates.Clue(position=0, attribute=relation, object=obj))
             for relation, obj in (("birthPlace", "France"), ("genre", "Cluny"), ("almaMater", "Hill College"),
                                   ("spouse", "Bob Stone"), ("birthPlace", "Lyon"))}
    assert "a Country" in broad["birthPlace", "France"] and "genre" in broad["genre", "Cluny"]
    assert broad["almaMater", "Hill College"] is broad["spouse", "Bob Stone"] is broad["birthPlace", "Lyon"] is None


def test_a_region_without_a_page_is_broad_when_a_place_lies_in_it():
    # "a building in Quebec": the slice has no page for Quebec, but Montreal's infobox says it lies there, so
    # Quebec is a region (data/questions/broad_anchors.toml `region_relations`); Montreal itself, a city of
    # unrecorded size with a page, stays an anchor, and so does an object no place lies in.
    entities = [entity("Habitat 67", "Building"), entity("Montreal", "City"), entity("Ada Stone", "Architect")]
    facts = [fact("Habitat 67", "location", "Montreal"), fact("Habitat 67", "location", "Quebec"),
             fact("Habitat 67", "architect", "Ada Stone"), fact("Montreal", "subdivision", "Quebec"),
             fact("Ada Stone", "almaMater", "Hill College")]
    ctx = context(entities, facts)
    broad = {obj: gates.broad_anchor(ctx.facts, gates.Clue(position=0, attribute=relation, object=obj))
             for relation, obj in (("location", "Quebec"), ("location", "Montreal"), ("almaMater", "Hill College"))}
    assert "'Quebec' is a region" in broad["Quebec"] and "'Montreal' lies in it" in broad["Quebec"]
    assert broad["Montreal"] is broad["Hill College"] is None


def test_famous_starts_and_answers_are_weighted_toward_the_long_tail():
    entities, facts = _two_alumni(True)
    path_args = ("Ada Stone", "Hill College", "Paris")  # Paris: the most linked-to page of the graph
    ctx = context(entities, facts, famous_keep=0.0, reject_dominant_answer=False)
    assert ctx.facts.famous(ctx.graph.node_id("Paris"), 0.9)
    assert not ctx.facts.famous(ctx.graph.node_id("Ada Stone"), 0.9)
    failed = path_gate(ctx, path_of(ctx, *path_args))
    assert failed[0] == "famous" and "Paris" in failed[1]
    ctx = context(entities, facts, famous_keep=1.0, reject_dominant_answer=False)
    assert path_gate(ctx, path_of(ctx, *path_args)) is None


def test_the_census_counts_a_graph_folders_facts(tmp_path):
    entities, facts = _two_alumni(True)
    graph_dir = write_graph(tmp_path / "graph", entities, facts)
    census = count_census(graph_dir)
    assert census.holders("almaMater", "Hill College") == 2 and census.holders("birthPlace", "Lyon") == 1
    assert census.classes["Person"] == 2
    save_census(census, tmp_path / "census.json")
    assert load_census(tmp_path / "census.json") == census


def test_the_card_says_how_uniqueness_beyond_the_slice_was_checked():
    from pipeline.card import _how_made

    def said(world: str) -> str:
        return _how_made({}, {"gates": ["not_unique_in_world"], "world_uniqueness": world})[-1]
    assert "a narrow anchor: no country" in said("narrow anchor") and "no census of a full dump was given" in said("narrow anchor")
    assert "against a census full.json" in said("census full.json")
    assert "Beyond the slice" not in said("")


def test_the_prior_counts_a_facts_subjects_in_the_whole_wiki():
    # data/questions/world_holders.toml: a place's notable natives by its population, a hub's thousands, a
    # relation's typical count (a university's thousands of alumni, a spouse's one), else the default.
    def holders(population, relation, obj):
        ctx = context(*_two_alumni(True, population))
        return gates.prior_holders(ctx.facts, gates.Clue(position=0, attribute=relation, object=obj))
    assert holders("40000", "birthPlace", "Lyon") == 20
    assert holders(None, "birthPlace", "Lyon") == 200
    assert holders("2000000", "birthPlace", "Lyon") == gates.HUB_HOLDERS
    assert holders("40000", "birthPlace", "France") == gates.HUB_HOLDERS
    assert holders("40000", "almaMater", "Hill College") == 2000
    assert holders("40000", "spouse", "Bob Stone") == 1
    assert holders("40000", "someRelation", "Bob Stone") == gates.world_holders()["default"]


def test_with_the_prior_a_start_needs_a_fact_few_subjects_of_the_wiki_share():
    path_args = ("Ada Stone", "Hill College", "Paris")
    # Born in a town of 40,000: about 20 notable natives of the wiki fit "a person born in Lyon". The
    # named-anchor rule rejects a place alone; the planner records the prior's estimate, and the prior rejects
    # it too and says why.
    ctx = context(*_two_alumni(True), describe_start=1.0, reject_dominant_answer=False)
    plan = plan_question(ctx, path_of(ctx, *path_args))
    start = [c for c in plan.clues if c.position == 0]
    assert [c.object for c in start if c.object] == ["Lyon"] and "'Lyon' is a place" in world_unique_start(ctx, plan)
    assert world_fits(ctx, start) == (20.0, "birthPlace")
    ctx = context(*_two_alumni(True), describe_start=1.0, reject_dominant_answer=False, world_prior=True)
    assert "about 20 entities of the wiki (prior" in world_unique_start(ctx, plan)
    assert plan_gate(ctx, path_of(ctx, *path_args), plan_question(ctx, path_of(ctx, *path_args)))[0] == "not_unique_in_world"
    # In a slice where Lyon's natives are many, the share the description keeps scales the estimate down:
    # 20 natives in the wiki, 40 in the slice (an unfair sample: the census's assumption breaks), one fits.
    entities, facts = _two_alumni(True)
    natives = [f"Native {i}" for i in range(39)]
    entities = [*entities, *(entity(name, "Person") for name in natives)]
    facts = [*facts, *(fact(name, "birthPlace", "Lyon") for name in natives),
             *(fact(name, "birthDate", "1990-01-01", "date") for name in natives)]
    ctx = context(entities, facts, describe_start=1.0, reject_dominant_answer=False, world_prior=True)
    lyon = gates.Clue(position=0, attribute="birthPlace", object="Lyon")
    born = gates.Clue(position=0, attribute="birthDate", years=(1950, 1959))
    assert world_fits(ctx, [lyon, born]) == (0.5, "birthPlace")


def test_the_report_reads_the_planners_world_estimate_only_where_the_gate_did_not():
    questions = [make_question(i) for i in range(4)]
    for question, estimate in zip(questions, ("0.5", "1.5", "20.0", None), strict=True):
        if estimate:
            question.obfuscations.append(f"{WORLD_FITS_TAG}{estimate}")
    assert world_fits_over(questions, 1.5) == (1, 3)
    from pipeline.card import _how_made

    def said(world: str, share: float | None) -> str:
        return _how_made({}, {"gates": ["not_unique_in_world"], "world_uniqueness": world,
                              "world_fits_over_share": share, "world_fits_max": 1.5})[-1]
    assert "puts 33% of the described starts above 1.5 fits" in said("narrow anchor", 1 / 3)
    assert "by a reviewed prior of subjects per fact" in said("prior", None) and "an estimate, not a count" in said("prior", None)


def test_a_place_answer_accepts_the_page_it_was_written_within_unless_a_hub():
    # "[[Westminster]], [[London]]": born in London is right too; "[[Lublinitz]], [[German Empire]]": the
    # German Empire says too little to grade as the birth place.
    entities = [entity("Ada Stone", "Person"), entity("Bob Stone", "Person"), entity("Westminster", "City", head=False),
                entity("London", "City", head=False), entity("Lublinitz", "Town", head=False),
                entity("German Empire", "Country", head=False)]
    facts = [fact("Ada Stone", "birthPlace", "Westminster", qualifiers={"within": "London"}),
             fact("Bob Stone", "birthPlace", "Lublinitz", qualifiers={"within": "German Empire"})]
    ctx = context(entities, facts)
    assert "London" in answer_aliases(ctx, path_of(ctx, "Ada Stone", "Westminster"))
    assert "German Empire" not in answer_aliases(ctx, path_of(ctx, "Bob Stone", "Lublinitz"))
