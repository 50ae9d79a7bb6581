"""Describe an entity without naming it: the facts a question may state about it, chosen until the graph
proves they single it out among the candidates it competes with.

A description is a noun ("a Canadian filmmaker", checked by its coarse type) plus attributes: a date
fact stated as a period ("born in the late 1960s", checked by the years a reader takes it to mean), a place it lies in or is based in ("in Ireland"),
or another relation with its object named ("whose distributor is Warner Bros."). Which date and place
relations qualify, and how they read, is data (`data/questions/attributes.toml`). Candidates come from
the caller: the objects a hop reaches, or for an unnamed start entity every entity the graph shows
holding the anchor fact (`gates.described_candidates`). Every attribute is also a `gates.Clue`, so the
gates re-check exactly what the text states.
"""

from __future__ import annotations

import functools
import random
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from graph.csr import LITERAL, LITERAL_PREFIX, split_literal_key
from ground.io import stable_hash
from knowledge.ontology import load_ontology
from knowledge.phrasebook import Entry
from synth import gates
from synth.phrasing import (
    as_common_noun,
    date_periods,
    display_title,
    has_ended,
    is_mutable,
    is_work,
    parse_date,
    phrase,
    reviewed,
    with_article,
)

ATTRIBUTES_FILE = Path(__file__).resolve().parents[1] / "data" / "questions" / "attributes.toml"


@functools.cache
def attribute_table() -> dict[str, dict[str, dict[str, str]]]:
    """{"dates": {relation: {"modifier", "predicate"}}, "places": {...}} from the committed table."""
    with ATTRIBUTES_FILE.open("rb") as handle:
        return tomllib.load(handle)


@dataclass(frozen=True)
class Attribute:
    """One fact of a described entity as the text states it, and the clue that checks it."""

    relation: str
    kind: str  # "date", "place" or "relation"
    modifier: str  # after a noun: "born in the early 1950s", "in Ireland", "whose director is X"
    predicate: str  # after a subject: "was born in the early 1950s", "is in Ireland", "has X as its director"
    clue: gates.Clue
    obfuscation: str | None = None
    several: str = ""  # the object's name, when it is one of several of its relation ("whose genres include X"):
    # a description may state two of them, which read as one clause ("whose genres include X and Y")

    @functools.cached_property
    def name(self) -> str:
        """`_object_name`, read once: every plan's filters read it again."""
        return _object_name(self.clue)


ORDER = {"date": 0, "place": 1, "relation": 2}


def attributes(ctx, node: int, position: int, rng: random.Random, person: bool,
               skip_relations: set[str], skip_labels: set[str], noun: str | None = None,
               hop_relation: str | None = None, lead: str | None = None) -> list[Attribute]:
    """Facts of the node usable as attributes, in a seeded random order: each object of a relation (the
    choice keeps at most one per relation, or two of several), one date per date relation, offered as every
    period that holds it (a third of a decade, a decade: `phrasing.date_periods`) so that the one that tells
    the candidates apart can be chosen; its clue holds the years a reader takes the period to mean.

    Relations in `skip_relations` (the hops into and out of the node) and objects in `skip_labels` (the
    path's nodes) are left out: stating them would give a hop away. An entity fact is offered when the
    phrasebook has a reviewed entry for its relation; a name an infobox gives as plain text ("members = Fozzi") counts as an
    entity when its property's range is an entity class. The facts are read once per node and context
    (`ctx.attribute_cache`); only the order is drawn anew.

    Given the `noun` the node is described by, facts that only restate it (`restates`) or the role the hop
    into the node (`hop_relation`) already says (`says_hop_role`) are left out, and with the node's `lead`
    sentence those it states (`copies_lead`), judged once per node, noun, hop and lead (`_kept`); the order
    is drawn over all the node's facts, as if they were shuffled, then left out.
    """
    options = offered(ctx, node, position, person, skip_relations, skip_labels)
    order = list(range(len(options)))
    rng.shuffle(order)  # the draws of shuffling `options` itself
    if noun is None:
        return [options[i] for i in order]
    kept = _kept(ctx, options, noun, hop_relation, lead)
    return [options[i] for i in order if kept[i]]


