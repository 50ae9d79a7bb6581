"""Issue 25, the independent reader's defects 2, 3 and 7 (docs/QUESTION_REVIEW.md), on crafted pages: a date
clue tells two entities apart only as a reader reads its words; a value of a relation whose infobox list
is a selection is never singled out by a date or a type alone; a default guess (an American publisher's
city) is a trivial hop."""

from __future__ import annotations

import random

from knowledge.ontology import load_ontology
from synth import describe, gates
from synth.phrasing import period_years
from synth.question_gates import path_gate, plan_gate, structural_gate, text_gate
from synth.question_plan import described_as, plan_question
from synth.question_writers import write_template
from tests.test_questions import context, path_of
from tests.walk_graphs import entity, fact


def _co_writers(second_born: str):
    """A film written by Greta Lane (born 1983, studied at Barnard College) and Noah Bell (born `second_born`):
    the reader's Barbie case, where "born in the late 20th century" fitted both writers to a reader."""
    entities = [entity("Doll (film)", "Film"), entity("Greta Lane", "Person", head=False),
                entity("Noah Bell", "Person", head=False), entity("Barnard College", "University", head=False)]
    facts = [fact("Doll (film)", "writer", "Greta Lane"), fact("Doll (film)", "writer", "Noah Bell"),
             fact("Greta Lane", "birthDate", "1983-08-04", "date"), fact("Noah Bell", "birthDate", second_born, "date"),
             fact("Greta Lane", "education", "Barnard College")]
    return entities, facts


def test_a_date_clue_tells_co_writers_apart_only_as_a_reader_reads_it():
    ctx = context(*_co_writers("1969-09-03"), reject_dominant_answer=False)
    path = path_of(ctx, "Doll (film)", "Greta Lane", "Barnard College")
    plan = plan_question(ctx, path)
    assert plan.unresolved is None and structural_gate(ctx, path, plan) is None
    said = described_as(plan, 1)
    assert said in write_template(ctx, path, plan).text
    (clue,) = [c for c in plan.clues if c.position == 1 and c.years]
    period = said.split("born in ")[1]
    assert clue.years == period_years(period)  # the gates check what the words mean to a reader ...
    assert clue.years[0] <= 1983 <= clue.years[1] and not clue.years[0] <= 1969 <= clue.years[1]
    assert period in ("the early 1980s", "the 1980s")  # ... so "the late 20th century" (1960-2000) is no clue
    late = next(a for a in describe.attributes(ctx, ctx.graph.node_id("Greta Lane"), 1, random.Random(0), True,
                                               set(), set()) if "century" in a.modifier)
    assert late.modifier == "born in the late 20th century"
    assert gates.satisfies(ctx.facts, ctx.graph.node_id("Noah Bell"), late.clue)  # Baumbach, 1969, fits it
    # A co-writer born a year earlier reads as "the early 1980s" and "the 1980s" too: no date tells them
    # apart, so the plan is refused with its reason rather than stated as if it did.
    ctx = context(*_co_writers("1982-01-10"), reject_dominant_answer=False)
    path = path_of(ctx, "Doll (film)", "Greta Lane", "Barnard College")
    plan = plan_question(ctx, path)
    assert plan.unresolved == 1 and structural_gate(ctx, path, plan)[0] == "multi_valued_hop"


