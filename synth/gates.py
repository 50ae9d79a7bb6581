"""Graph-side checks of a question: what its path and the facts it states single out over the graph.

`FactIndex` holds the lookups the checks (and `synth.describe`) read; `Clue` is one fact a question states
of an entity it does not name. The checks here read the graph and the path, never the text: a vague
answer, fewer hops, a reversed place, open-world uniqueness of the start, every hop and a tree's branches,
an identifying clue, a clue shortcut, a dominant answer. The text-side checks are `synth.text_gates`; the
order a question meets them in, and the catalogue of every rejection reason, `synth.question_gates`.
"""

from __future__ import annotations

import datetime as dt
import functools
import operator
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path as FsPath

import numpy as np

from graph.csr import LITERAL, LITERAL_PREFIX, PAGE, CSRGraph, split_literal_key
from knowledge.lexicon import stop_words
from knowledge.ontology import load_ontology
from schemas.questions import Path
from synth.matching import normalized_text
from synth.phrasing import parse_date, phrase, type_noun

MAX_FRONTIER = 100_000


@dataclass(frozen=True)
class Clue:
    """What a question says about one intermediate node besides the relation that leads to it."""

    position: int  # index into path.nodes
    type_noun: str | None = None
    attribute: str | None = None  # relation of a fact of the node stated in the text, e.g. "birth_date"
    years: tuple[int, int] | None = None  # a date fact: the inclusive year range the fuzzed date stands for
    object: str | None = None  # an entity fact: the object named in the text ("a city in Ireland")
    said: tuple = field(init=False, repr=False, compare=False)  # what it says, whatever the position

    def __post_init__(self) -> None:
        object.__setattr__(self, "said", (self.type_noun, self.attribute, self.years, self.object))


def vague_answer(path: Path) -> str | None:
    """A literal string answer that is one lower-case word ("capital", "yes") is an infobox keyword; a
    relation the phrasebook calls guessable (a campus setting, a publisher's industry) has a guess for an answer."""
    answer = path.answer.strip()
    if path.answer_type == "string" and answer.isalpha() and answer.islower():
        return f"keyword-like answer {answer!r}"
    if phrase(path.hops[-1].relation).guessable:
        return f"{path.hops[-1].relation} takes one of a handful of values the question suggests ({answer!r})"
    return None


def satisfies(index: FactIndex, node: int, clue: Clue) -> bool:
    """Open world: a candidate is excluded only when the graph states something contradicting the clue.

    A node without a page, or a page silent about the clue's relation, may still fit, so it stays.
    """
    if clue.type_noun and index.type_nouns[node] and index.type_nouns[node] != clue.type_noun:
        return False
    relation = index.relation(clue.attribute)
    if relation is None:
        return True
    if clue.years:
        first, last = clue.years
        years = index.stated(node, relation)[1]
        return not years or any(first <= year <= last for year in years)
    if clue.object:
        if clue.attribute in partial_lists():  # a selection: the values it leaves out may hold the object
            return True
        objects = index.stated(node, relation)[0]
        return not objects or index.among(index.node(clue.object), objects)
    return True


def holds(index: FactIndex, node: int, clue: Clue) -> bool:
    """Closed reading: the graph states the clue's fact of the node (a branch of a tree question holds)."""
    relation = index.relation(clue.attribute)
    if relation is None:
        return bool(clue.type_noun) and index.type_nouns[node] == clue.type_noun
    if clue.years:
        years = index.years(node, relation)
        return bool(((years >= clue.years[0]) & (years <= clue.years[1])).any())
    return index.among(index.node(clue.object), index.objects(node, relation).tolist())


DEATH_RELATIONS = ("deathDate", "deathYear")