def _kept(ctx, options: tuple[Attribute, ...], noun: str, hop_relation: str | None,
          lead: str | None) -> tuple[bool, ...]:
    """Whether each of a node's `offered` facts neither restates `noun`, nor says the hop's role, nor (given)
    copies the lead sentence; kept beside the facts in `ctx.attribute_cache` (the entry holds the facts
    themselves, so their id names no other tuple while it lasts)."""
    key = ("kept", id(options), noun, hop_relation, lead)
    found = ctx.attribute_cache.get(key)
    if found is None or found[0] is not options:
        if len(ctx.attribute_cache) >= MAX_CACHED:
            ctx.attribute_cache.clear()
        verdicts = tuple(not restates(noun, o) and not says_hop_role(hop_relation, o)
                         and not (lead is not None and copies_lead(lead, o)) for o in options)
        found = ctx.attribute_cache[key] = (options, verdicts)
    return found[1]


def offered(ctx, node: int, position: int, person: bool, skip_relations: set[str],
            skip_labels: set[str]) -> tuple[Attribute, ...]:
    """`attributes` in the graph's order, read once per node and context: every description of the node
    chooses among these."""
    key = (node, position, person, frozenset(skip_relations), frozenset(skip_labels))
    if (found := ctx.attribute_cache.get(key)) is None:
        if len(ctx.attribute_cache) >= MAX_CACHED:
            ctx.attribute_cache.clear()
        found = ctx.attribute_cache[key] = _attributes(_offers(ctx, node, position, person), skip_relations,
                                                       skip_labels)
    return found


MAX_CACHED = 100_000  # described nodes kept per context before the cache starts afresh


@dataclass(frozen=True)
class _Offer:
    """What one edge of a node offers as attributes, whichever path describes the node."""

    relation: str
    label: str  # the object's label
    date: bool  # a date fact: one per relation, offered at every fuzzing level (`attributes`)
    attributes: tuple[Attribute, ...]  # empty when the edge states nothing a description may say


def _attributes(offers: tuple[_Offer, ...], skip_relations: set[str],
                skip_labels: set[str]) -> tuple[Attribute, ...]:
    """The attributes a path may state of a node: its offers without the path's relations and labels, one date
    per date relation, at most `MAX_OPTIONS` objects of a relation."""
    found: dict[str, list[Attribute]] = {}
    for offer in offers:
        relation = offer.relation
        if (relation in skip_relations or offer.label in skip_labels
                or len(found.get(relation, ())) >= MAX_OPTIONS):
            continue
        if offer.date:
            if relation not in found and offer.attributes:
                found[relation] = list(offer.attributes)
        elif offer.attributes:
            found.setdefault(relation, []).extend(offer.attributes)
    return tuple(option for relation in found.values() for option in relation)


def _offers(ctx, node: int, position: int, person: bool) -> tuple[_Offer, ...]:
    """Every edge's `_Offer`, read once per node and context (`ctx.offer_cache`): the paths through a node
    differ only in what they leave out."""
    key = (node, position, person)
    if (found := ctx.offer_cache.get(key)) is None:
        if len(ctx.offer_cache) >= MAX_CACHED:
            ctx.offer_cache.clear()
        found = ctx.offer_cache[key] = tuple(_edge_offers(ctx, node, position, person))
    return found