def _notable_works():
    """A writer whose infobox lists two notable works (a selection: the world holds more), each with a date,
    a country and a publisher page: whatever tells the listed two apart may fit an unlisted third."""
    entities = [entity("Tabby Sands", "Person"), entity("Sam Sands", "Person"),
                entity("Carry (novel)", "Book", head=False), entity("Shining Hour", "Book", head=False),
                entity("Horror fiction", "Genre", head=False), entity("Doubleday", "Company", head=False),
                entity("Viking Press", "Company", head=False), entity("United States", "Country", head=False)]
    facts = [fact("Tabby Sands", "spouse", "Sam Sands"), fact("Sam Sands", "birthPlace", "Portland"),
             fact("Sam Sands", "notableWork", "Carry (novel)"), fact("Sam Sands", "notableWork", "Shining Hour"),
             fact("Carry (novel)", "publicationDate", "1974-04-05", "date"),
             fact("Shining Hour", "publicationDate", "1977-01-28", "date"),
             fact("Carry (novel)", "literaryGenre", "Horror fiction"),
             fact("Carry (novel)", "country", "United States"), fact("Shining Hour", "country", "United States"),
             fact("Carry (novel)", "publisher", "Doubleday"), fact("Shining Hour", "publisher", "Viking Press")]
    return entities, facts


def test_a_value_of_a_selection_list_is_never_singled_out():
    assert {"notableWork", "starring", "relative", "award"} <= set(gates.partial_lists())
    ctx = context(*_notable_works(), reject_dominant_answer=False)
    # Asked: "Name the notable work of the latter writer published in the mid-1970s" ('Salem's Lot is as
    # notable as Carrie and from 1975): refused before any plan, whatever the listed values' dates say.
    failed = path_gate(ctx, path_of(ctx, "Tabby Sands", "Sam Sands", "Carry (novel)"))
    assert failed[0] == "partial_list" and "hop 2 (notableWork)" in failed[1]
    # On the chain: "one of the notable works of X is a book from the United States whose publisher is
    # Doubleday": a page named or not, an unlisted work may fit it as well.
    path = path_of(ctx, "Sam Sands", "Carry (novel)", "Horror fiction")
    assert path_gate(ctx, path)[0] == "partial_list"
    plan = plan_question(ctx, path)
    assert plan.unresolved is None and plan_gate(ctx, path, plan) is None  # only the selection stops it
    # As membership, the relation still describes its subject: "a writer whose notable works include Carry".
    said = [a.modifier for a in describe.attributes(ctx, ctx.graph.node_id("Sam Sands"), 0, random.Random(0), True,
                                                     set(), set()) if a.relation == "notableWork"]
    assert sorted(said) == ["whose notable works include Shining Hour", "whose notable works include the novel Carry"]
    ctx = context([entity("Lone Writer", "Person"), entity("Only Book", "Book", head=False)],
                  [fact("Lone Writer", "notableWork", "Only Book")])
    (one,) = describe.attributes(ctx, ctx.graph.node_id("Lone Writer"), 0, random.Random(0), True, set(), set())
    assert one.modifier == "whose notable works include Only Book"  # one listed is not "the" notable work


def test_the_selection_table_agrees_with_dbpedia():
    ontology = load_ontology()
    table = gates.partial_lists()
    for relation, entry in table.items():
        prop = ontology.properties.get(relation)
        assert prop is not None and prop.is_object, relation  # a DBpedia object property ...
        assert not prop.functional, relation  # ... that may hold several values
        assert entry["why"], relation
    # Every object property whose DBpedia label says it lists a selection is in the table.
    selections = {name for name, prop in ontology.properties.items() if prop.is_object
                  and (prop.label.lower().startswith(("notable", "key person")) or prop.label == "known for")}
    assert selections and selections <= set(table), selections - set(table)


def _publishers(city: str):
    entities = [entity("Carry (novel)", "Book"), entity("Doubleday", "Company", head=False),
                entity(city, "City", head=False), entity("Sam Sands", "Person", head=False)]
    facts = [fact("Carry (novel)", "publisher", "Doubleday"), fact("Doubleday", "locationCity", city),
             fact(city, "populationTotal", "8804190", "number"), fact("Carry (novel)", "author", "Sam Sands")]
    return entities, facts