class FactIndex:
    """Lookups over the CSR graph built once per run, so that gates and descriptions cost microseconds: the
    heads of a (relation, object) fact, the heads of a date relation by year, each literal date's year,
    coarse type nouns, and each relation's dominant object."""

    NO_YEAR = np.iinfo(np.int32).min

    def __init__(self, graph: CSRGraph, containers: dict[str, tuple[str, ...]] | None = None):
        self.graph = graph
        # Places written with their containers ("[[Westminster]], [[London]]": `within` qualifiers): a person
        # born in Westminster was born in London too, so a clue "born in London" fits them.
        self.within: dict[int, frozenset[int]] = {}
        holding: dict[int, list[int]] = {}
        for place, names in (containers or {}).items():
            node, found = graph.node_id(place), {graph.node_id(name) for name in names} - {None}
            if node is not None and found:
                self.within[node] = frozenset(found)
                for container in found:
                    holding.setdefault(container, []).append(node)
        self.holding = {container: np.array(sorted(places), np.int64) for container, places in holding.items()}
        n = graph.num_nodes
        heads = np.repeat(np.arange(n, dtype=np.int64), graph.out_degree)
        keys = graph.rel.astype(np.int64) * n + graph.dst.astype(np.int64)
        order = np.argsort(keys, kind="stable")
        self._keys, self._heads = keys[order], heads[order]
        unique, counts = np.unique(self._keys, return_counts=True)
        self._dominant: set[int] = set()
        relations = unique // max(n, 1)
        for relation in np.unique(relations):
            mask = relations == relation
            top = counts[mask].max()
            if top >= 2:  # an object held by one head only dominates nothing
                self._dominant.update(unique[mask][counts[mask] == top].tolist())
        coarse = {t: type_noun(t) for t in set(graph.entity_type.tolist())}
        self.type_nouns = np.array([coarse[t] if t else "" for t in graph.entity_type], dtype=object)
        # Popularity: the links into a node over the graph's facts (in-links; a page's fame in the slice).
        self.in_links = np.bincount(graph.dst, minlength=n)
        self._famous_min: dict[float, float] = {}
        self.node_year = np.full(n, self.NO_YEAR, np.int64)
        for node in np.flatnonzero(graph.kind == LITERAL):
            value_type, value, _ = split_literal_key(graph.keys[node])
            parsed = parse_date(value) if value_type == "date" else None
            if parsed:
                self.node_year[node] = parsed[0]
        self._relations = {name: i for i, name in enumerate(graph.relation_names)}
        # The year each person died: what a dead man held (a club he played for, a party) has ended.
        self.death_year = np.full(n, self.NO_YEAR, np.int64)
        for name in DEATH_RELATIONS:
            if (relation := self._relations.get(name)) is not None:
                edges = np.flatnonzero(graph.rel == relation)
                self.death_year[heads[edges]] = self.node_year[graph.dst[edges]]
        self._nodes: dict[str, int | None] = {}
        self._path_ids: dict[tuple, tuple[int, ...] | None] = {}
        self._stated: dict[tuple[int, int], tuple[frozenset[int], tuple[int, ...]]] = {}
        self._by_year: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.described: dict[tuple, frozenset[int]] = {}  # `described_candidates` by what the clues say
        self.broad: dict[tuple, str | None] = {}  # `broad_anchor` by (relation, object)
        self.identifying: dict[tuple, bool] = {}  # `identifies` by (relation, object)

    def famous(self, node: int, quantile: float) -> bool:
        """Whether a page is among the most linked-to of the graph: its in-links reach the `quantile` of the
        pages' in-links (and at least two: a page one fact names is the long tail)."""
        if quantile not in self._famous_min:
            pages = self.in_links[self.graph.kind == PAGE]
            self._famous_min[quantile] = max(float(np.quantile(pages, quantile)) if len(pages) else 0.0, 2.0)
        return self.graph.kind[node] == PAGE and self.in_links[node] >= self._famous_min[quantile]

    def died_before(self, node: int, day: dt.date) -> bool:
        """Whether the graph records the entity's death in a year before `day`'s (a death in the same year
        may come after it: not counted)."""
        return self.NO_YEAR < self.death_year[node] < day.year

    def relation(self, name: str | None) -> int | None:
        return self._relations.get(name) if name else None

    def node(self, label: str) -> int | None:
        if label not in self._nodes:
            self._nodes[label] = self.graph.node_id(label)
        return self._nodes[label]

    def path_ids(self, path: Path) -> tuple[int, ...] | None:
        """`path_node_ids`, kept per path: the planner and the gates read a path's nodes at every attempt."""
        key = path_key(path)
        if key not in self._path_ids:
            if len(self._path_ids) >= MAX_DESCRIBED:
                self._path_ids.clear()
            ids = path_node_ids(self, path)
            self._path_ids[key] = None if ids is None else tuple(ids)
        return self._path_ids[key]

    def objects(self, node: int, relation: int) -> np.ndarray:
        """Object ids of node --relation--> (sorted and distinct in the CSR already)."""
        graph = self.graph
        start, end = graph.indptr[node], graph.indptr[node + 1]
        rels = graph.rel[start:end]
        return graph.dst[start + rels.searchsorted(relation, "left") : start + rels.searchsorted(relation, "right")]

    def stated(self, node: int, relation: int) -> tuple[frozenset[int], tuple[int, ...]]:
        """The objects of node --relation--> and their years (dates only), kept: the open-world checks ask the
        same nodes the same things for every plan of a path."""
        key = (node, relation)
        if (found := self._stated.get(key)) is None:
            if len(self._stated) >= MAX_DESCRIBED:
                self._stated.clear()
            objects = self.objects(node, relation)
            found = self._stated[key] = (frozenset(objects.tolist()), tuple(self._dated(objects).tolist()))
        return found

    def years(self, node: int, relation: int) -> np.ndarray:
        return self._dated(self.objects(node, relation))

    def _dated(self, objects: np.ndarray) -> np.ndarray:
        """The years of the dates among `objects`."""
        years = self.node_year[objects]
        return years[years != self.NO_YEAR]

    def _range(self, lo: int, hi: int) -> np.ndarray:
        return self._heads[self._keys.searchsorted(lo, "left") : self._keys.searchsorted(hi, "left")]

    def heads_of(self, relation: int, obj: int) -> np.ndarray:
        key = relation * self.graph.num_nodes + obj
        return self._range(key, key + 1)

    def among(self, target: int | None, objects) -> bool:
        """Whether `target` is one of `objects` or a place one of them lies within (`within`)."""
        return target in objects or any(target in self.within.get(o, ()) for o in objects)

    def heads_within(self, relation: int, obj: int) -> np.ndarray:
        """The heads of a (relation, object) fact, and of the same fact with a place written within the object."""
        heads = self.heads_of(relation, obj)
        if obj not in self.holding:
            return heads
        return np.unique(np.concatenate([heads, *(self.heads_of(relation, p) for p in self.holding[obj])]))

    def heads_in_years(self, relation: int, first: int, last: int) -> np.ndarray:
        """Heads with a date fact of `relation` in the year range [first, last]."""
        if relation not in self._by_year:
            n = self.graph.num_nodes
            lo, hi = self._keys.searchsorted(relation * n), self._keys.searchsorted((relation + 1) * n)
            years = self.node_year[self._keys[lo:hi] - relation * n]
            dated = years != self.NO_YEAR
            order = np.argsort(years[dated], kind="stable")
            self._by_year[relation] = (years[dated][order], self._heads[lo:hi][dated][order])
        years, heads = self._by_year[relation]
        return np.unique(heads[years.searchsorted(first, "left") : years.searchsorted(last, "right")])

    def is_dominant(self, relation: int, obj: int) -> bool:
        return relation * self.graph.num_nodes + obj in self._dominant


