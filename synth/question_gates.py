"""The gates a question passes, in order; each failing gate is a counted rejection reason (`GATES`).

`path_gate` (the path alone, before planning), `plan_gate` (what the plan states, before any text),
`text_gate` (the written text, either writer's) and `faithfulness_gate` (an LLM's text) apply the
graph-side checks of `synth.gates` and the text-side ones of `synth.text_gates` to a question's context
and plan; they stand apart from `synth.gates` because they read `synth.describe`, which builds on it.

- `unreviewed_relation`: a hop's property has no reviewed phrasebook entry (data/ontology/phrasebook.toml),
  so no question text for it was ever read by a person ("the merged with of X");
- `list_answer`: a free-text answer is a list ("civil servant, politician"): a multi-valued fact that
  extraction left as one string, not one answer;
- `partial_list`: a hop over a relation whose infobox list is a selection (`data/questions/partial_lists.toml`:
  notable works, lead actors, relatives, awards): the hop singles one value out ("the notable work of X", "one
  of the notable works of X is a novel from the United States published in the mid-1970s"), which is unique
  among the listed values only; such a relation is stated only as membership, as an attribute ("a writer
  whose notable works include Carrie");
- `vague_answer`: a one-word lower-case string answer, an infobox keyword rather than a fact;
- `answer_leak`: the answer, one of its aliases or its demonym ("Mexican" of Mexico) appears in the question text;
- `evidence_leak`: the question copies a long n-gram of a hop's evidence sentence;
- `intermediate_leak`: an obfuscated intermediate entity is named anyway (the question loses a hop);
- `start_leak`: the start entity is described, but the text names it anyway;
- `fewer_hops`: the answer is reachable from the start entity in fewer hops than the question asks;
- `reversed_place`: a hop says a place lies in another that the graph says lies in it (an infobox listing
  a city's boroughs as its regions), so the question would state a false containment;
- `start_not_unique`: another entity fits every attribute the question describes the start entity by;
- `multi_valued_hop`: an intermediate hop leads to several objects (pages, objects without a page and
  literals alike: the graph is an open world) that the question's clues do not tell apart;
- `alternative_answer`: the final hop, with the clues (or a tree question's branches) on the answer,
  reaches more than one object;
- `identifying_clue`: what the text says of an entity it does not name (the start, an intermediate, the
  answer's branches) is a fact whose one object picks the entity out in the world ("a country whose capital
  is London"): one search finds it, so the chain before it is never needed (the ontology's
  inverse-functional properties; the planner avoids such facts where others single the entity out), or
  a clue whose object is written with the entity's own name or demonym ("a country whose currency is the
  Canadian dollar", "a film based on Dune"): the words name what they were to hide;
- `bare_run`: more than `max_bare_run` intermediates in a row are stated by their type alone ("was directed
  by a person. This person studied at a university. This university is located in a city."): nothing along
  such a run checks that the chain is still on the gold path, so a start that fits another entity of the world
  (uniqueness beyond the slice is estimated, not proven) carries the question to another answer unnoticed,
  and the text reads as a template (the fifth independent reading, docs/QUESTION_REVIEW.md);
- `tree_branch`: a tree question's branch does not hold for the answer, or is not needed to single it out;
- `trivial_final_hop`: the answer follows in one well-known hop (`data/questions/trivial_hops.toml`: a
  country's capital, currency or language, a place's country or region) from the entity the final
  description pins down (the path alone: checked before planning) or from an entity the text names, so the
  final hop is answered from memory;
- `description_search`: the description of an intermediate, searched alone in the agents' index, lists that
  entity in the top `description_search_top_k` (the pages the description names left out of the ranking),
  so one search skips the chain before it (k is `one_search_top_k` unless set: the results an agent reads);
  the start's description must not list the start in the top `start_description_search_top_k` (1: finding
  the start is the solve's first step, but not by one search of its description);
- `description_answer`: a page that one search of such a description puts before a reader (its top k results
  and the pages it names) states the answer, so the hops before that page are decoration;
- `untimed_hop`: a hop over a relation that holds several values over time (not single-valued in the
  ontology) whose fact carries a start or end date, stated without its time: the other values, missing
  from the slice, would answer it too ("the prime minister of a French president");
- `relation_answer_cap`: one answer already fills its share of the questions that end in the same
  relation (applied by the stage; `relation_answer_share`, from `relation_answer_min` such questions);
- `not_unique_in_world`: the start's description may fit many entities of the whole wiki (a census of a
  full dump estimates how many; without one, it names no page that is no hub: no narrow anchor,
  data/questions/broad_anchors.toml; a described start with no such anchor among its facts is rejected
  before planning);
- `famous`: the start or the answer is among the graph's most linked-to pages, and the seeded draw that
  keeps such paths at `famous_keep` dropped it (weights the questions toward the long tail);
- `dominant_answer`: the answer is the most common object of its final relation across the graph (a
  guess, not a search, would find it);
- `answer_cap`: one answer already fills its share of the run (applied by the stage);
- `one_search`: the question text as one `search` in the agents' environment shows the answer or the
  answer's page in its top k;
- `missing_as_of`: a fact on the path can change, but the text states no as-of date;
- `unfaithful`: an LLM-written text does not express the plan it was given (the start entity, each
  intermediate's description, the relations of the chain, above all the one asked for), so the gold
  path may not answer it ("What is the name of your company?");
- `shortcut`: a model answers correctly without tools in any of n attempts (async, LLM configured); when
  none of its replies is usable the question falls back to the offline gates (`one_search`), counted as
  `llm:shortcut-check:fallbacks` and marked `shortcut:offline` on the question;
- `duplicate`: applied across the whole run by the stage (same text, or same start/relations/answer).
"""