def test_an_american_publishers_city_is_a_default_guess():
    # "... was published by a company. This company is headquartered in a city. What is its population?":
    # a reader guesses New York City for the city, and the question reduces to its population.
    ctx = context(*_publishers("New York City"), reject_dominant_answer=False)
    why = gates.trivial_final_hop(ctx.facts, path_of(ctx, "Carry (novel)", "Doubleday", "New York City"))
    assert why and "locationCity of 'Doubleday'" in why
    path = path_of(ctx, "Carry (novel)", "Doubleday", "New York City", "8804190")
    assert gates.trivial_final_hop(ctx.facts, path)
    assert path_gate(ctx, path)[0] == "trivial_final_hop"  # the path alone decides it: never planned
    # A publisher elsewhere is no guess; nor is New York City as any company's city (the path's relation).
    ctx = context(*_publishers("Boston"), reject_dominant_answer=False)
    assert gates.trivial_final_hop(ctx.facts, path_of(ctx, "Carry (novel)", "Doubleday", "Boston", "8804190")) is None
    assert gates._trivial_from(ctx.graph, "locationCity", ctx.graph.node_id("Doubleday"), "distributor",
                               "New York City") is None


def test_an_occupation_the_path_implies_is_never_asked():
    # A film company's founder "is a film producer": the phrasebook marks occupation guessable (defect 7).
    entities = [entity("Amble Films", "Company"), entity("Kay Kent", "Person", head=False),
                entity("Film producer", "PersonFunction", head=False)]
    facts = [fact("Amble Films", "founder", "Kay Kent"), fact("Kay Kent", "occupation", "Film producer")]
    ctx = context(entities, facts, reject_dominant_answer=False)
    path = path_of(ctx, "Amble Films", "Kay Kent", "Film producer")
    assert gates.vague_answer(path) and "occupation" in gates.vague_answer(path)
    # An occupation list is a selection too (data/questions/partial_lists.toml): never a hop at all.
    assert path_gate(ctx, path)[0] == "partial_list"


def test_a_selection_list_rules_no_candidate_out():
    # "A person whose occupations include director": a founder listed as a producer may direct too, a film
    # whose lead actors leave someone out may still star them. Only a relation listed whole excludes.
    entities = [entity("Kay Kent", "Person"), entity("Lou Lane", "Person"), entity("Director", "PersonFunction", head=False),
                entity("Film producer", "PersonFunction", head=False), entity("Hill College", "University", head=False),
                entity("Dale College", "University", head=False)]
    facts = [fact("Kay Kent", "occupation", "Director"), fact("Lou Lane", "occupation", "Film producer"),
             fact("Kay Kent", "almaMater", "Hill College"), fact("Lou Lane", "almaMater", "Hill College"),
             fact("Dale College", "city", "Hill College")]
    ctx = context(entities, facts)
    lou = ctx.graph.node_id("Lou Lane")
    assert gates.satisfies(ctx.facts, lou, gates.Clue(position=0, attribute="occupation", object="Director"))
    assert not gates.holds(ctx.facts, lou, gates.Clue(position=0, attribute="occupation", object="Director"))
    assert not gates.satisfies(ctx.facts, lou, gates.Clue(position=0, attribute="almaMater", object="Dale College"))


def test_an_answer_written_in_the_name_its_hop_starts_from_is_trivial():
    # The second reading: "This person studied at a university ... In which city is this university located?"
    # -> Montreal, which "Université du Québec à Montréal" says; a reader who found the university reads it.
    entities = [entity("Denis Vale", "Person"), entity("Université du Québec à Montréal", "University", head=False),
                entity("Concordia University", "University", head=False), entity("Montreal", "City", head=False)]
    facts = [fact("Denis Vale", "almaMater", "Université du Québec à Montréal"),
             fact("Université du Québec à Montréal", "city", "Montreal"),
             fact("Denis Vale", "education", "Concordia University"), fact("Concordia University", "city", "Montreal")]
    ctx = context(entities, facts, reject_dominant_answer=False)
    why = gates.trivial_final_hop(ctx.facts, path_of(ctx, "Denis Vale", "Université du Québec à Montréal", "Montreal"))
    assert why and "share the name 'Montreal'" in why and "'Université du Québec à Montréal'" in why
    assert gates.trivial_final_hop(ctx.facts, path_of(ctx, "Denis Vale", "Concordia University", "Montreal")) is None
    # The name before a comma counts ("Austin, Texas" in "University of Texas at Austin"); a part of a word not.
    assert gates.name_shared("Austin, Texas", "University of Texas at Austin") == "Austin"
    assert gates.name_shared("Rome", "Romeo and Juliet") is None
    assert gates.name_shared("Mexico", "New Mexico State") == "Mexico"