_RELATION = operator.attrgetter("relation")


def path_key(path: Path) -> tuple[str, ...]:
    """What a path's node ids and the checks of its chain depend on: its start, nodes and relations."""
    return (path.start, *path.nodes, *map(_RELATION, path.hops))


MAX_DESCRIBED = 200_000  # cached descriptions (and paths, stated facts) per run before a cache starts afresh


_SAID = operator.attrgetter("said")


def described_candidates(index: FactIndex, clues: Iterable[Clue]) -> frozenset[int]:
    """Every entity that fits a description given without a name: the heads the graph shows holding its
    first stated fact (the anchor), filtered by every clue in the open-world reading of `satisfies`.
    Cached per run: the planner asks about the same descriptions again for every path of a start. A
    description whose clues before the last are cached and hold the anchor is read from them: their entities
    that satisfy the last clue (each round of choosing a description adds one clue to one already counted)."""
    clues = list(clues)
    key = tuple(map(_SAID, clues))
    if (found := index.described.get(key)) is None:
        anchor = _anchor(clues)
        narrowed = index.described.get(key[:-1]) if anchor is not None and anchor is not clues[-1] else None
        found = frozenset(_described_candidates(index, clues) if narrowed is None else
                          (n for n in narrowed if satisfies(index, n, clues[-1])))
        if len(index.described) >= MAX_DESCRIBED:
            index.described.clear()
        index.described[key] = found
    return found


def _anchor(clues: list[Clue]) -> Clue | None:
    """The first clue that states a fact: `described_candidates` starts from the heads holding it (closed
    reading), which satisfy it, and filters them by the other clues (open reading)."""
    return next((c for c in clues if c.attribute), None)


def described_each(index: FactIndex, said: list[Clue], clues: list[Clue]) -> list[frozenset[int]]:
    """The entities that fit `said` plus each one of `clues` (`described_candidates`), the cached ones read
    with the key of `said` built once: choosing a description weighs every fact left at every round."""
    prefix = tuple(map(_SAID, said))
    described = index.described
    found = []
    for clue in clues:
        if (fitting := described.get((*prefix, clue.said))) is None:
            fitting = described_candidates(index, [*said, clue])
        found.append(fitting)
    return found


def _described_candidates(index: FactIndex, clues: list[Clue]) -> set[int]:
    graph = index.graph
    anchor = _anchor(clues)
    if anchor is None:
        typed = next((c.type_noun for c in clues if c.type_noun), None)
        pool = np.flatnonzero(index.type_nouns == typed) if typed else np.arange(graph.num_nodes)
    else:
        relation = index.relation(anchor.attribute)
        if relation is None:
            return set()
        if anchor.years:
            pool = index.heads_in_years(relation, *anchor.years)
        else:
            obj = index.node(anchor.object)
            pool = index.heads_within(relation, obj) if obj is not None else np.array([], np.int64)
    rest = [c for c in clues if c is not anchor]
    for clue in rest:
        if clue.type_noun:  # the type check of `satisfies`, over the whole pool at once
            nouns = index.type_nouns[pool]
            pool = pool[(nouns == "") | (nouns == clue.type_noun)]
    facts = [c for c in rest if index.relation(c.attribute) is not None]  # the others hold once the type does
    return {int(n) for n in pool.tolist() if all(satisfies(index, n, c) for c in facts)}