from __future__ import annotations

from graph.csr import LITERAL_PREFIX, split_literal_key
from knowledge.ontology import load_ontology
from schemas.questions import Path
from synth import describe, gates, text_gates
from synth.environment import SearchEnvironment
from synth.phrasing import (
    answer_form,
    date_variants,
    is_list_value,
    number_variants,
    parse_date,
    reviewed,
    type_noun,
)
from synth.question_plan import (
    Plan,
    QuestionContext,
    anchorless_from,
    described_as,
    kept,
    named_anchor,
    seeded_draw,
    start_described,
    world_unique_reason,
)

GATES = ("unreviewed_relation", "list_answer", "partial_list", "vague_answer", "fewer_hops", "reversed_place", "start_not_unique", "multi_valued_hop", "alternative_answer", "bare_run",
         "tree_branch", "identifying_clue", "clue_shortcut",
         "not_unique_in_world", "trivial_final_hop", "description_search", "description_answer", "untimed_hop", "famous",
         "dominant_answer", "answer_leak", "evidence_leak", "intermediate_leak", "start_leak", "missing_as_of",
         "one_search", "unfaithful", "shortcut", "duplicate", "answer_cap", "relation_answer_cap")


def _answer_unit(ctx: QuestionContext, path: Path) -> str | None:
    node = gates.answer_node(ctx.facts, path) if path.answer_type in ("number", "quantity") else None
    return split_literal_key(ctx.graph.keys[node])[2] if node is not None else None


def written_answer(ctx: QuestionContext, path: Path) -> str:
    """The answer as a person writes it ("The Shining", "81,799,600", "3 September 1969"; `answer_form`)."""
    return answer_form(path.answer, path.answer_type, path.hops[-1].relation, _answer_unit(ctx, path))


def answer_aliases(ctx: QuestionContext, path: Path) -> list[str]:
    """Other accepted forms of the answer: its raw value (the page title, the ISO date, the bare number, which
    the graph and the index know), redirect titles and the bare title for entities, date and number surface
    forms for literals; never the written answer itself. A place answer also accepts the places its value
    was written within when they are pages of no hub class ("[[Westminster]], [[London]]": born in London is
    right too; born in the German Empire says too little)."""
    last = path.hops[-1]
    if path.answer_type == "entity":
        info = ctx.entities.get(path.answer)
        within = [title for q in last.qualifiers if q.key == "within" and _narrow_page(ctx, q.value)
                  for title in (q.value, q.value.split(" (")[0])]
        forms = [*(info.aliases if info else []), path.answer.split(" (")[0], *within]
    elif path.answer_type == "date":
        forms = date_variants(last.value or path.answer)
    elif path.answer_type in ("number", "quantity"):
        forms = number_variants(last.value or path.answer, _answer_unit(ctx, path))
    else:
        forms = []
    written = written_answer(ctx, path)
    return [f for f in dict.fromkeys([path.answer, *forms]) if f and f != written]


