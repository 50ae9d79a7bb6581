"""The walk conditions: their names (step, path and dedup levels, in the order counted), the per-graph
flags the sampler checks them against (`WalkParams`), each start's shortcut ball (`StartBalls`), the
eligible starts and edges, and the conditions an emitted path records as held.

A walk starts at a head entity and takes `k` hops along infobox relations. Each step draws a random
out-edge and checks it against these conditions; a failing candidate is counted under the first it
fails. Finished walks must contain a fact inside the recency window; duplicates are then removed at
three levels (exact, isomorphic = same relation sequence over the same node set, Weisfeiler-Leman hash
with intermediates labelled by type).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graph.csr import LITERAL, PAGE, CSRGraph
from schemas.config import WalkConfig

# Step conditions in the order they are checked; a candidate edge is counted under the first it fails.
STEP_CONDITIONS = (
    "inverse_hop",  # A -> B -> A
    "revisit",  # a node already on the path
    "repeated_relation",  # the same relation twice in a row
    "list_page",
    "disambiguation",
    "shortcut",  # the start already reaches the candidate in fewer hops: the question would have a shorter route
    "dead_end",  # an intermediate node with fewer than min_out_degree out-edges
    "hub",  # an intermediate node above the degree quantile
    "multiple_objects",  # final hop: the head has several objects for the relation
    "literal_answer",  # final hop: literal answers disabled
    "long_literal",  # final hop: literal answer too long to be a crisp answer
)
PATH_CONDITIONS = ("no_recent_fact",)
DEDUP_LEVELS = ("duplicate", "isomorphic", "wl_duplicate")


@dataclass
class WalkParams:
    """The derived, per-graph inputs of the sampler (flags computed once from config and graph)."""

    is_hub: np.ndarray
    hub_threshold: float
    too_long: np.ndarray  # literal nodes whose label exceeds max_literal_chars
    config: WalkConfig
    branch_edges: np.ndarray  # edges a tree's final hop can take, grouped by head (CSR order)
    branch_indptr: np.ndarray  # node i's branch edges: branch_edges[branch_indptr[i]:branch_indptr[i+1]]
    edge_fact: np.ndarray  # int64 [m]: the id of the (relation, literal object) fact an edge states; -1: to an entity
    num_facts: int  # distinct (relation, literal object) facts

    @classmethod
    def build(cls, graph: CSRGraph, config: WalkConfig) -> WalkParams:
        pages = graph.degree[graph.kind == PAGE]
        threshold = float(np.quantile(pages, config.hub_quantile)) if len(pages) else 0.0
        threshold = max(threshold, config.hub_min_degree - 1.0)  # a small slice's top pages are no hubs
        too_long = np.zeros(graph.num_nodes, bool)
        for node in np.flatnonzero(graph.kind == LITERAL):
            too_long[node] = len(graph.label(node)) > config.max_literal_chars
        branch_edges = np.flatnonzero(branchable_edges(graph))
        heads = np.repeat(np.arange(graph.num_nodes), graph.out_degree)[branch_edges]
        branch_indptr = np.concatenate([[0], np.cumsum(np.bincount(heads, minlength=graph.num_nodes))])
        edge_fact, num_facts = _literal_facts(graph)
        return cls(is_hub=graph.degree > threshold, hub_threshold=threshold, too_long=too_long, config=config,
                   branch_edges=branch_edges, branch_indptr=branch_indptr, edge_fact=edge_fact, num_facts=num_facts)


def _literal_facts(graph: CSRGraph) -> tuple[np.ndarray, int]:
    """Each edge's literal fact id (equal relation and literal object, equal id; -1 for an edge to a non-literal)
    and the number of facts."""
    literal = graph.kind[graph.dst] == LITERAL
    keys = graph.rel[literal].astype(np.int64) * graph.num_nodes + graph.dst[literal]
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.r_[True, ordered[1:] != ordered[:-1]] if len(ordered) else np.zeros(0, bool)
    ids = np.empty(len(keys), np.int64)
    ids[order] = np.cumsum(new) - 1
    edge_fact = np.full(graph.num_edges, -1, np.int64)
    edge_fact[literal] = ids
    return edge_fact, int(new.sum())


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """`np.unique` of an integer array by sorting: numpy 2's hash-based unique is tens of times slower on the
    millions of keys a ball holds."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _find(keys: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each query lies in `keys` (sorted, distinct, not empty), and whether it is there."""
    at = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    return at, keys[at] == queries


