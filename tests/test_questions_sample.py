"""Stage 2 on the shipped sample: stage 1's graph -> walks -> template questions of 2, 3 and 4 hops."""

from __future__ import annotations

from collections import defaultdict

import pytest

from ground.io import read_manifest, read_records
from knowledge.phrasebook import answer_breaks, breaks
from pipeline.dataset import load_config
from schemas.config import IndexConfig, QuestionConfig, WalkConfig
from schemas.questions import Path as Path_
from schemas.questions import Question
from schemas.wiki import Entity, Relation, SkippedRecord
from synth import describe, gates, text_gates
from synth.phrasing import is_work, phrase
from synth.question_plan import CLASS_NOUNS, plan_attempt, plan_question, question_as_of
from synth.questions import _load_context, first_passing_plan, template_text_gate
from synth.report import question_report, report_rows, tree_note
from tests.conftest import SAMPLE_CONFIG
from tests.test_questions import assert_reads_as_english


@pytest.fixture(scope="module")
def sample_dir(sample_dataset_run):
    """`make dataset`'s run folder: its graph, paths, index and questions are this stage's run as shipped."""
    return sample_dataset_run


@pytest.fixture(scope="module")
def sample(sample_dir):
    out = sample_dir
    walks, manifest = read_manifest(out / "paths"), read_manifest(out / "questions")
    shipped = load_config(str(SAMPLE_CONFIG), {})  # the stage configs this module's checks assume: the defaults
    assert shipped.walk == WalkConfig() and shipped.questions == QuestionConfig() and shipped.index == IndexConfig()
    questions = list(read_records(Question, out / "questions" / "questions"))
    skipped = list(read_records(SkippedRecord, out / "questions" / "skipped"))
    relations = list(read_records(Relation, out / "graph" / "relations"))
    entities = {e.title: e for e in read_records(Entity, out / "graph" / "entities")}
    return walks, manifest, questions, skipped, relations, entities, question_report(out)


@pytest.fixture(scope="module")
def sample_context(sample, sample_dir):
    """The questions stage's context over the sample run, to re-plan its questions."""
    return _load_context(sample_dir / "graph", sample_dir / "paths", QuestionConfig()), sample[2]


def test_questions_of_two_three_and_four_hops_with_every_path_accounted_for(sample):
    walks, manifest, questions, skipped, _, _, _ = sample
    assert {2, 3, 4} <= {q.hops for q in questions}
    # Issue 25's world gates (trivial final hop, description search, the answer prior per relation, narrow
    # anchors, fame) leave fewer 4-hop questions: measured 33/17/1 for 2/3/4 hops with no start described by
    # hub values alone (data/questions/broad_anchors.toml); 59/20/2 before that, with an intermediate's
    # description read to the top 5 as an agent reads them, one of its class noun alone not searched, and no hop
    # over a relation whose infobox list is a selection (77/30/3 before `partial_list`: a 4-hop one went through
    # Stephen King's notable works; 63/23/2 when a class noun alone was searched; 83/40/4 read to the top 1;
    # 75/37/7 with one plan and a second of class nouns; 185/117/20 before the world gates).
    assert all(manifest.counts[f"questions:hops_{h}"] >= 3 for h in (2, 3))
    assert manifest.counts["questions:hops_4"] >= 1
    assert len(questions) + len(skipped) == manifest.counts["paths:read"] == walks.counts["paths:kept"]
    assert all(walks.counts[f"rejected:{c}"] > 0 for c in ("dead_end", "hub", "multiple_objects", "inverse_hop"))
    # Not one_search: each description read to the top 5 turns down first what the whole text's search found
    # (measured 0 first reasons; 4 while descriptions were read to the top 1; the gate's own test is crafted:
    # tests/test_description_gates.py).
    # Not answer_cap either: 51 questions leave no answer over its 2% share (measured 0; it fired at 81).
    for gate in ("alternative_answer", "multi_valued_hop", "start_not_unique", "dominant_answer",
                 "trivial_final_hop", "description_search", "relation_answer_cap", "famous",
                 "not_unique_in_world", "partial_list"):
        assert manifest.counts[f"rejected:{gate}"] > 0, gate
    # The walks step around shorter routes (the shortcut condition), so the fewer_hops gate finds none left.
    assert walks.counts["rejected:shortcut"] > 0 and manifest.counts["rejected:fewer_hops"] == 0
    assert len({q.question_id for q in questions}) == len(questions)