def path_node_ids(index: FactIndex, path: Path) -> list[int] | None:
    """The graph node of every position of the path (literal nodes are found by their label)."""
    current = index.node(path.start)
    if current is None:
        return None
    ids = [current]
    for hop, label in zip(path.hops, path.nodes[1:], strict=True):
        current = _object_labelled(index, current, hop.relation, label)
        if current is None:
            return None
        ids.append(current)
    return ids


def _by_position(clues: Iterable[Clue]) -> dict[int, list[Clue]]:
    grouped: dict[int, list[Clue]] = {}
    for clue in clues:
        grouped.setdefault(clue.position, []).append(clue)
    return grouped


def _examples(graph: CSRGraph, nodes: Iterable[int], exclude: int) -> list[str]:
    return sorted(graph.label(n) for n in nodes if n != exclude)[:3]


def unique_chain(index: FactIndex, path: Path, clues: Iterable[Clue], start_described: bool) -> tuple[str, str] | None:
    """Open-world uniqueness, position by position: the described start, then every hop with the clues on
    its object, must single out exactly the path's node. Returns (gate, why) for the first that does not."""
    graph = index.graph
    ids = index.path_ids(path)
    if ids is None:
        return "alternative_answer", "the path's answer does not satisfy its own chain"
    clues = _by_position(clues)
    if start_described:
        fits = described_candidates(index, clues.get(0, []))
        if fits != {ids[0]}:
            return "start_not_unique", f"{len(fits)} entities fit the start's description, e.g. {_examples(graph, fits, ids[0])}"
    last = len(path.hops) - 1
    for position, hop in enumerate(path.hops):
        reached = _hop_objects(index, {ids[position]}, hop.relation, clues.get(position + 1, []))
        if reached != {ids[position + 1]}:
            gate = "alternative_answer" if position == last else "multi_valued_hop"
            return gate, (f"{len(reached)} objects of {hop.relation} fit at hop {position + 1}, "
                          f"e.g. {_examples(graph, reached, ids[position + 1])}")
    return None


def alternative_answer(index: FactIndex, path: Path, clues: Iterable[Clue]) -> str | None:
    """None when exactly the path's answer satisfies the chain (start named); otherwise why not."""
    failed = unique_chain(index, path, clues, start_described=False)
    return None if failed is None else failed[1]


def tree_branches(index: FactIndex, path: Path, branches: list[Clue]) -> str | None:
    """A tree question's branches (clues on the answer): each must hold for the answer, the final hop alone
    must reach several objects over a relation the ontology does not call single-valued (several birth
    dates are noise to drop, not alternatives to choose from), and dropping any branch must let another
    object through."""
    graph = index.graph
    ids = index.path_ids(path)
    if ids is None or not branches:
        return "no branch"
    final = load_ontology().properties.get(path.hops[-1].relation)
    if final is not None and final.functional:
        return f"{final.name} is single-valued: its several objects are not alternatives"
    answer = ids[-1]
    for clue in branches:
        if not holds(index, answer, clue):
            return f"branch {clue.attribute} does not hold for the answer"
    reached = graph.objects(ids[-2], graph.relation_id(path.hops[-1].relation)).tolist()
    if len(reached) < 2:
        return "the final hop has one object: no branch is needed"
    for dropped in range(len(branches)):
        rest = branches[:dropped] + branches[dropped + 1 :]
        if len([o for o in reached if all(satisfies(index, o, c) for c in rest)]) < 2:
            return f"branch {branches[dropped].attribute} is not needed"
    return None


def identifies(index: FactIndex, clue: Clue) -> bool:
    """Whether a clue names the object of an inverse-functional fact: one such object picks its subject out
    in the world, however many entities of the graph fit ("a country whose capital is London", "a writer
    whose notable works include the novel Dune"; `Ontology.identifies_subject`). Kept per fact: every plan
    of a path asks again."""
    if not clue.attribute or not clue.object:
        return False
    key = (clue.attribute, clue.object)
    if key not in index.identifying:
        node = index.node(clue.object)
        index.identifying[key] = load_ontology().identifies_subject(
            clue.attribute, index.graph.entity_type[node] if node is not None else None)
    return index.identifying[key]