def own_names(ctx: QuestionContext, title: str) -> list[str]:
    """The names an entity goes by in a text: its bare title, its redirects and its demonym (the reviewed
    table's, `attributes.toml [demonyms]`, and the graph's `demonym` facts)."""
    info = ctx.entities.get(title)
    demonyms = [describe.attribute_table()["demonyms"].get(title)]
    node = ctx.facts.node(title)
    relation = ctx.facts.relation("demonym")
    if node is not None and relation is not None:
        demonyms += [split_literal_key(ctx.graph.keys[o])[1] for o in ctx.facts.objects(node, relation)
                     if ctx.graph.keys[o].startswith(LITERAL_PREFIX)]
    return [n for n in dict.fromkeys([title.split(" (")[0].split(",")[0], *(info.aliases if info else []), *demonyms])
            if n and len(n) >= 3]


def identifying_detail(ctx: QuestionContext, path: Path, clues: list[gates.Clue]) -> str | None:
    """Why a clue picks its entity out in the world (`gates.identifying_clue`) or writes its name
    (`self_named_clue`), or None: the `identifying_clue` gate, of a whole plan and of a start alone."""
    return gates.identifying_clue(ctx.facts, clues) or self_named_clue(ctx, path, clues)


def self_named_clue(ctx: QuestionContext, path: Path, clues: list[gates.Clue]) -> str | None:
    """Why a clue gives away an entity by writing its name, or None: the clue's object holds one of the
    described entity's own names (`own_names`) as whole words ("Canadian dollar" of Canada, "Dune" the novel of
    Dune the film), so the description names what it stands in for; or the clue's object is a word of the name
    of the entity its hop comes from ("a football stadium in Burnley" after Burnley F.C.: the sixth reading), so
    one search of the clue finds the entity without that hop, or the clue gives the entity before it away."""
    for clue in clues:
        if not clue.object:
            continue
        said = split_literal_key(clue.object)[1] if clue.object.startswith(LITERAL_PREFIX) else clue.object
        words = kept(ctx.name_cache, ("words", said), gates.whole_words, said.split(" (")[0])
        title = path.nodes[clue.position]
        names = kept(ctx.name_cache, ("names", title), _own_compared, ctx, title)
        for name, compared in names:
            if compared in words:
                return (f"{clue.attribute} {said!r} writes the name {name!r} of the entity at position "
                        f"{clue.position} ({title})")
        if clue.position and (shared := gates.name_shared(said, path.nodes[clue.position - 1])) is not None:
            return (f"{clue.attribute} {said!r} of the entity at position {clue.position} ({title}) shares the name "
                    f"{shared!r} with the entity before it ({path.nodes[clue.position - 1]})")
    return None


def _own_compared(ctx: QuestionContext, title: str) -> list[tuple[str, str]]:
    return [(name, gates.whole_words(name)) for name in own_names(ctx, title)]


def _narrow_page(ctx: QuestionContext, title: str) -> bool:
    """Whether a title is a page of the run typed by a class that is no hub (`gates.broad_class`)."""
    info = ctx.entities.get(title)
    cls = load_ontology().find_class(info.type or "") if info else None
    return cls is not None and gates.broad_class(cls) is None


def path_gate(ctx: QuestionContext, path: Path) -> tuple[str, str] | None:
    """Gates on the path alone, checked before any planning: a vague answer, an answer that a prior over the
    final relation would guess, a final hop of common knowledge from the entity it starts from, a described
    start that no fact of it can anchor in the world (`anchorless_from`; every plan would fail `plan_gate`
    or `start_gate` on either: this spares planning them), a shortcut through the graph (last: a search of
    the graph around the start costs more than the lookups before it)."""
    if (relation := next((h.relation for h in path.hops if not reviewed(h.relation)), None)) is not None:
        return "unreviewed_relation", f"no reviewed phrasebook entry for {relation}"
    if is_list_value(path.answer, path.answer_type):
        return "list_answer", f"a list, not one answer: {path.answer!r}"
    if (detail := gates.partial_list(path)) is not None:
        return "partial_list", detail
    if (detail := gates.vague_answer(path)) is not None:
        return "vague_answer", detail
    if ctx.config.reject_dominant_answer and (detail := gates.dominant_answer(ctx.facts, path)) is not None:
        return "dominant_answer", detail
    if (detail := famous(ctx, path)) is not None:
        return "famous", detail
    if (detail := gates.trivial_final_hop(ctx.facts, path)) is not None:
        return "trivial_final_hop", detail
    if start_described(ctx, path) and anchorless_from(ctx, path) == 1:
        return "not_unique_in_world", f"no fact any plan may state of the start ({path.start}) is a narrow named anchor"
    if (detail := gates.fewer_hops(ctx.facts, path)) is not None:
        return "fewer_hops", detail
    if (detail := gates.reversed_place(ctx.facts, path, describe.attribute_table()["places"])) is not None:
        return "reversed_place", detail
    return None