def test_no_question_leaks_its_answer_or_names_an_intermediate(sample):
    _, _, questions, _, _, entities, _ = sample
    for question in questions:
        assert text_gates.answer_leak(question.text, question.answer, question.aliases) is None, question.text
        assert text_gates.intermediate_leak(question.text, question.path.nodes[:-1]) is None, question.text
        if question.path.answer in entities:  # the raw title and its redirects stay accepted
            assert set(entities[question.path.answer].aliases) - {question.answer} <= set(question.aliases)
            assert question.path.answer in {question.answer, *question.aliases}


def test_no_phrasebook_break_in_the_sample_questions_or_answers(sample):
    """The break scanner (data/ontology/phrasebook_breaks.toml) finds nothing in the text or the written answer."""
    _, _, questions, _, _, _, _ = sample
    for question in questions:
        assert breaks(question.text) == [], question.text
        assert answer_breaks(question.answer, question.path.answer_type) == [], question.answer


def test_each_answer_is_reached_by_following_its_path_in_the_graph(sample):
    _, _, questions, _, relations, entities, _ = sample
    objects = defaultdict(set)
    for relation in relations:
        obj = relation.tail if relation.value_type == "entity" else relation.value
        objects[(relation.head, relation.relation)].add(obj)
    for question in questions:
        path = question.path
        current = path.start
        assert entities[current].is_head
        for hop, following in zip(path.hops, path.nodes[1:], strict=True):
            assert hop.head == current and hop.provenance.page_title == current
            assert (hop.tail or hop.value) in objects[(current, hop.relation)]
            assert following.startswith(hop.tail or hop.value)  # literals read with their unit
            current = following
        assert current == question.path.answer
        finals = objects[(path.hops[-1].head, path.hops[-1].relation)]
        # A single answer, or branches on the answer that decide between the objects.
        assert len(finals) == 1 or any(o.startswith("branch:") for o in question.obfuscations)
        assert any(h.in_window for h in path.hops)


def test_questions_read_as_english_and_state_the_as_of_date(sample):
    _, manifest, questions, _, _, _, _ = sample
    for question in questions:
        assert_reads_as_english(question.text)
        assert question.engine == "template" and question.as_of == question_as_of(question.path, manifest.as_of.date())
        assert question.as_of <= manifest.as_of.date()  # its facts' pages, never the newest page of the input
        stated = question.text.startswith(f"As of {question.as_of:%B %Y}, ")
        assert stated == any(o.startswith("as_of:") for o in question.obfuscations)