def identifying_clue(index: FactIndex, clues: Iterable[Clue]) -> str | None:
    """Why the text gives away an entity it does not name by one world-identifying fact, or None."""
    found = next((c for c in clues if identifies(index, c)), None)
    if found is None:
        return None
    name = split_literal_key(found.object)[1] if found.object.startswith(LITERAL_PREFIX) else found.object
    return f"{found.attribute} {name!r} picks out the entity at position {found.position} in the world"


def clue_shortcut(index: FactIndex, path: Path, clues: Iterable[Clue]) -> str | None:
    """Why what the text says of a later entity answers the question without the chain before it, or None.

    For each position after the start whose clues state a fact, every entity those clues admit is followed
    through the rest of the path (each hop over every object its later clues admit). When two or more such
    entities reach the answer and every one whose continuation the graph knows reaches only the answer, the
    chain before that position is never needed ("a country whose capital is London ... what is its
    currency?" is Pound sterling for every one). One entity alone is not counted: in a graph smaller than
    the world a fuzzed date or a place often fits one entity here and hundreds out there; a fact that fits
    one in the world too (an inverse-functional property) is `identifying_clue`'s.
    """
    ids = index.path_ids(path)
    if ids is None:
        return None
    by_position = _by_position(clues)
    for position in range(1, len(ids)):
        stated = by_position.get(position, [])
        if not any(c.attribute for c in stated):
            continue
        known = 0
        for candidate in described_candidates(index, stated):
            answers = _follow(index, path, by_position, position, candidate)
            if answers and answers != {ids[-1]}:
                break
            known += bool(answers)
        else:
            if known >= 2:
                said = ", ".join(c.attribute for c in stated if c.attribute)
                return (f"what the text says of position {position} ({said}) leads all {known} entities "
                        "it fits to the answer, without the chain before it")
    return None


def _follow(index: FactIndex, path: Path, by_position: dict[int, list[Clue]], position: int, node: int) -> set[int]:
    """The answers the rest of the path reaches from `node` at `position`, every later clue applied."""
    frontier = {node}
    for hop_position in range(position, len(path.hops)):
        frontier = _hop_objects(index, frontier, path.hops[hop_position].relation, by_position.get(hop_position + 1, []))
        if not frontier:
            break
    return frontier


def _hop_objects(index: FactIndex, heads: set[int], relation: str, clues: list[Clue]) -> set[int]:
    """The objects one hop reaches from `heads` that every clue on them admits (open world)."""
    relation_id = index.relation(relation)
    return {o for head in heads for o in index.stated(head, relation_id)[0]
            if all(satisfies(index, o, c) for c in clues)}


def start_intersection(index: FactIndex, clues: list[Clue], target: int) -> str | None:
    """Why a described start is not pinned down by intersecting branches, or None when it is: two or more
    stated facts (branches), together fitting only `target` over the whole graph, and each needed (without
    any one of them, with the type noun, another entity fits too)."""
    branches = [c for c in clues if c.attribute]
    base = [c for c in clues if not c.attribute]
    if len(branches) < 2:
        return "fewer than two branches"
    if (fits := described_candidates(index, clues)) != {target}:
        return f"the branches together fit {len(fits)} entities"
    for dropped in branches:
        if described_candidates(index, base + [c for c in branches if c is not dropped]) == {target}:
            return f"branch {dropped.attribute} is not needed"
    return None


def dominant_answer(index: FactIndex, path: Path) -> str | None:
    """Why the answer is its final relation's dominant object across the graph, or None."""
    graph = index.graph
    ids = index.path_ids(path)
    relation = graph.relation_id(path.hops[-1].relation)
    if ids is None or relation is None or not index.is_dominant(relation, ids[-1]):
        return None
    heads = len(index.heads_of(relation, ids[-1]))
    return f"{path.answer!r} is the most common object of {path.hops[-1].relation} ({heads} heads)"


BROAD_ANCHORS_FILE = FsPath(__file__).resolve().parents[1] / "data" / "questions" / "broad_anchors.toml"


@functools.cache
def broad_anchors() -> dict:
    """Classes, relations and place sizes whose objects are hubs (data/questions/broad_anchors.toml)."""
    with BROAD_ANCHORS_FILE.open("rb") as handle:
        return tomllib.load(handle)


def _population(index: FactIndex, node: int, relation: str) -> float | None:
    if (rel := index.relation(relation)) is None:
        return None
    for obj in index.objects(node, rel):
        key = index.graph.keys[obj]
        if key.startswith(LITERAL_PREFIX):
            try:
                return float(split_literal_key(key)[1].replace(",", ""))
            except ValueError:
                continue
    return None


def broad_class(cls: str | None) -> str | None:
    """The hub class (`broad_anchors` classes: a country, a language, a region...) the class is or descends
    from, or None."""
    ontology = load_ontology()
    return next((c for c in broad_anchors()["classes"] if cls and ontology.is_a(cls, c)), None)