def famous(ctx: QuestionContext, path: Path) -> str | None:
    """The long-tail weighting: a path whose start or answer is among the graph's most linked-to pages (the
    `fame_quantile` of in-links) is kept with probability `famous_keep` (a seeded draw per path), since a
    strong model answers questions about heads of government and blockbusters from memory."""
    config = ctx.config
    if config.famous_keep >= 1.0 or not (ends := gates.famous_ends(ctx.facts, path, config.fame_quantile)):
        return None
    if seeded_draw(config, path, "fame") < config.famous_keep:
        return None
    return f"{' and '.join(ends)} among the top {1 - config.fame_quantile:.0%} of pages by in-links"


def structural_gate(ctx: QuestionContext, path: Path, plan: Plan) -> tuple[str, str] | None:
    """Gates that need no text: checked before a writer spends an LLM call."""
    return path_gate(ctx, path) or plan_gate(ctx, path, plan)


def plan_gate(ctx: QuestionContext, path: Path, plan: Plan) -> tuple[str, str] | None:
    """Open-world uniqueness of what the plan states: the described start, every hop, a tree's branches."""
    if plan.unresolved is not None:
        gate = "start_not_unique" if plan.unresolved == 0 else "multi_valued_hop"
        failed = gates.unique_chain(ctx.facts, path, plan.clues, plan.start_described)
        return failed or (gate, f"no attributes single out position {plan.unresolved} ({path.nodes[plan.unresolved]})")
    if (failed := gates.unique_chain(ctx.facts, path, plan.clues, plan.start_described)) is not None:
        return failed
    if (detail := bare_run(ctx, path, plan)) is not None:
        return "bare_run", detail
    if plan.branching and (detail := gates.tree_branches(ctx.facts, path, [b.clue for b in plan.branches])):
        return "tree_branch", detail
    if (detail := identifying_detail(ctx, path, plan.clues)) is not None:
        return "identifying_clue", detail
    if (detail := gates.clue_shortcut(ctx.facts, path, plan.clues)) is not None:
        return "clue_shortcut", detail
    if plan.start_described and ctx.config.require_named_anchor and (detail := world_unique_start(ctx, plan)):
        return "not_unique_in_world", detail
    if (detail := gates.trivial_from_named(ctx.facts, path, named_entities(path, plan))) is not None:
        return "trivial_final_hop", detail
    if 0 in plan.tree_positions and (detail := gates.start_intersection(
            ctx.facts, [c for c in plan.clues if c.position == 0], ctx.facts.path_ids(path)[0])):
        return "tree_branch", detail
    return None


def bare_run(ctx: QuestionContext, path: Path, plan: Plan) -> str | None:
    """Why the plan leaves more than `max_bare_run` intermediates in a row with no stated fact, or None."""
    limit = ctx.config.max_bare_run
    if limit is None:
        return None
    described = {clue.position for clue in plan.clues if clue.attribute}
    longest, run = [], []
    for position in range(1, len(path.nodes) - 1):
        run = [] if position in described else [*run, path.nodes[position]]
        longest = run if len(run) > len(longest) else longest
    if len(longest) <= limit:
        return None
    return f"{len(longest)} intermediates in a row are stated by their type alone ({', '.join(longest)}); at most {limit}"