# Read aloud and checked by hand against the sample's pages (facts, fuzzed periods, descriptions, grammar).
# Texts change whenever phrasing or walks change: at least half must still be found, and the ones found must
# read exactly as checked. `test_every_stated_fact_holds_in_the_graph` checks every question's facts instead.
CHECKED = {  # relations are ontology properties (graph/ontology.py); "As of" is the changeable facts' page revision
    # Drawn since the music cluster (g1music) grew the sample: right on the pages (Kubrick died 7 March 1999), but
    # not unique in the world (Warner Bros. released other films in the early 1970s); the earlier text's "former
    # spouse is Toba Metz" plan is no longer drawn.
    ("A Clockwork Orange (film)", ("director", "deathDate"), "1999-03-07"):
        "A film released in the early 1970s whose distributor is Warner Bros. was directed by a person. When did "
        "this person die?",
    ("King Kong (2005 film)", ("director", "birthPlace"), "Pukerua Bay"):
        "An adventure film whose writers include Fran Walsh and whose distributor is Universal Pictures was "
        "directed by a New Zealand filmmaker born in the early 1960s. Name the birthplace of this New Zealand "
        "filmmaker.",  # a tree at the start: Fran Walsh wrote two films here, Universal distributed several
    ("Lady Bird (film)", ("director", "spouse", "education", "city"), "Poughkeepsie, New York"):
        "As of October 2026, an American coming-of-age comedy-drama film whose lead actors include Lucas Hedges "
        "was directed by an American actress born in Sacramento. This American actress is married to an American "
        "filmmaker born in Brooklyn. This American filmmaker was educated at a private liberal arts college "
        "founded in the 1860s. In which city is this private liberal arts college located?",
    ("Michael Crichton", ("deathPlace", "populationTotal"), "3898747"):
        "As of July 2026, a writer with a career as a director whose alma mater is Harvard University died in a "
        "city in the United States. What is the population of this city?",  # class nouns ("writer"), since "an
    # American author" found him; the grown sample's index moved it off "born in Chicago" (Westworld, Harvard MD)
    ("Liam Neeson", ("spouse", "deathPlace"), "New York City"):  # a marriage that ended: in the past tense
        "An actor born in Northern Ireland was married to an English actress born in the 1960s. Where did this "
        "English actress die?",
    ("A Clockwork Orange (novel)", ("author", "deathDate"), "1993-11-22"):
        "A book from the United Kingdom published in the early 1960s whose publisher is William Heinemann was "
        "written by a writer. When did this writer die?",  # "a writer whose alma mater is ..." found Burgess in the top 5
    ("Thomas Keneally", ("birthPlace", "country", "capital"), "Canberra"):
        "An Australian novelist born in the 1930s was born in a city in New South Wales. This city is in a country "
        "whose currency is Australian dollar. Name the capital of this country.",  # not by his novel: it finds him
    ("Roma (2018 film)", ("director", "almaMater", "foundingDate"), "1910-09-22"):
        "A drama film whose lead actors include Marina de Tavira was directed by a Mexican filmmaker born in the "
        "early 1960s. This Mexican filmmaker studied at a public research university in Mexico. When was this "
        "public research university founded?",
    ("Stephen King", ("spouse", "birthPlace"), "Old Town, Maine"):
        "As of May 2026, an American author whose genres include suspense is married to an American novelist "
        "whose alma mater is the University of Maine. Where was this American novelist born?",
    ("Dune (2021 film)", ("director", "almaMater"), "Université du Québec à Montréal"):  # an occupation in lower case
        "A film released in the early 2020s starring Zendaya was directed by a person born in the 1960s. Where did "
        "this person study?",  # a third plan, drawn afresh: Villeneuve, born 1967
    ("A Clockwork Orange (novel)", ("author", "birthDate"), "1917-02-25"):  # the intermediate by its hop alone
        "A book from the United Kingdom published in the early 1960s whose publisher is William Heinemann was "
        "written by a writer. On what date was this writer born?",
    ("Tabitha King", ("spouse", "birthDate"), "1947-09-21"):  # a place alone is no anchor: her university too
        "As of August 2026, a writer born in Old Town, Maine whose alma mater is the University of Maine is married "
        "to a writer whose genres include science fiction. On what date was the latter writer born?",
    ("Tabitha King", ("almaMater", "foundingDate"), "1865"):  # the University of Maine, established 1865
        "A writer born in Old Town, Maine studied at a university. In what year was this university founded?",
    ("Peter Benchley", ("almaMater", "foundingDate"), "1636"):  # died in Princeton; Harvard, founded 1636
        "A writer who died in Princeton, New Jersey studied at a university in the United States. In what year "
        "was this university founded?",
    ("Memento (film)", ("director", "spouse", "birthDate"), "1971-12-09"):  # Nolan's wife Emma Thomas
        "As of October 2026, a film whose lead actors include Carrie-Anne Moss was directed by a person who is a "
        "citizen of the United Kingdom. This person is married to a person who worked as a film producer. When was "
        "the latter person born?",
    ("Schindler's List", ("director", "birthPlace"), "Cincinnati"):  # Spielberg co-founded Amblin
        "A film released in the early 1990s whose distributor is Universal Pictures and whose writer is Steven "
        "Zaillian was directed by a person whose associated organisations include Amblin Entertainment. Where "
        "was this person born?",
    # The music cluster (data/sample/source/08_music.wiki), read against its pages and the world by g1music: the
    # Cribs' only late-2010s album, Low's only early-21st-century album whose producer has died, Slowdive's only
    # 2020s album (Dead Oceans: the Secretly Group's label).
    ("24-7 Rock Star Shit", ("producer", "education"), "Northwestern University"):
        "An album released in the late 2010s whose artist is The Cribs was produced by a person born in the 1960s. "
        "Where was this person educated?",
    ("Things We Lost in the Fire", ("producer", "birthDate"), "1962-07-22"):
        "An album released in the early 21st century whose artist is the band Low was produced by a person who "
        "died in the 2020s. When was this person born?",
    ("Everything Is Alive", ("recordLabel", "parentCompany"), "Secretly Group"):
        "As of May 2026, an album released in the 2020s whose artist is Slowdive was released by a company "
        "founded in the late 2000s. What is the parent organisation of this company?",
}