def _edge_offers(ctx, node: int, position: int, person: bool) -> Iterator[_Offer]:
    graph, table = ctx.graph, attribute_table()
    who, its = ("who", "their") if person else ("that", "its")
    work = is_work(graph.entity_type[node])
    objects_of = Counter(graph.rel[graph.indptr[node] : graph.indptr[node + 1]].tolist())  # distinct in the CSR
    current_of = functools.cache(lambda relation: _current_objects(ctx, node, relation))  # once per relation
    for edge in range(graph.indptr[node], graph.indptr[node + 1]):
        relation = graph.relation_names[graph.rel[edge]]
        obj = int(graph.dst[edge])
        label = graph.label(obj)
        clue = functools.partial(gates.Clue, position=position, attribute=relation)
        offered: tuple[Attribute, ...] = ()
        if relation in table["dates"] and graph.kind[obj] == LITERAL:
            value_type, value, _ = split_literal_key(graph.keys[obj])
            parsed = parse_date(value) if value_type == "date" else None
            if parsed and parsed[0] > 0:
                forms = table["dates"][relation]
                offered = tuple(
                    Attribute(relation, "date", forms["modifier"].format(p=period, who=who),
                              forms["predicate"].format(p=period), clue(years=years), f"date:{value}->{period}")
                    for period, years in date_periods(parsed[0]))
            yield _Offer(relation, label, True, offered)
            continue
        if graph.kind[obj] == LITERAL and not _named_value(graph, obj, relation):
            pass
        elif relation in table["places"]:
            # Not when the infobox reverses containment (a city listing its boroughs as its regions).
            if not (gates.lies_in(graph, obj, node, table["places"])
                    or objects_of[graph.rel[edge]] > gates.MAX_CONTAINERS):
                forms, name = table["places"][relation], display_title(label)
                if work and relation in table["work_places"]:
                    forms = table["work_places"][relation]
                offered = (Attribute(relation, "place", forms["modifier"].format(o=name, who=who),
                                     forms["predicate"].format(o=name), clue(object=str(graph.keys[obj]))),)
        elif relation in table["relations"]:
            forms = table["relations"][relation]
            name = _name(label, phrase(relation)) if reviewed(relation) else display_title(label)
            offered = (Attribute(relation, "relation", forms["modifier"].format(o=name),
                                 forms["predicate"].format(o=name), clue(object=str(graph.keys[obj]))),)
        elif reviewed(relation):  # a relation the phrasebook names
            entry = phrase(relation)
            name = _name(label, entry)
            ended = _ended(ctx, node, edge)
            several = (objects_of[graph.rel[edge]] > 1 and current_of(int(graph.rel[edge])) > 1
                       or relation in gates.partial_lists())  # a selection: "whose notable works include X"
            modifier, predicate = relation_clauses(entry, name, its, ended, several)
            if not ended and (variant := _variant(str(graph.keys[node]), relation)) is not None:
                modifier = variant["modifier"].format(o=name, a=with_article(name))
                predicate = variant.get("predicate", predicate).format(o=name, a=with_article(name))
            offered = (Attribute(relation, "relation", modifier, predicate, clue(object=str(graph.keys[obj])),
                                 several=name if several and modifier.endswith(name) else ""),)
        yield _Offer(relation, label, False, offered)


def relation_clauses(entry: Entry, name: str, its: str, ended: bool, several: bool) -> tuple[str, str]:
    """(modifier, predicate) stating a relation's object `name`: "whose spouse is X" / "has X as its spouse";
    "whose genres include X" for one of several; "whose former spouse is X" for an ended fact (never stated
    in the present)."""
    if ended:
        return f"whose former {entry.noun} is {name}", f"had {name} as {its} {entry.noun}"
    if several:
        return f"whose {entry.plural} include {name}", f"has {name} among {its} {entry.plural}"
    return f"whose {entry.noun} is {name}", f"has {name} as {its} {entry.noun}"


def _variant(entity: str, relation: str) -> dict[str, str] | None:
    """The wording of `relation` for this entity (`[relation_variants]`): one of the table's, or None for the
    lexicon's own, drawn by a stable hash so that the entity reads the same in every question."""
    variants = attribute_table().get("relation_variants", {}).get(relation, [])
    pick = int(stable_hash(entity, relation), 16) % (len(variants) + 1)
    return variants[pick - 1] if pick else None


def _object_name(clue: gates.Clue) -> str:
    """The name an attribute's object is stated by: a literal's value or a page title, without its
    disambiguator ("" for an attribute with no object)."""
    key = clue.object or ""
    return (split_literal_key(key)[1] if key.startswith(LITERAL_PREFIX) else key).split(" (")[0]