def broad_anchor(index: FactIndex, clue: Clue) -> str | None:
    """Why a clue's named object is a hub that thousands of subjects of the whole wiki share (`broad_anchors`:
    a country, a language or a genre by its class; any object of a relation such as occupation or genre; a
    city whose recorded population is in the millions), or None when it may single its subject out. Kept per
    fact: every plan of a path asks again."""
    key = (clue.attribute, clue.object)
    if key not in index.broad:
        index.broad[key] = _broad_anchor(index, clue.attribute, clue.object)
    return index.broad[key]


def _broad_anchor(index: FactIndex, attribute: str | None, name: str | None) -> str | None:
    table = broad_anchors()
    if attribute in table["relations"]:
        return f"{attribute} is shared by thousands of subjects"
    node = index.node(name or "")
    ontology = load_ontology()
    cls = ontology.find_class(index.graph.entity_type[node] or "") if node is not None else None
    if cls is None:
        return _region_without_page(index, node, name, table["places"].get("region_relations", []))
    if broad := broad_class(cls):
        return f"{name!r} is a {broad}"
    places = table["places"]
    if not ontology.is_a(cls, "PopulatedPlace"):
        return None
    population = _population(index, node, places["population_relation"])
    if population is None:
        return f"{name!r} is a {cls} of unrecorded population" if cls in places["unknown_broad_classes"] else None
    return f"{name!r} has {population:,.0f} inhabitants" if population >= places["max_population"] else None


def _region_without_page(index: FactIndex, node: int | None, name: str | None, relations: list[str]) -> str | None:
    """Why an object the slice has no page for is a region all the same: some place of the graph lies in it
    ("Montreal lies in Quebec"), so "a building in Quebec" fits thousands of subjects, as a region's page would."""
    if node is None:
        return None
    for relation in relations:
        if (rel := index.relation(relation)) is not None and len(heads := index.heads_of(rel, node)):
            return f"{name!r} is a region ({index.graph.keys[heads[0]]!r} lies in it)"
    return None


WORLD_HOLDERS_FILE = FsPath(__file__).resolve().parents[1] / "data" / "questions" / "world_holders.toml"
HUB_HOLDERS = 100_000  # a broad anchor's subjects in the whole wiki (a country's people, a genre's works)


@functools.cache
def world_holders() -> dict:
    """Typical subjects per object of each relation in the whole wiki (data/questions/world_holders.toml)."""
    with WORLD_HOLDERS_FILE.open("rb") as handle:
        return tomllib.load(handle)


def prior_holders(index: FactIndex, clue: Clue) -> float:
    """How many subjects of the whole wiki state the clue's fact, from the reviewed prior when no census of a
    full dump is given: a hub's (`broad_anchor`) thousands; a place's about one per `per_inhabitants` of its
    recorded population; otherwise the relation's typical count (`world_holders`)."""
    if broad_anchor(index, clue):
        return HUB_HOLDERS
    table = world_holders()
    places = table["places"]
    if clue.attribute in places["relations"]:
        node = index.node(clue.object or "")
        population = _population(index, node, places["population_relation"]) if node is not None else None
        return places["unknown"] if population is None else max(population / places["per_inhabitants"],
                                                                 places["minimum"])
    return table["relations"].get(clue.attribute, table["default"])


TRIVIAL_HOPS_FILE = FsPath(__file__).resolve().parents[1] / "data" / "questions" / "trivial_hops.toml"


@functools.cache
def trivial_hops() -> dict[str, dict]:
    """Relation -> {heads, why}: objects that follow in one well-known hop (data/questions/trivial_hops.toml)."""
    with TRIVIAL_HOPS_FILE.open("rb") as handle:
        return tomllib.load(handle)


PARTIAL_LISTS_FILE = FsPath(__file__).resolve().parents[1] / "data" / "questions" / "partial_lists.toml"


@functools.cache
def partial_lists() -> dict[str, dict]:
    """Relation -> {why}: relations whose infobox list is a selection of the world's values, so that a value
    singled out among the listed ones may not be unique in the world (data/questions/partial_lists.toml)."""
    with PARTIAL_LISTS_FILE.open("rb") as handle:
        return tomllib.load(handle)


def partial_list(path: Path) -> str | None:
    """Why a hop of the path singles out a value of a relation whose infobox list is a selection, or None.

    Whatever the question says of that value (a date, a country, a genre, a publisher), the world holds other
    values the list leaves out that may fit it too: King's notable works include Carrie (1974) but not 'Salem's
    Lot (1975), and both are American novels of the mid-1970s; Jonathan Nolan's relatives born in London are
    two brothers, the infobox names one. Nor can the asked hop be one ("the notable work of X"). So such a
    relation is never a hop; a description states it as membership ("whose notable works include Carrie"),
    which stays true however partial the list."""
    for position, hop in enumerate(path.hops):
        if (entry := partial_lists().get(hop.relation)) is not None:
            return f"hop {position + 1} ({hop.relation}) singles out one of its values, but {entry['why']}"
    return None