def start_gate(ctx: QuestionContext, path: Path, start: Plan,
               environment: SearchEnvironment | None) -> tuple[str, str] | None:
    """The gates the described start alone fails (`start` is `plan_question(..., start_only=True)`): a whole
    plan describing the start so fails `plan_gate` or `search_gate` too, so a later attempt is turned down
    before its other entities are described."""
    if not start.start_described:
        return None
    if start.unanchored:
        return "not_unique_in_world", f"no fact this attempt may state of the start ({path.start}) is a narrow named anchor"
    if start.unresolved == 0:
        return "start_not_unique", f"no attributes single out the start ({path.start})"
    if (detail := identifying_detail(ctx, path, start.clues)) is not None:
        return "identifying_clue", detail
    if ctx.config.require_named_anchor and (detail := world_unique_start(ctx, start)):
        return "not_unique_in_world", detail
    return description_gates(ctx, path, [(0, path.start, described_as(start, 0), named_anchors(start, 0))],
                             environment)


def description_gates(ctx: QuestionContext, path: Path, descriptions: list[tuple[int, str, str, list[str]]],
                      environment: SearchEnvironment | None) -> tuple[str, str] | None:
    """`description_search`, then `description_answer`, on (position, title, description, named anchors) of
    the entities the question does not name: the start's read to `start_description_search_top_k`, the
    others' to `description_search_top_k`."""
    if environment is None:
        return None
    config = ctx.config
    by_k: dict[int, list[tuple[str, str, list[str]]]] = {}
    for position, *described in descriptions:
        top_k = config.start_description_search_top_k if position == 0 else config.description_search_top_k
        if top_k:
            by_k.setdefault(top_k, []).append(tuple(described))
    for top_k, group in by_k.items():
        if (detail := text_gates.description_search(environment, group, top_k)) is not None:
            return "description_search", detail
    forms = [written_answer(ctx, path), *answer_aliases(ctx, path)] if by_k else []
    for top_k, group in by_k.items():
        if (detail := text_gates.description_answer(environment, group, path.answer, forms, top_k)) is not None:
            return "description_answer", detail
    return None


def world_unique_start(ctx: QuestionContext, plan: Plan) -> str | None:
    """Why the start's description may fit many entities of the whole wiki, however few of the slice, or None.

    With a census of a full dump (`synth.census`) or `world_prior` (data/questions/world_holders.toml: an
    actor's dozens of films, a publisher's thousands of books), the estimate `question_plan.world_fits` must stay
    within `census_max_fits`; otherwise the description must name a page that is no hub. Dates, numbers and
    keywords alone fit thousands (`question_plan.world_unique_reason`)."""
    return world_unique_reason(ctx, [c for c in plan.clues if c.position == 0])


def named_anchors(plan: Plan, position: int) -> list[str]:
    """The pages the description of the entity at `position` names (its facts' objects)."""
    return [c.object for c in plan.clues if c.position == position and named_anchor(c)]


def named_entities(path: Path, plan: Plan) -> list[str]:
    """The entities a question's text names: the start unless it is described, every clue's object."""
    named = [] if plan.start_described else [path.start]
    return named + [c.object for c in plan.clues if c.object and not c.object.startswith(LITERAL_PREFIX)]


def untimed_hop(path: Path, plan: Plan, text: str) -> str | None:
    """Why a hop over a relation with several values over time is stated without its time, or None.

    A fact with a start or end date over a relation the ontology does not call single-valued (an office's
    prime minister, a spouse) held other values at other times, which a slice may lack: stated without its
    time it is not unique in the world. Its time is the as-of date for a fact still running, a year of its
    start or end for an ended one."""
    ontology = load_ontology()
    for position, hop in enumerate(path.hops):
        dates = {q.key: q.value for q in hop.qualifiers if q.key in ("start", "end")}
        prop = ontology.properties.get(hop.relation)
        if not dates or (prop is not None and prop.functional):
            continue
        if position in plan.ended:
            years = {str(parsed[0]) for value in dates.values() if (parsed := parse_date(value))}
            if not any(year in text for year in years):
                return f"hop {position + 1} ({hop.relation}) ended; the text states neither its start nor its end"
        elif plan.as_of_text is None or f"as of {plan.as_of_text}".lower() not in text.lower():
            return f"hop {position + 1} ({hop.relation}) held other values over time; the text states no as-of date"
    return None