def test_an_answer_sharing_a_name_with_any_entity_of_its_chain_is_trivial():
    """The fourth reading: Leeds, the location of Elland Road, two hops after Leeds United F.C.; Frank Nelson
    Doubleday, the founder of Doubleday (the company's name inside the answer's)."""
    entities = [entity("Jack Hale", "SoccerManager"), entity("Leeds United F.C.", "SoccerClub", head=False),
                entity("Elland Road", "Stadium", head=False), entity("Leeds", "City", head=False),
                entity("Carrie (novel)", "Book"), entity("Doubleday (publisher)", "Company", head=False),
                entity("Frank Nelson Doubleday", "Person", head=False)]
    facts = [fact("Jack Hale", "team", "Leeds United F.C."), fact("Leeds United F.C.", "ground", "Elland Road"),
             fact("Elland Road", "location", "Leeds"), fact("Carrie (novel)", "publisher", "Doubleday (publisher)"),
             fact("Doubleday (publisher)", "founder", "Frank Nelson Doubleday")]
    ctx = context(entities, facts, reject_dominant_answer=False)
    leeds = gates.trivial_final_hop(ctx.facts, path_of(ctx, "Jack Hale", "Leeds United F.C.", "Elland Road", "Leeds"))
    assert leeds and "'Leeds United F.C.'" in leeds and "share the name 'Leeds'" in leeds
    founder = gates.trivial_final_hop(ctx.facts, path_of(ctx, "Carrie (novel)", "Doubleday (publisher)",
                                                         "Frank Nelson Doubleday"))
    assert founder and "share the name 'Doubleday'" in founder
    # the same name is no leak of its own (a cycle is another gate's), nor is a name of two letters
    assert gates.name_shared("Leeds", "Leeds") is None and gates.name_shared("Al", "Al Pacino") is None


def test_a_town_answer_whose_distinctive_word_names_a_club_of_its_chain_is_trivial():
    """The fifth reading: Kingston upon Hull, where the ground of Hull City A.F.C. stands; the whole names share
    no name, the word "Hull" gives the town away. A venue answer is no town: "City of Manchester Stadium" after
    Manchester City F.C. is not read off the club's name, and words many place names hold do not count."""
    entities = [entity("Ray Dunn", "SoccerManager"), entity("Hull City A.F.C.", "SoccerClub", head=False),
                entity("MKM Stadium", "Stadium", head=False), entity("Manchester City F.C.", "SoccerClub", head=False),
                entity("City of Manchester Stadium", "Stadium", head=False)]
    facts = [fact("Ray Dunn", "team", "Hull City A.F.C."), fact("Hull City A.F.C.", "ground", "MKM Stadium"),
             fact("MKM Stadium", "location", "Kingston upon Hull"),  # no page: a town by the relation's class
             fact("Ray Dunn", "managerClub", "Manchester City F.C."),
             fact("Manchester City F.C.", "ground", "City of Manchester Stadium")]
    ctx = context(entities, facts, reject_dominant_answer=False)
    hull = gates.trivial_final_hop(ctx.facts, path_of(ctx, "Ray Dunn", "Hull City A.F.C.", "MKM Stadium",
                                                      "Kingston upon Hull"))
    assert hull and "'Hull City A.F.C.'" in hull and "share the name 'hull'" in hull
    assert gates.trivial_final_hop(ctx.facts, path_of(ctx, "Ray Dunn", "Manchester City F.C.",
                                                      "City of Manchester Stadium")) is None
    assert gates.place_word_shared("Stoke-on-Trent", "Stoke City F.C.") == "stoke"
    assert gates.place_word_shared("Newcastle upon Tyne", "Port Vale F.C.") is None
    assert gates.place_word_shared("Port Talbot", "Port Vale F.C.") is None  # "port" is many places' word