def _trivial_from(graph: CSRGraph, relation: str, head: int, reached_by: str | None = None,
                  answer: str | None = None) -> str | None:
    """Why `relation` of the entity `head` is common knowledge (the table's entry for its class), or None.

    An entry with `after` holds only for an entity the path reached over one of those relations (a
    publisher's headquarters), one with `answers` only when the answer is one of them: the default guess
    ("New York City" for an American publisher), not every value."""
    entry = trivial_hops().get(relation)
    if entry is None:
        return None
    if entry.get("after") and reached_by not in entry["after"]:
        return None
    if entry.get("answers") and answer not in entry["answers"]:
        return None
    if entry["heads"]:
        ontology = load_ontology()
        cls = ontology.find_class(graph.entity_type[head] or "")
        if cls is None or not any(ontology.is_a(cls, head_class) for head_class in entry["heads"]):
            return None
    return entry["why"]


def whole_words(text: str) -> str:
    """`text` as answers are compared (`normalize_answer`), padded so that `in` matches whole words only; the
    normalised names are kept (`normalized_text`): every path through an entity compares its title again."""
    return f" {normalized_text(text)} "


def name_shared(answer: str, title: str) -> str | None:
    """The name the answer and an entity's title share as whole words (compared as answers are: accents, case
    and punctuation aside; each name before a disambiguator or a comma, "Austin" of "Austin, Texas"): the
    answer's name inside the title ("Leeds" in "Leeds United F.C.", "Austin" in "University of Texas at
    Austin"), or the title inside the answer ("Doubleday" in "Frank Nelson Doubleday"). Whoever finds that
    entity reads or guesses the answer from its name. None otherwise, or when the two are the same name."""
    name, holder = answer.split(" (")[0].split(",")[0].strip(), title.split(" (")[0].split(",")[0].strip()
    if min(len(name), len(holder)) < 3 or name.casefold() == holder.casefold():
        return None
    name_words, holder_words = whole_words(name), whole_words(holder)
    if name_words in holder_words:
        return name
    return holder if holder_words in name_words else None


PLACE_NAME_WORDS = stop_words("place_names")


def place_word_shared(answer: str, title: str) -> str | None:
    """A word of a place answer's name, not one that many place names share (`place_names` of
    data/stop_words.toml), that an entity's title also holds: "Hull" of "Kingston upon Hull" in "Hull City
    A.F.C.". A club, a university or a station named after its town gives the town away. None otherwise."""
    words = set(normalized_text(title.split(" (")[0]).split())
    return next((word for word in normalized_text(answer.split(" (")[0].split(",")[0]).split()
                 if len(word) >= 4 and word not in PLACE_NAME_WORDS and word in words), None)


def _settlement(graph: CSRGraph, node: int) -> bool:
    """Whether a place answer is a town or region (a populated place, or a place the graph has no page for)
    rather than a venue or building ("City of Manchester Stadium" names its city, not itself)."""
    cls = load_ontology().find_class(graph.entity_type[node] or "")
    return cls is None or load_ontology().is_a(cls, "PopulatedPlace")


def trivial_final_hop(index: FactIndex, path: Path) -> str | None:
    """Why the answer follows in one well-known hop (`trivial_hops`) from the entity the final description
    pins down, or None: decided by the path alone, whatever a plan says. An earlier hop whose object is its
    relation's default guess (`answers`: an American publisher's city is New York City) counts too: the
    question reduces to what follows that guess."""
    ids = index.path_ids(path)
    if ids is None:
        return None
    if path.answer_type in ("entity", "string"):
        place = phrase(path.hops[-1].relation).answer == "place" and _settlement(index.graph, ids[-1])
        for title in path.nodes[-2::-1]:
            if (shared := name_shared(path.answer, title)
                    or (place_word_shared(path.answer, title) if place else None)) is not None:
                return f"the answer {path.answer!r} and {title!r}, an entity of its chain, share the name {shared!r}"
    for position in range(len(path.hops) - 1, -1, -1):
        hop, reached_by = path.hops[position], path.hops[position - 1].relation if position else None
        if position < len(path.hops) - 1 and not trivial_hops().get(hop.relation, {}).get("answers"):
            continue  # a well-known hop mid-chain still needs the chain to find its subject; a guess does not
        if (why := _trivial_from(index.graph, hop.relation, ids[position], reached_by, path.nodes[position + 1])) is not None:
            return f"{hop.relation} of {path.nodes[position]!r} is {why}"
    return None