def restates(noun: str, attribute: Attribute) -> bool:
    """Whether an attribute only repeats the noun ("an English novelist whose occupation is Novelist", "an
    American film from the United States")."""
    name = attribute.name
    if attribute.kind == "place":
        demonym = attribute_table()["demonyms"].get(name)
        return demonym is not None and f" {demonym} " in f" {noun} "
    return bool(name) and attribute.kind == "relation" and f" {name.lower()} " in f" {noun.lower()} "


def says_hop_role(hop_relation: str | None, attribute: Attribute) -> bool:
    """Whether an attribute states the occupation the hop into the entity already says ("was directed by a
    person who worked as a film director": `hop_roles` of the attribute table)."""
    if hop_relation is None or attribute.relation != "occupation":
        return False
    return attribute.name.casefold() in attribute_table().get("hop_roles", {}).get(hop_relation, ())


def copies_lead(lead: str, attribute: Attribute) -> bool:
    """Whether an attribute states what the entity's own lead sentence says (its object's name is in it): a
    search engine ranks the entity's page first for its lead's words, so such a description finds it."""
    key = attribute.clue.object or ""
    if not key or key.startswith(LITERAL_PREFIX):
        return False
    name = attribute.name.casefold()  # the title without its disambiguator
    return bool(name) and name in lead.casefold()


MAX_NAME_CHARS = 40
MAX_OPTIONS = 8  # objects of one relation offered as attributes (each one a candidate clue)


def _named_value(graph, node: int, relation: str) -> bool:
    """Whether a literal is a name given as plain text: a short string without digits, of a property whose
    values are entities ("bandMember = Fozzi"), so that stating it describes like an entity does."""
    value_type, value, _ = split_literal_key(graph.keys[node])
    entry = load_ontology().properties.get(relation)
    return (value_type == "string" and entry is not None and entry.is_object and len(value) <= MAX_NAME_CHARS
            and not any(ch.isdigit() for ch in value) and not any(ch in value for ch in ",;:()"))


def _name(title: str, entry: Entry) -> str:
    """A title as it reads after its relation's noun: "whose producer is Jim Ballantine", not "... is the
    producer Jim Ballantine" for the page "Jim Ballantine (producer)"; a common noun in lower case."""
    bare, _, qualifier = title.partition(" (")
    name = bare if qualifier.rstrip(")") == entry.noun else display_title(title)
    if entry.answer_drop and name.endswith(entry.answer_drop) and len(name) > len(entry.answer_drop):
        name = name[: -len(entry.answer_drop)]  # "whose languages include Gwich'in", as the answer is written
    return as_common_noun(name) if entry.common_objects else name


def _current_objects(ctx, node: int, relation: int) -> int:
    """Objects of a node's relation whose fact has not ended: a man with a former and a present wife has one
    spouse ("whose spouse is X", not "whose spouses include X")."""
    graph = ctx.graph
    edges = range(graph.indptr[node], graph.indptr[node + 1])
    return sum(1 for e in edges if graph.rel[e] == relation and not _ended(ctx, node, e))


def _ended(ctx, node: int, edge: int) -> bool:
    """Whether the fact behind a CSR edge of `node` had ended by the snapshot (a marriage, a term of office,
    or a fact that can change of a subject dead by then: the club a footballer played for)."""
    graph = ctx.graph
    qualifiers = {q["key"]: q["value"] for q in graph.relations["qualifiers"][int(graph.edge_row[edge])].as_py() or []}
    if has_ended(qualifiers, ctx.as_of):
        return True
    if graph.kind[graph.dst[edge]] == LITERAL:  # a count or a date: what a dead man's link to others is not
        return False
    relation = str(graph.relation_names[graph.rel[edge]])
    return is_mutable(relation, "", qualifiers) and ctx.facts.died_before(node, ctx.as_of)


