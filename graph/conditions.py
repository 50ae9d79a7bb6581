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
    fact_keys: np.ndarray  # relation * num_nodes + object of every edge, sorted: the heads holding a fact
    fact_heads: np.ndarray  # the head of each edge in `fact_keys` order

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
        all_heads = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), graph.out_degree)
        keys = graph.rel.astype(np.int64) * graph.num_nodes + graph.dst.astype(np.int64)
        order = np.argsort(keys, kind="stable")
        return cls(is_hub=graph.degree > threshold, hub_threshold=threshold, too_long=too_long, config=config,
                   branch_edges=branch_edges, branch_indptr=branch_indptr, fact_keys=keys[order],
                   fact_heads=all_heads[order])


MAX_BALL_PAIRS = 20_000_000  # (start, node) pairs a task's shortcut balls may hold; beyond, the gate alone decides


@dataclass
class StartBalls:
    """Every node within `depth` hops of each start, with its distance: a walk's step to a node its start
    already reaches in as few hops (or fewer) is a shortcut, which the questions stage would reject
    (`fewer_hops`). Keys are start * num_nodes + node, sorted."""

    keys: np.ndarray
    dist: np.ndarray

    @classmethod
    def build(cls, graph: CSRGraph, starts: np.ndarray, depth: int) -> StartBalls:
        n = graph.num_nodes
        source = np.unique(np.asarray(starts, np.int64))
        node = source.copy()
        keys, dists = [source * n + node], [np.zeros(len(source), np.int8)]
        seen = keys[0]
        for distance in range(1, depth + 1):
            degree = graph.out_degree[node].astype(np.int64)
            if not degree.sum() or len(seen) > MAX_BALL_PAIRS:
                break
            first = np.repeat(graph.indptr[node].astype(np.int64) - np.cumsum(degree) + degree, degree)
            reached = np.repeat(source, degree) * n + graph.dst[first + np.arange(degree.sum())].astype(np.int64)
            fresh = np.setdiff1d(reached, seen)  # sorted, distinct
            keys.append(fresh)
            dists.append(np.full(len(fresh), distance, np.int8))
            seen = np.union1d(seen, fresh)
            source, node = fresh // n, fresh % n
        all_keys, all_dists = np.concatenate(keys), np.concatenate(dists)
        order = np.argsort(all_keys, kind="stable")
        return cls(all_keys[order], all_dists[order])

    def distance(self, graph: CSRGraph, starts: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Hops from each start to its node (127 where the node lies outside the ball)."""
        keys = starts * graph.num_nodes + nodes
        at = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        found = (self.keys[at] == keys) if len(self.keys) else np.zeros(len(keys), bool)
        return np.where(found, self.dist[at] if len(self.keys) else 0, 127)

    def shortcut(self, graph: CSRGraph, params: WalkParams, starts: np.ndarray, nodes: np.ndarray,
                 relations: np.ndarray, position: int) -> np.ndarray:
        """Whether each start already reaches its candidate node in fewer than `position` hops: a page over any
        relation, a literal only as the same relation's object of a node it reaches in fewer than
        `position - 1` hops (another fact holding the same value, "1865", is no route to this one)."""
        literal = graph.kind[nodes] == LITERAL
        short = ~literal & (self.distance(graph, starts, nodes) < position)
        index = np.flatnonzero(literal)
        if len(index):
            keys = relations[index].astype(np.int64) * graph.num_nodes + nodes[index]
            lo, hi = np.searchsorted(params.fact_keys, keys, "left"), np.searchsorted(params.fact_keys, keys, "right")
            count = hi - lo
            rows = np.repeat(np.arange(len(index)), count)
            heads = params.fact_heads[np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())]
            near = self.distance(graph, starts[index][rows], heads) < position - 1
            short[index[np.unique(rows[near])]] = True
        return short


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