def _lookup(keys: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == query (keys sorted, distinct), 127 where no key matches."""
    if not len(keys):
        return np.full(len(queries), 127, np.int8)
    at, found = _find(keys, queries)
    return np.where(found, values[at], 127)


MAX_BALL_PAIRS = 20_000_000  # (start, node) pairs a task's shortcut balls may hold; beyond, the gate alone decides


@dataclass
class StartBalls:
    """Every node within `depth` hops of each start, with its distance: a walk's step to a node its start
    already reaches in as few hops (or fewer) is a shortcut, which the questions stage would reject
    (`fewer_hops`). Keys are start * num_nodes + node, sorted. A literal is reached only through the fact
    that states it, so the ball also holds each literal fact (`WalkParams.edge_fact`) a start reaches: keyed
    start * num_facts + fact, its distance one more than the nearest head in the ball that states it."""

    keys: np.ndarray
    dist: np.ndarray
    fact_keys: np.ndarray
    fact_dist: np.ndarray

    @classmethod
    def build(cls, graph: CSRGraph, params: WalkParams, starts: np.ndarray, depth: int) -> StartBalls:
        n, facts = graph.num_nodes, params.num_facts
        source = sorted_unique(np.asarray(starts, np.int64))
        node = source.copy()
        keys, dists = [source * n + node], [np.zeros(len(source), np.int8)]
        fact_keys, fact_dists = [np.zeros(0, np.int64)], [np.zeros(0, np.int8)]
        seen = keys[0]
        for distance in range(1, depth + 1):
            degree = graph.out_degree[node].astype(np.int64)
            if not degree.sum():
                break
            edge = np.repeat(graph.indptr[node] - np.cumsum(degree) + degree, degree) + np.arange(degree.sum())
            origin = np.repeat(source, degree)
            fact = params.edge_fact[edge]
            stated = fact >= 0  # the frontier's literal facts, also when the ball stops growing here
            fact_keys.append(origin[stated] * facts + fact[stated])
            fact_dists.append(np.full(int(stated.sum()), distance, np.int8))
            if len(seen) > MAX_BALL_PAIRS:
                break
            fresh = sorted_unique(origin * n + graph.dst[edge].astype(np.int64))
            fresh = fresh[~_find(seen, fresh)[1]]  # `seen` holds the start itself: never empty
            keys.append(fresh)
            dists.append(np.full(len(fresh), distance, np.int8))
            seen = np.sort(np.concatenate([seen, fresh]), kind="stable")  # two sorted runs: one merge
            source, node = fresh // n, fresh % n
        all_keys, all_dists = np.concatenate(keys), np.concatenate(dists)
        order = np.argsort(all_keys, kind="stable")
        # nearer levels come first, so each fact's first entry in key order holds its distance
        all_facts, all_fact_dists = np.concatenate(fact_keys), np.concatenate(fact_dists)
        order_facts = np.argsort(all_facts, kind="stable")
        all_facts, all_fact_dists = all_facts[order_facts], all_fact_dists[order_facts]
        first = np.r_[True, all_facts[1:] != all_facts[:-1]] if len(all_facts) else np.zeros(0, bool)
        return cls(all_keys[order], all_dists[order], all_facts[first], all_fact_dists[first])

    def shortcut(self, graph: CSRGraph, params: WalkParams, starts: np.ndarray, nodes: np.ndarray,
                 edges: np.ndarray, position: int) -> np.ndarray:
        """Whether each start already reaches its candidate node (over the candidate edge) in fewer than
        `position` hops: a page over any relation, a literal only as the same relation's object of a node it
        reaches in fewer than `position - 1` hops (another fact holding the same value, "1865", is no route
        to this one)."""
        fact = params.edge_fact[edges]
        literal = fact >= 0
        dist = np.empty(len(nodes), np.int8)
        dist[~literal] = _lookup(self.keys, self.dist, starts[~literal] * graph.num_nodes + nodes[~literal])
        dist[literal] = _lookup(self.fact_keys, self.fact_dist, starts[literal] * params.num_facts + fact[literal])
        return dist < position


def branchable_edges(graph: CSRGraph) -> np.ndarray:
    """Edges a tree question can end with: the head has several objects for the relation, and every one of
    them is a page with facts of its own (branches can tell them apart only over facts the graph holds; an
    object without a page fits any branch)."""
    dst = graph.dst.astype(np.int64)
    described = (graph.kind[dst] == PAGE) & (graph.out_degree[dst] > 0)
    if not len(dst):
        return described
    heads = np.repeat(np.arange(graph.num_nodes), graph.out_degree)
    # CSR edges are sorted by (head, relation): each run of one (head, relation) is one group of objects.
    starts = np.flatnonzero(np.r_[True, (heads[1:] != heads[:-1]) | (graph.rel[1:] != graph.rel[:-1])])
    every = np.minimum.reduceat(described.astype(np.int8), starts).astype(bool)
    group = np.cumsum(np.r_[True, (heads[1:] != heads[:-1]) | (graph.rel[1:] != graph.rel[:-1])]) - 1
    return ~graph.single_object & every[group]


def chain_edges(graph: CSRGraph) -> int:
    """Edges from a page to another page with facts of its own: the only steps a walk of two or more hops
    can take before its last. None in a slice whose infobox facts name pages it does not hold."""
    dst = graph.dst.astype(np.int64)
    heads = np.repeat(np.arange(graph.num_nodes), graph.out_degree)
    return int(((graph.kind[heads] == PAGE) & (graph.kind[dst] == PAGE) & (graph.out_degree[dst] > 0)
                & (dst != heads)).sum())


def start_nodes(graph: CSRGraph) -> np.ndarray:
    """Head entities with a page that are not list or disambiguation pages and have an out-edge."""
    eligible = (graph.kind == PAGE) & graph.is_head & ~graph.is_list & ~graph.is_disambiguation
    return np.flatnonzero(eligible & (graph.out_degree > 0))


def held_conditions(config: WalkConfig) -> list[str]:
    """The conditions every emitted path satisfies, recorded on the Path."""
    held = ["no_revisit", "no_list_page", "no_disambiguation", "degree_bounds", "deduplicated"]
    if config.forbid_inverse_hop:
        held.append("no_inverse_hop")
    if config.forbid_repeated_relation:
        held.append("no_repeated_relation")
    if config.forbid_shortcut:
        held.append("no_shortcut_edge")
    if config.require_single_answer:
        held.append("single_answer")
    if config.require_recent_fact:
        held.append("recent_fact")
    return held