def test_an_occupation_the_hop_already_says_is_not_stated():
    # The second reading: "was directed by a person who worked as a film director" says the hop twice; the
    # same person may be described by another occupation ("whose occupations include screenwriter").
    entities = [entity("Long Film", "Film"), entity("Other Film", "Film"), entity("Cy Lane", "Person", head=False),
                entity("Bo Lane", "Person", head=False)]
    facts = [fact("Long Film", "director", "Cy Lane"), fact("Other Film", "director", "Bo Lane"),
             fact("Cy Lane", "occupation", "Film director"), fact("Cy Lane", "occupation", "Screenwriter"),
             fact("Bo Lane", "occupation", "Film director"), fact("Long Film", "starring", "Bo Lane"),
             fact("Cy Lane", "birthDate", "1961-05-02", "date")]
    ctx = context(entities, facts, reject_dominant_answer=False, attributes_per_entity=1)
    options = describe.attributes(ctx, ctx.graph.node_id("Cy Lane"), 1, random.Random(0), True, set(), set())
    said = {o.clue.object: describe.says_hop_role("director", o) for o in options if o.relation == "occupation"}
    assert said == {"Film director": True, "Screenwriter": False}
    assert not any(describe.says_hop_role(None, o) or describe.says_hop_role("spouse", o) for o in options)
    path = path_of(ctx, "Long Film", "Cy Lane", "1961-05-02")
    plan = plan_question(ctx, path)
    assert plan.attributes[1] and all(a.clue.object != "Film director" for a in plan.attributes[1])
    assert "film director" not in write_template(ctx, path, plan).text.casefold()


def test_an_album_produced_by_a_record_producer_does_not_say_it_twice():
    # The music cluster: "an album ... was produced by a person whose occupations include record producer".
    entities = [entity("Loud Album", "Album"), entity("Al Bee", "Person", head=False)]
    facts = [fact("Loud Album", "producer", "Al Bee"), fact("Al Bee", "occupation", "Record producer"),
             fact("Al Bee", "occupation", "Audio engineer"), fact("Al Bee", "birthDate", "1962-07-22", "date")]
    ctx = context(entities, facts, reject_dominant_answer=False, attributes_per_entity=1)
    options = describe.attributes(ctx, ctx.graph.node_id("Al Bee"), 1, random.Random(0), True, set(), set())
    said = {o.clue.object: describe.says_hop_role("producer", o) for o in options if o.relation == "occupation"}
    assert said == {"Record producer": True, "Audio engineer": False}


def test_an_answer_its_demonym_gives_away_leaks():
    # The second reading: "... directed by a Mexican filmmaker ... In which country is this university?" -> Mexico.
    entities = [entity("Alfonso Vale", "Person"), entity("Vale University", "University", head=False),
                entity("Mexico", "Country", head=False), entity("Canada", "Country", head=False)]
    facts = [fact("Alfonso Vale", "almaMater", "Vale University"), fact("Vale University", "country", "Mexico")]
    ctx = context(entities, facts, reject_dominant_answer=False)
    path = path_of(ctx, "Alfonso Vale", "Vale University", "Mexico")
    plan = plan_question(ctx, path)
    said = "A Mexican filmmaker studied at a university. In which country is this university?"
    assert text_gate(ctx, path, plan, said, []) == ("answer_leak", "Mexican")
    assert text_gate(ctx, path, plan, said.replace("Mexican", "Canadian"), []) is None