def trivial_from_named(index: FactIndex, path: Path, named: Iterable[str]) -> str | None:
    """Why the answer follows in one well-known hop (`trivial_hops`) from an entity the question names (the
    start when named, a clue's object), or None: the plan's share of `trivial_final_hop`'s reason."""
    graph = index.graph
    ids = index.path_ids(path)
    if ids is None:
        return None
    answer = ids[-1]
    for name in dict.fromkeys(named):
        node = index.node(name)
        if node is None or node == answer:
            continue
        for edge in range(graph.indptr[node], graph.indptr[node + 1]):
            relation = graph.relation_names[graph.rel[edge]]
            if int(graph.dst[edge]) == answer and (why := _trivial_from(graph, relation, node)) is not None:
                return f"the answer is {relation} of the named {name!r}: {why}"
    return None


def famous_ends(index: FactIndex, path: Path, quantile: float) -> list[str]:
    """The path's start and answer that are among the graph's most linked-to pages (`FactIndex.famous`)."""
    ids = index.path_ids(path)
    if ids is None:
        return []
    return [label for label, node in ((path.start, ids[0]), (path.answer, ids[-1])) if index.famous(node, quantile)]


def answer_node(index: FactIndex, path: Path) -> int | None:
    """The graph node of the path's answer (the object of its last hop)."""
    head = index.node(path.hops[-1].head)
    return None if head is None else _object_labelled(index, head, path.hops[-1].relation, path.answer)


def _object_labelled(index: FactIndex, head: int, relation: str, label: str) -> int | None:
    """The first object (by id) of head --relation--> whose label is `label`, or None; read with the index's
    kept titles and relation ids (a path's nodes are looked up by every gate that reads it)."""
    relation_id = index.relation(relation)
    if relation_id is None:
        return None
    graph = index.graph
    return next((int(o) for o in index.objects(head, relation_id) if graph.label(o) == label), None)


def reversed_place(index: FactIndex, path: Path, place_relations) -> str | None:
    """Why a hop over a place relation ("X lies in Y") is contradicted by Y lying in X, or None."""
    if not any(hop.relation in place_relations for hop in path.hops):
        return None
    graph = index.graph
    ids = index.path_ids(path)
    if ids is None:
        return None
    for position, hop in enumerate(path.hops):
        if hop.relation not in place_relations:
            continue
        if lies_in(graph, ids[position + 1], ids[position], place_relations):
            return f"{path.nodes[position + 1]!r} lies in {path.nodes[position]!r}, not the other way"
        if lists_parts(graph, ids[position], graph.relation_id(hop.relation)):
            return f"{path.nodes[position]!r} lists its parts under {hop.relation}, not places it lies in"
    return None


MAX_CONTAINERS = 3  # a place lies in a few nested regions (state, county); a longer list names its parts


def lists_parts(graph: CSRGraph, place: int, relation: int) -> bool:
    """Whether a place's objects of a place relation are too many to be regions it lies in (New York City's
    `subdivision_name2` lists its five boroughs)."""
    return len(graph.objects(place, relation)) > MAX_CONTAINERS


def lies_in(graph: CSRGraph, place: int, container: int, place_relations) -> bool:
    """Whether the graph states that `place` lies in `container` (over the place relations)."""
    for edge in range(graph.indptr[place], graph.indptr[place + 1]):
        if int(graph.dst[edge]) == container and graph.relation_names[graph.rel[edge]] in place_relations:
            return True
    return False


def fewer_hops(index: FactIndex, path: Path) -> str | None:
    """The shortest distance from start to answer when it is below the path's hop count.

    A literal answer counts as reached only over the final hop's relation: another entity's fact that
    happens to hold the same value ("1865", "Urban") under another relation is no shortcut to this one."""
    graph = index.graph
    start, target = index.node(path.start), answer_node(index, path)
    if start is None or target is None:
        return None
    final = index.relation(path.hops[-1].relation) if graph.kind[target] == LITERAL else None
    frontier, seen = np.array([start], np.int64), {start}
    for depth in range(1, len(path.hops)):
        edges = _out_edges(graph, frontier)
        targets = graph.dst[edges]
        reached = targets == target
        if final is not None:
            reached &= graph.rel[edges] == final
        if reached.any():
            return f"answer reachable in {depth} hop(s)"
        if depth + 1 < len(path.hops):  # another step to take
            fresh = sorted(set(targets.tolist()) - seen)
            seen.update(fresh)
            frontier = np.array(fresh[:MAX_FRONTIER], np.int64)
    return None


def _out_edges(graph: CSRGraph, nodes: np.ndarray) -> np.ndarray:
    """The ids of every out-edge of `nodes`, node by node."""
    if len(nodes) == 1:  # a path's start: its edges are one range
        return np.arange(graph.indptr[nodes[0]], graph.indptr[nodes[0] + 1])
    first, degree = graph.indptr[nodes], graph.indptr[nodes + 1] - graph.indptr[nodes]
    return np.repeat(first - np.cumsum(degree) + degree, degree) + np.arange(degree.sum())