def search_gate(ctx: QuestionContext, path: Path, plan: Plan,
                environment: SearchEnvironment | None) -> tuple[str, str] | None:
    """The description shortcuts before any text: every description of an entity the question does not name
    (the start, each intermediate), searched alone in the agents' index, must list neither that entity nor a
    page stating the answer in the top k results (`description_gates`)."""
    descriptions = [(p, path.nodes[p], described_as(plan, p), named_anchors(plan, p)) for p in sorted(plan.nouns)
                    if p < len(path.nodes) - 1 and (p or plan.start_described)
                    and not class_noun_only(ctx, path, plan, p)]
    return description_gates(ctx, path, descriptions, environment)


def class_noun_only(ctx: QuestionContext, path: Path, plan: Plan, position: int) -> bool:
    """Whether the entity at `position` is described by its class noun alone ("was preceded by a television
    series"): that states nothing a search could find it by in the world, only the hop does; in a slice with
    few pages of its class the search would still list it (two series in a 27-page export)."""
    info = ctx.entities.get(path.nodes[position])
    return (not plan.attributes.get(position) and info is not None
            and plan.nouns.get(position) == type_noun(info.type) != "entity")


def text_gate(ctx: QuestionContext, path: Path, plan: Plan, text: str, aliases: list[str],
              environment: SearchEnvironment | None = None) -> tuple[str, str] | None:
    """Gates on the written text (either engine's): leaks, the as-of date a changeable fact needs, and the
    retrieval shortcut (one search in the agents' environment)."""
    demonym = describe.attribute_table()["demonyms"].get(path.answer)  # "a Mexican filmmaker" ... -> Mexico
    if (form := text_gates.answer_leak(text, path.answer, [*aliases, *([demonym] if demonym else [])])) is not None:
        return "answer_leak", form
    # Evidence sentences of the hops, and the lead sentences of the intermediates (a writer that copies
    # a long stretch of either hands the searcher a direct hit).
    evidence = [ctx.graph.relations["evidence"][int(i)].as_py() for i in _edge_rows(ctx, path)]
    evidence += [ctx.entities[t].description for t in path.nodes[1:-1] if t in ctx.entities]
    if (gram := text_gates.evidence_leak(text, evidence, ctx.config.leak_ngram)) is not None:
        return "evidence_leak", gram
    if (name := text_gates.intermediate_leak(text, path.nodes[1:-1])) is not None:
        return "intermediate_leak", name
    if plan.start_described and (name := text_gates.intermediate_leak(text, [path.start])) is not None:
        return "start_leak", name
    if plan.as_of_text and f"as of {plan.as_of_text}".lower() not in text.lower():
        return "missing_as_of", f"a fact can change but the text does not say 'As of {plan.as_of_text}'"
    if (detail := untimed_hop(path, plan, text)) is not None:
        return "untimed_hop", detail
    top_k = ctx.config.one_search_top_k
    if environment is not None and top_k and (
            found := text_gates.one_search(environment, text, path.answer, aliases, top_k)) is not None:
        return "one_search", found
    return None


def faithfulness_gate(path: Path, plan: Plan, text: str) -> tuple[str, str] | None:
    """An LLM's text must say what its prompt gave it: the start (its name, or its description when it is
    described), each intermediate's description, the chain."""
    start = described_as(plan, 0) if plan.start_described else path.start.split(" (")[0]
    mentions = [("the start entity", start)]
    mentions += [(f"entity {p}", described_as(plan, p)) for p in range(1, len(path.nodes) - 1) if p in plan.nouns]
    mentions += [("an answer constraint", branch.predicate) for branch in plan.branches]
    if (detail := text_gates.unfaithful(text, mentions, [hop.relation for hop in path.hops])) is not None:
        return "unfaithful", detail
    return None


def _edge_rows(ctx: QuestionContext, path: Path) -> list[int]:
    graph, rows = ctx.graph, []
    for hop, tail in zip(path.hops, path.nodes[1:], strict=True):
        head, relation = graph.node_id(hop.head), graph.relation_id(hop.relation)
        if head is None or relation is None:
            continue
        for edge in range(graph.indptr[head], graph.indptr[head + 1]):
            if graph.rel[edge] == relation and graph.label(graph.dst[edge]) == tail:
                rows.append(int(graph.edge_row[edge]))
    return rows