def test_a_handful_checked_by_hand(sample):
    _, _, questions, _, _, _, _ = sample
    by_chain = {(q.path.start, tuple(h.relation for h in q.path.hops), q.path.answer): q.text for q in questions}
    found = {chain: by_chain[chain] for chain in CHECKED if chain in by_chain}
    # Issue 25's world gates reject some by design: Keneally's country's capital (trivial_final_hop), Neeson's
    # ended marriage stated without its years (untimed_hop), King, Herbert and Roma found by their start's
    # description alone (description_search); hub-only starts ("a writer born in Chicago", "a book from the
    # United Kingdom ... whose publisher is William Heinemann") need a narrow anchor (not_unique_in_world);
    # the four added after that change were read against the sample's wikitext (data/sample/source); several
    # plans per path find others: 6 of 19 found since the music cluster (4 of 16 before it; measured;
    # the hand-checked chains through notable works and relatives, and Barbie's writer "born in the late 20th
    # century", are refused by partial_list and the reader's reading of dates: tests/test_question_reader_gates.py).
    # With the sport pages (10_sport.wiki) too: 7 of 19 (measured).
    assert len(found) >= 4, sorted(set(CHECKED) - set(found))
    assert found == {chain: CHECKED[chain] for chain in found}


def test_every_stated_fact_holds_in_the_graph(sample_context):
    assert_states_graph_facts(*sample_context)


def assert_states_graph_facts(ctx, questions) -> None:
    """Each question re-planned: every attribute it states about an unnamed entity (a fuzzed date, a place, a
    related entity, a tree's branch) is a fact of that entity in the graph, its type noun is the entity's,
    and the text says the description the plan chose."""
    for question in questions:
        path = question.path
        plan = plan_question(ctx, path, attempt=plan_attempt(question.obfuscations))
        assert (CLASS_NOUNS in question.obfuscations) == (plan_attempt(question.obfuscations) >= 1)
        ids = gates.path_node_ids(ctx.facts, path)
        # No unnamed entity is described by a fact that picks it out in the world ("whose capital is London").
        assert gates.identifying_clue(ctx.facts, plan.clues) is None, question.text
        for clue in plan.clues:
            node = ids[clue.position]
            if clue.type_noun:
                assert ctx.facts.type_nouns[node] == clue.type_noun, (question.text, clue)
            if clue.attribute:
                assert gates.holds(ctx.facts, node, clue), (question.text, clue)
        for position in plan.nouns:
            said = describe.described(plan.nouns[position], plan.attributes.get(position, [])).lower()
            if position and not plan.attributes.get(position) and position not in plan.tree_positions:
                # a bare intermediate may be said through its hop: "the home ground of this football club"
                hop = path.hops[position - 1]
                entry = phrase(hop.relation, hop.head in ctx.entities and is_work(ctx.entities[hop.head].type))
                said = said if said in question.text.lower() else f"the {entry.noun} of"
            assert said in question.text.lower(), question.text
        assert all(b.predicate in question.text for b in plan.branches), question.text
        for position in plan.tree_positions:  # a tree: neither the hop nor what the text says alone finds it
            said = [c for c in plan.clues if c.position == position]
            if position == 0:  # a start where two or more stated facts intersect, none alone singles it out
                base, branches = [c for c in said if not c.attribute], [c for c in said if c.attribute]
                assert len(branches) >= 2 and gates.described_candidates(ctx.facts, said) == {ids[0]}, question.text
                assert all(len(gates.described_candidates(ctx.facts, [*base, b])) > 1 for b in branches), question.text
                continue
            hop = path.hops[position - 1]
            assert len(ctx.graph.objects(ids[position - 1], ctx.graph.relation_id(hop.relation))) > 1, question.text
            assert len(gates.described_candidates(ctx.facts, said)) > 1, question.text