def choose(options: list[Attribute], fits: Callable[[list[gates.Clue]], set[int]], target: int,
           base: list[gates.Clue], minimum: int, maximum: int,
           each: Callable[[list[gates.Clue], list[gates.Clue]], list[set[int]]] | None = None) -> list[Attribute] | None:
    """Greedy: add the attribute that leaves the fewest candidates until only `target` fits (and at least
    `minimum` are chosen); None when `maximum` attributes cannot single it out. `each(said, clues)`, where
    given, is what `fits` leaves of `said` plus each clue (the same sets, read faster); the chosen clue's set
    is the next round's candidates."""
    chosen: list[Attribute] = []
    remaining = fits(base)
    while len(remaining) > 1 or len(chosen) < minimum:
        if len(chosen) == maximum or not options:
            return None
        said = base + [a.clue for a in chosen]
        fitting = (each(said, [option.clue for option in options]) if each is not None
                   else [fits([*said, option.clue]) for option in options])
        counts = list(map(len, fitting))
        size = min(counts)
        best = counts.index(size)  # the first of the fewest
        if size >= len(remaining) and len(remaining) > 1:
            return None  # nothing left tells the candidates apart
        chosen.append(options.pop(best))
        # One fuzzing level per date, one object per relation, except two of several ("genres include X and Y").
        options = [o for o in options if o.relation != chosen[-1].relation or (o.several and chosen[-1].several)]
        remaining = fitting[best]
    return chosen if remaining == {target} else None


RELATIVE_WORDS = ("who ", "whose ", "that ", "which ")
PHRASE_ORDER = {"place": 0, "date": 1, "relation": 2}  # "a company in Ohio founded in the 1980s"
PREPOSITIONS = ("in", "on", "at")


def described(noun: str, chosen: list[Attribute]) -> str:
    """"a Canadian filmmaker born in Montreal in the late 1960s whose alma mater is X": a place before a date,
    phrases of one verb merged ("born in X" and "born in the 1960s"), other phrases side by side, relative
    clauses after them joined by "and" ("released in the 2020s and whose director is X" is not English), two
    objects of one relation in one clause ("whose genres include jazz and funk")."""
    return _described(noun, tuple(chosen))


@functools.lru_cache(maxsize=1 << 16)
def _described(noun: str, chosen: tuple[Attribute, ...]) -> str:
    """`described`, kept: a path's gates, obfuscations and text render the same descriptions again (four
    times in five on the sample)."""
    modifiers: list[str] = []
    merged: dict[str, int] = {}  # relation -> index of its clause in `modifiers`
    for attribute in sorted(chosen, key=lambda a: PHRASE_ORDER[a.kind]):
        if attribute.several and attribute.relation in merged:
            modifiers[merged[attribute.relation]] += f" and {attribute.several}"
            continue
        if attribute.several:
            merged[attribute.relation] = len(modifiers)
        modifiers.append(attribute.modifier)
    phrases = _merge_verbs([m for m in modifiers if not m.startswith(RELATIVE_WORDS)])
    clauses = _merge_verbs([m for m in modifiers if m.startswith(RELATIVE_WORDS)])
    joined = " ".join([*phrases, *([", ".join(clauses[:-2] + [" and ".join(clauses[-2:])])] if clauses else [])])
    return f"{with_article(noun)} {joined}".strip()


def _merge_verbs(modifiers: list[str]) -> list[str]:
    """"born in Chicago" + "born in the 1940s" -> "born in Chicago in the 1940s" (and "who died in X in the
    2000s"): a modifier that repeats the previous one's words up to a preposition keeps only what follows."""
    kept: list[str] = []
    for modifier in modifiers:
        words, before = modifier.split(), kept[-1].split() if kept else []
        common = next((i for i, (a, b) in enumerate(zip(words, before, strict=False)) if a != b),
                      min(len(words), len(before)))
        if common >= 2 and words[common - 1] in PREPOSITIONS and not modifier.startswith("whose "):
            kept[-1] += " " + " ".join(words[common - 1 :])
        else:
            kept.append(modifier)
    return kept