def test_the_question_report_shows_hard_questions(sample):
    _, _, questions, _, _, _, report = sample
    # Issue 25's 150 on the grown sample (513 pages: four long-tail clusters joined the original 231, and a
    # place written with its containers is one place): 256 questions, 2/3/4 hops 166/77/13. On the original
    # pages the world gates kept 46-51 of 1130 paths once a described start needed a
    # narrow anchor (no country, language, genre, occupation or city of millions alone: 81 before, with
    # hub-only starts such as "a company in the United States founded in the 1980s"; 41 when distributors,
    # publishers, universities and cities of 100,000 were hubs too), with an intermediate's description
    # read to the top 5 and no hop over a selection list (110 before `partial_list` refused hops through notable
    # works and relatives; 88 while a class noun alone was searched too; 127 to the top 1; 33 with the start's
    # read to the top 5 too; 119 with one plan per path and a description search that an anchor ranked first
    # could hide the start behind; 322 before the world gates), see docs/ARCHITECTURE.md's questions section
    # for where the rest go.
    assert report["questions"] == len(questions) >= 150
    assert {2, 3, 4} <= {q.hops for q in questions} and report["tree_share"] > 0
    assert report["names_start_share"] <= 0.10
    # Nor by a fact that identifies it in the world (measured 0.0 for both; 12.6% and 12.4% before the
    # planner avoided inverse-functional facts).
    assert report["identifies_start_share"] <= 0.01 and report["identifies_intermediate_share"] <= 0.01
    # Probes that are not the gates: the text in a TF-IDF retriever (measured 1.6%), each description alone
    # there (an intermediate first: 0.9% read to the top 5, 11.8% to the top 1, 18.5% before the gate left the
    # named pages out, 40.1% before the description gate; the start first: 18.2%, 18.9% before, 58.0% when an
    # anchor's page ranked first in the agents' index hid the start behind it, 68.0% before the gate), the leave-one-out prior guess per final relation (0.0%,
    # 15.8% before its cap). Issue 25's bound for the start is 20%.
    assert report["question_search_share"] is not None and report["question_search_share"] <= 0.05
    assert report["start_description_first_share"] <= 0.20 and report["unnamed_description_first_share"] <= 0.15
    assert report["prior_guess_share"] <= 0.10
    assert report["max_answer_share"] <= max(0.02, round(1 / len(questions), 4))  # one each below 50 questions
    assert {"one_search", "start_not_unique", "description_search", "trivial_final_hop", "partial_list"} <= set(report["gates"])
    assert report["world_uniqueness"] == "narrow anchor" and "not_unique_in_world" in report["gates"]
    # Where the yield goes, per hop count, and why trees fall short of the configured share (if they do).
    assert set(report["yield_by_hops"]) == {"2", "3", "4"}
    assert sum(row["questions"] for row in report["yield_by_hops"].values()) == report["questions"]
    assert all(row["paths"] >= row["questions"] for row in report["yield_by_hops"].values())
    assert report["tree_note"] == ""  # within a few points of the configured share: nothing to explain
    # Trees at the start, at intermediates and at the answer (an entity only the intersection of branches pins
    # down), near the configured share: measured 36.7% at 40% on the sample.
    assert report["tree_share"] >= report["tree_share_configured"] - 0.05
    assert report["tree_at"]["start"] and report["tree_at"]["intermediate"] and report["tree_at"]["answer"]
    row = dict(report_rows(report))["tree-shaped share"]  # as the run summary and the card print it
    assert row.startswith(f"{report['tree_share']:.1%} (configured 40%; branches meet at the start in ")


def test_the_start_description_alone_rarely_finds_the_start_in_the_agents_index(sample, sample_dir):
    """Issue 25: the start's description searched alone in the agents' index returns the start first for at
    most 20% of questions (measured 0% with the description gate; 53% before it)."""
    from synth.report import described_entities
    from synth.search import SearchEnvironment

    questions = sample[2]
    environment = SearchEnvironment.load(sample_dir / "index")
    first = 0
    for question in questions:
        description = described_entities(question).get(question.path.start)
        hits = environment.search(description, 1) if description else []
        first += bool(hits) and hits[0].title == question.path.start
    assert first <= 0.20 * len(questions)


def test_a_path_tries_plans_until_one_passes(sample_context, sample_dir):
    """Kept questions written from a later plan (class nouns, attributes drawn afresh) fail with fewer plans,
    with their first plan's reason and the count of plans tried, and pass again with as many as they took."""
    from synth.search import SearchEnvironment

    ctx, questions = sample_context
    environment = SearchEnvironment.load(sample_dir / "index")
    later = [q for q in questions if plan_attempt(q.obfuscations) >= 2]
    assert len(later) >= 30  # measured 54 of 81 (71 of 110 before partial_list; 60 of 127 at k 1)
    for question in later[:5]:
        tried = plan_attempt(question.obfuscations)
        fewer = ctx.config.model_copy(update={"plan_attempts": tried})
        ctx.config = fewer
        try:
            plan, failed = first_passing_plan(ctx, question.path, None, environment,
                                              template_text_gate(ctx, question.path, environment))
            assert plan is None and failed[1].endswith(f"({tried} plans tried)"), failed
            ctx.config = fewer.model_copy(update={"plan_attempts": tried + 1})
            plan, failed = first_passing_plan(ctx, question.path, None, environment,
                                              template_text_gate(ctx, question.path, environment))
            assert failed is None and f"plan:{tried}" in plan.obfuscations
        finally:
            ctx.config = QuestionConfig()


def test_an_attempt_the_start_alone_turns_down_fails_as_a_whole_plan(sample_context, sample_dir):
    """The stage turns later attempts down by the start's own gates before describing the rest; the whole
    plan of each such attempt fails the plan or description gate too (so nothing is lost by it)."""
    from synth.question_gates import plan_gate, search_gate, start_gate, world_unique_start
    from synth.search import SearchEnvironment

    ctx, _ = sample_context
    environment = SearchEnvironment.load(sample_dir / "index")
    paths = sorted(read_records(Path_, sample_dir / "paths" / "paths"), key=lambda p: p.path_id)[::15]
    turned_down = 0
    for path in paths:
        for attempt in (1, 2, 5):
            start = plan_question(ctx, path, attempt=attempt, start_only=True)
            if start_gate(ctx, path, start, environment) is None:
                continue
            turned_down += 1
            whole = plan_question(ctx, path, attempt=attempt)
            if start.unanchored:  # left undescribed: no fact of the attempt is a narrow named anchor
                assert whole.unresolved == 0 or world_unique_start(ctx, whole), path.path_id
            else:
                assert described_as_start(whole) == described_as_start(start), path.path_id
            assert plan_gate(ctx, path, whole) or search_gate(ctx, path, whole, environment), path.path_id
    assert turned_down >= 20


def test_a_whole_plan_goes_on_from_its_start_only_plan_as_if_planned_afresh(sample_context, sample_dir):
    """The stage plans an attempt whose start passes from that start-only plan (`plan_question`'s start):
    the same plan as one that describes the start itself, whichever attempt and however the start ends."""
    ctx, _ = sample_context
    paths = sorted(read_records(Path_, sample_dir / "paths" / "paths"), key=lambda p: p.path_id)[::25]
    continued = 0
    for path in paths:
        for attempt in (1, 2, 3, 6):
            start = plan_question(ctx, path, attempt=attempt, start_only=True)
            if not start.unanchored:
                continued += 1
                assert plan_question(ctx, path, attempt=attempt, start=start) == plan_question(ctx, path, attempt=attempt)
    assert continued >= 100


def test_a_start_without_a_narrow_anchor_fails_every_attempt(sample_context, sample_dir):
    """`anchorless_from` (no census, no prior, no narrow named anchor among the start's facts, or none but
    those its lead sentence names) lets the stage skip the later (or the fresh) attempts of a described start:
    each one's start-only plan fails `start_gate`."""
    from synth.question_gates import start_gate
    from synth.question_plan import FRESH_ATTEMPT, anchorless_from
    from synth.search import SearchEnvironment

    ctx, _ = sample_context
    environment = SearchEnvironment.load(sample_dir / "index")
    paths = sorted(read_records(Path_, sample_dir / "paths" / "paths"), key=lambda p: p.path_id)
    described = [p for p in paths if plan_question(ctx, p, start_only=True).start_described]
    hopeless = [(p, found) for p in described if (found := anchorless_from(ctx, p)) is not None]
    assert sum(found == 1 for _, found in hopeless) >= 50  # measured 853 of the sample's described starts
    assert sum(found == FRESH_ATTEMPT for _, found in hopeless) >= 20  # measured 228
    for path, found in hopeless[::10]:
        for attempt in range(found, ctx.config.plan_attempts):
            assert start_gate(ctx, path, plan_question(ctx, path, attempt=attempt, start_only=True), environment)


def described_as_start(plan):
    return describe.described(plan.nouns[0], plan.attributes.get(0, [])) if 0 in plan.nouns else None


def test_the_report_takes_the_phrasebook_break_scanner(sample_dir):
    report = question_report(sample_dir, scan_breaks=lambda text, answer: ["break"] if "born" in text else [])
    assert 0 < report["phrasebook_break_share"] < 1


def test_a_tree_share_short_of_the_configured_one_is_explained(sample, sample_dir):
    _, _, _, _, _, _, report = sample
    folders = {name: sample_dir / name for name in ("graph", "paths", "questions", "index")}
    walk = read_manifest(sample_dir / "paths")
    wanted = WalkConfig.model_validate(walk.config).model_copy(update={"tree_share": 0.9})
    note = tree_note(folders, walk, wanted, report["tree_share"])
    assert note.startswith(f"walk.tree_share is 90% but {report['tree_share']:.0%} of the questions are trees")
    assert "pin down only together" in note and "branch at the answer" in note
