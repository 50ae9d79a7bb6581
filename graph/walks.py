"""Conditional random walks over the CSR graph: the relational skeletons of multi-hop questions.

A walk starts at a head entity and takes `k` hops along infobox relations. Each step draws a random
out-edge and checks it against the walk conditions; a failing candidate is counted under its condition
and another edge is drawn (up to `step_retries` times) before the walk dies. Finished walks must contain
a fact inside the recency window; duplicates are then removed at three levels (exact, isomorphic = same
relation sequence over the same node set, Weisfeiler-Leman hash with intermediates labelled by type).

The sampler is vectorised over all walks of a batch (numpy over the CSR arrays). `reference_walks` is
the same algorithm as a plain loop over a networkx graph, kept as the readable model and the benchmark
baseline. `run_walks` runs sampling as a Beam transform: start nodes are split into tasks spread over
workers, the graph travels as a side input without its relation rows (`load_csr(keep_relations=False)`): the hops of
the kept paths are read back from the relation shards by row when they are written.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import random
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path as FsPath

import apache_beam as beam
import networkx as nx
import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from graph.csr import LITERAL, PAGE, CSRGraph, RelationSource, excluded_relations, load_csr, split_literal_key
from ground.errors import UserError
from ground.io import atomic_write_text, read_manifest, stable_hash, write_records
from ground.stage import begin_stage
from ground.storage import as_path
from ground.yields import below_floor
from runtime.beam import BoundedHeapDoFn, pipeline_options
from schemas.config import BeamOptions, WalkConfig
from schemas.manifest import Manifest
from schemas.questions import Path, PathHop

STAGE = "walk"
DEFAULT_WINDOW_DAYS = 182

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
_CODE = {name: code for code, name in enumerate(STEP_CONDITIONS, start=1)}


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


def _reject(reason: np.ndarray, name: str, mask: np.ndarray) -> None:
    """Mark candidates failing `name` unless an earlier condition already rejected them."""
    reason[(reason == 0) & mask] = _CODE[name]


def sample_walks(
    graph: CSRGraph, params: WalkParams, starts: np.ndarray, hops: int, rng: np.random.Generator,
    may_branch: np.ndarray | None = None, branch_step: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, Counter]:
    """Vectorised conditional walks of exactly `hops` hops, `walks_per_start` from each start.

    `may_branch[w]` makes walk w take a branchable edge (`branchable_edges`) at step `branch_step[w]` (default:
    the final step) where its node has one, and waives the single-object condition there: its question
    becomes a tree whose branches on the entity reached decide between the objects. Returns (nodes
    [W, hops+1], edges [W, hops], counts) for the walks that satisfied every condition.
    """
    config = params.config
    counts: Counter = Counter()
    walks = np.repeat(np.asarray(starts, np.int64), walks_per_start(config, hops))
    nodes = np.full((len(walks), hops + 1), -1, np.int64)
    edges = np.full((len(walks), hops), -1, np.int64)
    nodes[:, 0] = walks
    alive = np.ones(len(walks), bool)
    may_branch = np.zeros(len(walks), bool) if may_branch is None else np.asarray(may_branch, bool)
    branch_step = np.full(len(walks), hops - 1) if branch_step is None else np.asarray(branch_step, np.int64)
    took_branch = np.zeros(len(walks), bool)
    out_degree = graph.out_degree
    balls = StartBalls.build(graph, starts, hops - 1) if config.forbid_shortcut and hops > 1 else None
    counts["walks:attempted"] += len(walks)
    for step in range(hops):
        final = step == hops - 1
        pending = np.flatnonzero(alive)
        for _ in range(config.step_retries):
            if not len(pending):
                break
            current = nodes[pending, step]
            draw = rng.random(len(pending))
            choice = graph.indptr[current] + (draw * out_degree[current]).astype(np.int64)
            # A walk that may branch takes a branchable edge at its branch step where its node has one.
            branches = params.branch_indptr[current + 1] - params.branch_indptr[current]
            tree = may_branch[pending] & (branch_step[pending] == step) & (branches > 0)
            picked = params.branch_indptr[current[tree]] + (draw[tree] * branches[tree]).astype(np.int64)
            choice[tree] = params.branch_edges[picked]
            nxt = graph.dst[choice].astype(np.int64)
            relation = graph.rel[choice]
            reason = np.zeros(len(pending), np.int8)
            reject = functools.partial(_reject, reason)
            if step > 0:
                if config.forbid_inverse_hop:
                    reject("inverse_hop", nxt == nodes[pending, step - 1])
                if config.forbid_repeated_relation:
                    reject("repeated_relation", relation == graph.rel[edges[pending, step - 1]])
            reject("revisit", (nodes[pending, : step + 1] == nxt[:, None]).any(axis=1))
            reject("list_page", graph.is_list[nxt])
            reject("disambiguation", graph.is_disambiguation[nxt])
            if balls is not None and step > 0:
                reject("shortcut", balls.shortcut(graph, params, nodes[pending, 0], nxt, relation, step + 1))
            if not final:
                reject("dead_end", out_degree[nxt] < max(config.min_out_degree, 1))
                reject("hub", params.is_hub[nxt])
            else:
                if config.require_single_answer:
                    reject("multiple_objects", ~graph.single_object[choice] & ~tree)
                if config.allow_literal_answers:
                    reject("long_literal", params.too_long[nxt])
                else:
                    reject("literal_answer", graph.kind[nxt] == LITERAL)
            ok = reason == 0
            took_branch[pending[ok & tree]] = True
            nodes[pending[ok], step + 1] = nxt[ok]
            edges[pending[ok], step] = choice[ok]
            for code, number in zip(*np.unique(reason[~ok], return_counts=True), strict=True):
                counts[f"rejected:{STEP_CONDITIONS[code - 1]}"] += int(number)
            pending = pending[~ok]
        alive[pending] = False
        counts["walks:died"] += len(pending)
    if config.require_recent_fact and hops:
        recent = graph.in_window[edges].any(axis=1)
        counts["rejected:no_recent_fact"] += int((alive & ~recent).sum())
        alive &= recent
    counts["walks:completed"] += int(alive.sum())
    counts["walks:may_branch"] += int(may_branch.sum())
    counts["walks:branched"] += int((alive & took_branch).sum())
    return nodes[alive], edges[alive], counts


def walks_per_start(config: WalkConfig, hops: int) -> int:
    """Walks from each start for a hop count: longer walks die more often (every step must avoid shortcuts,
    hubs and dead ends) and find fewer distinct paths, so each hop beyond two gets `long_walk_growth` times more."""
    return round(config.walks_per_start * config.long_walk_growth ** max(hops - 2, 0))


def reference_walks(
    graph: nx.MultiDiGraph, starts: Iterable[int], hops: int, config: WalkConfig, hub_threshold: float, seed: int
) -> tuple[list[tuple[list[int], list[int]]], Counter]:
    """The same conditional walk as `sample_walks`, as a plain loop over networkx (model and baseline).

    Nodes carry `kind`, `is_list`, `is_disambiguation`, `degree`; edges carry `relation`, `in_window`,
    `single_object`, `too_long`, `branchable`. Returns [(node ids, edge keys)] of accepted walks and the counts.
    """
    rng = random.Random(seed)
    branch_rng = random.Random(f"{seed}-branch")
    branchable = {(u, v, k) for u, v, k, data in graph.edges(keys=True, data=True) if data["branchable"]}
    counts: Counter = Counter()
    accepted = []
    for start in starts:
        out_edges = list(graph.out_edges(start, keys=True, data=True))
        reach = nx.single_source_shortest_path_length(graph, start, cutoff=hops - 1)
        for _ in range(walks_per_start(config, hops)):
            counts["walks:attempted"] += 1
            may_branch = branch_rng.random() < config.tree_share
            branch_step = branch_rng.randrange(hops)
            counts["walks:may_branch"] += may_branch
            path_nodes, path_edges, path_rels, recent, took_branch = [start], [], [], False, False
            for step in range(hops):
                final = step == hops - 1
                candidates = out_edges if step == 0 else list(graph.out_edges(path_nodes[-1], keys=True, data=True))
                tree = step == branch_step and may_branch and any(e[:3] in branchable for e in candidates)
                if tree:
                    candidates = [e for e in candidates if e[:3] in branchable]
                for _ in range(config.step_retries):
                    _, nxt, key, data = rng.choice(candidates)
                    node = graph.nodes[nxt]
                    if step > 0 and config.forbid_inverse_hop and nxt == path_nodes[-2]:
                        reason = "inverse_hop"
                    elif step > 0 and config.forbid_repeated_relation and data["relation"] == path_rels[-1]:
                        reason = "repeated_relation"
                    elif nxt in path_nodes:
                        reason = "revisit"
                    elif node["is_list"]:
                        reason = "list_page"
                    elif node["is_disambiguation"]:
                        reason = "disambiguation"
                    elif config.forbid_shortcut and _shortcut(graph, reach, nxt, data["relation"], step + 1):
                        reason = "shortcut"
                    elif not final and graph.out_degree(nxt) < max(config.min_out_degree, 1):
                        reason = "dead_end"
                    elif not final and node["degree"] > hub_threshold:
                        reason = "hub"
                    elif final and config.require_single_answer and not tree and not data["single_object"]:
                        reason = "multiple_objects"
                    elif final and config.allow_literal_answers and data["too_long"]:
                        reason = "long_literal"
                    elif final and not config.allow_literal_answers and node["kind"] == LITERAL:
                        reason = "literal_answer"
                    else:
                        reason = None
                    if reason is None:
                        path_nodes.append(nxt)
                        path_edges.append(key)
                        path_rels.append(data["relation"])
                        recent = recent or data["in_window"]
                        took_branch = took_branch or tree
                        break
                    counts[f"rejected:{reason}"] += 1
                else:
                    counts["walks:died"] += 1
                    break
            else:
                if config.require_recent_fact and not recent:
                    counts["rejected:no_recent_fact"] += 1
                    continue
                counts["walks:completed"] += 1
                counts["walks:branched"] += took_branch
                accepted.append((path_nodes, path_edges))
    return accepted, counts


def _shortcut(graph: nx.MultiDiGraph, reach: dict[int, int], node: int, relation: int, position: int) -> bool:
    """`StartBalls.shortcut` over networkx: the start reaches `node` (hops in `reach`) in fewer than `position`
    hops; a literal only as `relation`'s object of a node reached in fewer than `position - 1`."""
    if graph.nodes[node]["kind"] != LITERAL:
        return reach.get(node, position) < position
    return any(data["relation"] == relation and reach.get(head, position) < position - 1
               for head, _, data in graph.in_edges(node, data=True))


def annotated_networkx(graph: CSRGraph, params: WalkParams) -> nx.MultiDiGraph:
    """The CSR graph as networkx with the attributes `reference_walks` reads."""
    nx_graph = graph.to_networkx()
    for node, data in nx_graph.nodes(data=True):
        data.update(is_list=bool(graph.is_list[node]), is_disambiguation=bool(graph.is_disambiguation[node]),
                    degree=int(graph.degree[node]))
    branchable = branchable_edges(graph)
    for _, dst, key, data in nx_graph.edges(keys=True, data=True):
        data.update(in_window=bool(graph.in_window[key]), single_object=bool(graph.single_object[key]),
                    too_long=bool(params.too_long[dst]), branchable=bool(branchable[key]))
    return nx_graph


@functools.lru_cache(maxsize=1 << 16)
def _ascii_label(text: str) -> str:
    """networkx hashes ASCII labels only: titles and relation names go in as short digests."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def wl_hash(graph: CSRGraph, nodes: list[int], edges: list[int]) -> str:
    """Weisfeiler-Leman hash of a path with start and answer labelled by name, intermediates by type.

    Two paths with the same start, answer, relation structure and intermediate types read as the same
    question once intermediates are obfuscated, so they count as duplicates.
    """
    path_graph = nx.DiGraph()
    for position, node in enumerate(nodes):
        named = position in (0, len(nodes) - 1)
        label = graph.keys[node] if named else f"type:{graph.entity_type[node]}"
        path_graph.add_node(position, label=_ascii_label(label))
    for position, edge in enumerate(edges):
        path_graph.add_edge(position, position + 1, relation=_ascii_label(graph.relation_names[graph.rel[edge]]))
    with warnings.catch_warnings():  # networkx notes that directed hashes changed in 3.5; ours are all 3.6
        warnings.simplefilter("ignore", UserWarning)
        return nx.weisfeiler_lehman_graph_hash(path_graph, node_attr="label", edge_attr="relation", iterations=3)


HOP_COLUMNS = [name for name in PathHop.model_fields if name != "in_window"]  # what a hop copies from its row


def path_hops(graph: CSRGraph, edges: Iterable[int]) -> dict[int, PathHop]:
    """PathHop records of CSR edges, read in one batch from the graph's relation rows, or by row from its
    relation shards when it holds none (`load_csr(keep_relations=False)`)."""
    unique = sorted(set(int(e) for e in edges))
    if graph.relations is None:
        found = graph.source.rows(graph.source_row[unique], HOP_COLUMNS) if unique else {}
        rows = [found[int(graph.source_row[edge])] for edge in unique]
    else:
        rows = graph.relations.take(pa.array(graph.edge_row[unique], pa.int64())).to_pylist() if unique else []
    return {edge: hop_record(row, bool(graph.in_window[edge])) for edge, row in zip(unique, rows, strict=True)}


def hop_record(row: dict, in_window: bool) -> PathHop:
    """The PathHop of one relation row."""
    return PathHop.model_validate({**{name: row[name] for name in HOP_COLUMNS}, "in_window": in_window})


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


def to_path(graph: CSRGraph, nodes: list[int], edges: list[int], seed: int, conditions: list[str],
            hops: dict[int, PathHop] | None = None) -> Path:
    """The Path record of a walk; `hops` may hold the PathHops of its edges, read in a batch beforehand."""
    hops = hops if hops is not None else path_hops(graph, edges)
    return _path(graph, nodes, edges, seed, conditions, [hops[e] for e in edges])


def _path(graph: CSRGraph, nodes: list[int], edges: list[int], seed: int, conditions: list[str],
          hops: list[PathHop]) -> Path:
    titles = [graph.label(n) for n in nodes]
    relations = [graph.relation_names[graph.rel[e]] for e in edges]
    answer = nodes[-1]
    answer_type = split_literal_key(graph.keys[answer])[0] if graph.kind[answer] == LITERAL else "entity"
    return Path(
        path_id=stable_hash(titles, relations),
        start=titles[0],
        nodes=titles,
        hops=hops,
        answer=titles[-1],
        answer_type=answer_type,
        seed=seed,
        conditions=conditions,
        wl_hash=wl_hash(graph, nodes, edges),
    )


def walk_task(graph: CSRGraph, params: WalkParams, task_index: int, starts: np.ndarray) -> tuple[list[Path], Counter]:
    """One task: every configured hop count from a slice of start nodes, with its own seeded RNG."""
    walks, counts = task_walks(graph, params, task_index, starts)
    records = path_hops(graph, [edge for _, edges, _ in walks for edge in edges])
    return [to_path(graph, nodes, edges, params.config.seed, held, records) for nodes, edges, held in walks], counts


def task_walks(graph: CSRGraph, params: WalkParams, task_index: int,
               starts: np.ndarray) -> tuple[list[tuple[list[int], list[int], list[str]]], Counter]:
    """`walk_task`'s walks before records are built: (node ids, edge ids, conditions held) of each."""
    config = params.config
    conditions = held_conditions(config)
    branching = [c for c in conditions if c != "single_answer"] + ["branching_final_hop"]
    walks = []
    counts: Counter = Counter()
    for hops in config.hops:
        rng = np.random.default_rng([config.seed, task_index, hops])
        # A stream of its own, so the walks themselves do not depend on the tree share.
        branch = np.random.default_rng([config.seed, task_index, hops, 1])
        may_branch = branch.random(len(starts) * walks_per_start(config, hops)) < config.tree_share
        branch_step = branch.integers(0, hops, len(may_branch))  # which hop branches: any, the answer's too
        nodes, edges, step_counts = sample_walks(graph, params, starts, hops, rng, may_branch, branch_step)
        counts.update(step_counts)
        # Exact repeats are dropped here, before records are built; repeats across tasks go in `deduplicate`.
        unique = np.unique(np.hstack([nodes, edges]), axis=0) if len(nodes) else np.hstack([nodes, edges])
        counts["rejected:duplicate"] += len(nodes) - len(unique)
        nodes, edges = unique[:, : hops + 1], unique[:, hops + 1 :]
        for row_nodes, row_edges in zip(nodes.tolist(), edges.tolist(), strict=True):
            walks.append((row_nodes, row_edges, conditions if graph.single_object[row_edges[-1]] else branching))
    return walks, counts


def dedup_keys(path: Path, relations: list[str] | None = None) -> dict[str, str]:
    """The key of each dedup level: exact sequence, same relations over the same node set, WL hash
    (`relations`: the hops' relations, for a path whose hops are not attached yet)."""
    relations = relations if relations is not None else [h.relation for h in path.hops]
    return {
        "duplicate": stable_hash(path.nodes, relations),
        "isomorphic": stable_hash(sorted(path.nodes), relations),
        "wl_duplicate": path.wl_hash,
    }


def deduplicate(paths: Iterable[Path]) -> tuple[list[Path], Counter]:
    """Keep the first path (by path_id) of each group at every dedup level; count the rest (no Beam)."""
    kept = sorted(paths, key=lambda p: p.path_id)
    counts: Counter = Counter()
    for level in DEDUP_LEVELS:
        seen: set[str] = set()
        survivors = []
        for path in kept:
            key = dedup_keys(path)[level]
            if key in seen:
                counts[f"rejected:{level}"] += 1
                continue
            seen.add(key)
            survivors.append(path)
        kept = survivors
    return kept, counts


def walk_graph(graph: CSRGraph, config: WalkConfig) -> tuple[list[Path], Counter]:
    """All walks of a graph in one process: the plain function behind the Beam transform."""
    params = WalkParams.build(graph, config)
    starts = start_nodes(graph)
    paths: list[Path] = []
    counts: Counter = Counter()
    for index, chunk in enumerate(_chunks(starts, config.starts_per_task)):
        task_paths, task_counts = walk_task(graph, params, index, chunk)
        paths += task_paths
        counts.update(task_counts)
    kept, dedup_counts = deduplicate(paths)
    counts.update(dedup_counts)
    return _limit(kept, config, counts), counts


def _limit(paths: list[Path], config: WalkConfig, counts: Counter) -> list[Path]:
    paths = sorted(paths, key=lambda p: p.path_id)
    if config.max_paths is not None and len(paths) > config.max_paths:
        counts["rejected:max_paths"] += len(paths) - config.max_paths
        paths = paths[: config.max_paths]
    counts["paths:kept"] = len(paths)
    return paths


def _chunks(array: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for offset in range(0, len(array), size):
        yield array[offset : offset + size]


def _tasks(graph: CSRGraph, size: int) -> Iterator[tuple[int, list[int]]]:
    """Start nodes in fixed-size slices; the slice index seeds the slice's RNG."""
    for index, chunk in enumerate(_chunks(start_nodes(graph), size)):
        yield index, chunk.tolist()


class _SampleTask(BoundedHeapDoFn):
    """Beam step: sample one task's walks against the graph side input; counts go to a tagged output."""

    def __init__(self, config: WalkConfig):
        self.config = config
        self._params: tuple[CSRGraph, WalkParams] | None = None

    def process(self, task: tuple[int, list[int]], graph: CSRGraph) -> Iterator:
        index, starts = task
        if self._params is None or self._params[0] is not graph:  # derive once per graph, not per task
            self._params = (graph, WalkParams.build(graph, self.config))
        params = self._params[1]
        walks, counts = task_walks(graph, params, index, np.asarray(starts, np.int64))
        yield beam.pvalue.TaggedOutput("counts", dict(counts))
        for nodes, edges, held in walks:
            path = _path(graph, nodes, edges, self.config.seed, held, [])
            keys = dedup_keys(path, [graph.relation_names[graph.rel[edge]] for edge in edges])
            hops = tuple((int(graph.source_row[edge]), bool(graph.in_window[edge])) for edge in edges)
            yield path.path_id, tuple(keys[level] for level in DEDUP_LEVELS), path.model_dump_json().encode(), hops


# Between Beam steps a path travels as (path_id, dedup keys, JSON bytes without hops, (relation source row,
# in window) of each hop): cheap to encode and group. The hops are read from the relation shards when the
# kept paths are written, so no walk worker holds the relation rows.
PathItem = tuple[str, tuple[str, ...], bytes, tuple[tuple[int, bool], ...]]


class _DedupLevel(beam.PTransform):
    """Keep the smallest path_id per key of one dedup level; emit a count of the dropped ones."""

    def __init__(self, level: str):
        super().__init__(f"Dedup_{level}")
        self.level = level

    def expand(self, paths):
        level, position = self.level, DEDUP_LEVELS.index(self.level)
        grouped = (
            paths
            | "Key" >> beam.Map(lambda item: (item[1][position], item))
            | "Group" >> beam.GroupByKey()
        )
        kept = grouped | "First" >> beam.Map(lambda kv: min(kv[1]))
        dropped = grouped | "Dropped" >> beam.Map(lambda kv: {f"rejected:{level}": len(list(kv[1])) - 1})
        return kept, dropped


def _merge_counts(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: Counter = Counter()
    for item in dicts:
        total.update(item)
    return dict(total)


def _write_shard(shard: tuple[int, Iterable[PathItem]], folder: str, shards: int, source: RelationSource) -> str:
    """Write one shard of paths, their hops read by row from the relation shards (a row group at a time)."""
    index, items = shard
    items = sorted(items)
    rows = source.rows((row for *_, hops in items for row, _ in hops), HOP_COLUMNS)
    paths = [Path.model_validate_json(payload).model_copy(
                 update={"hops": [hop_record(rows[row], in_window) for row, in_window in hops]})
             for _, _, payload, hops in items]
    path = as_path(folder) / f"paths-{index:05d}-of-{shards:05d}.parquet"
    write_records(Path, paths, path)
    return path.name


class WalkTransform(beam.PTransform):
    """Graph folder -> CSR graph (a side input) -> start-node tasks -> sampled, deduplicated paths written
    as shards; counts written as JSON. The graph is built by a pipeline step from the parquet files, so it
    is never part of the pipeline's definition."""

    def __init__(self, graph_dir: FsPath, config: WalkConfig, out_dir: FsPath):
        super().__init__()
        self.graph_dir, self.config, self.out_dir = str(graph_dir), config, out_dir

    def expand(self, pipeline):
        config = self.config
        graph = (
            pipeline
            | "GraphDir" >> beam.Create([self.graph_dir])
            | "LoadGraph" >> beam.Map(load_csr, as_of=config.as_of, window_days=config.window_days,
                                      exclude_relations=config.exclude_relations, mapped_only=config.mapped_only,
                                      keep_relations=False)
        )
        sampled = (
            graph
            | "Tasks" >> beam.FlatMap(_tasks, config.starts_per_task)
            | "Reshuffle" >> beam.Reshuffle()
            | "Sample" >> beam.ParDo(_SampleTask(config), graph=beam.pvalue.AsSingleton(graph)).with_outputs(
                "counts", main="paths"
            )
        )
        build_counts = graph | "GraphCounts" >> beam.Map(
            lambda g: {**g.build_counts, "starts:eligible": len(start_nodes(g)), "graph:chain_edges": chain_edges(g)}
        )
        paths, count_parts = sampled.paths, [sampled.counts, build_counts]
        for level in DEDUP_LEVELS:
            paths, dropped = paths | _DedupLevel(level)
            count_parts.append(dropped)
        kept, limit_counts = paths | _Limit(config.max_paths)
        folder = str(self.out_dir / "paths")
        shards = config.shards
        written = (
            kept
            | "Shard" >> beam.Map(lambda item: (int(item[0], 16) % shards, item))
            | "GroupShard" >> beam.GroupByKey()
            | "Write" >> beam.Map(_write_shard, folder=folder, shards=shards,
                                   source=beam.pvalue.AsSingleton(graph | "Source" >> beam.Map(lambda g: g.source)))
        )
        counts_path = str(self.out_dir / "counts.json")
        (
            count_parts + [limit_counts]
            | "FlattenCounts" >> beam.Flatten()
            | "SumCounts" >> beam.CombineGlobally(_merge_counts)
            | "WriteCounts" >> beam.Map(lambda c: atomic_write_text(counts_path, json.dumps(c, sort_keys=True)))
        )
        return written


class _Limit(beam.PTransform):
    """Keep the `max_paths` smallest path ids (all paths when None); count kept and dropped paths."""

    def __init__(self, max_paths: int | None):
        super().__init__()
        self.max_paths = max_paths

    def expand(self, paths):
        if self.max_paths is None:
            kept = paths
        else:
            kept = (
                paths
                | "Smallest" >> beam.combiners.Top.Smallest(self.max_paths)
                | "Flatten" >> beam.FlatMap(lambda chosen: chosen)
            )
        total = paths | "CountAll" >> beam.combiners.Count.Globally()
        kept_count = kept | "CountKept" >> beam.combiners.Count.Globally()
        counts = total | "Counts" >> beam.Map(
            lambda all_, kept_: {"paths:kept": kept_, "rejected:max_paths": all_ - kept_},
            kept_=beam.pvalue.AsSingleton(kept_count),
        )
        return kept, counts


def resolve_window(graph_dir: FsPath, config: WalkConfig) -> tuple[dt.date, int]:
    """The as-of date and recency window: the config's, else the graph manifest's, else today / 182 days."""
    manifest = read_manifest(graph_dir)
    as_of = config.as_of or (manifest.as_of.date() if manifest and manifest.as_of else None)
    window = config.window_days or (manifest.window_days if manifest and manifest.window_days else None)
    return as_of or dt.datetime.now(dt.UTC).date(), window or DEFAULT_WINDOW_DAYS


def run_walks(
    graph_dir: str | FsPath,
    out_dir: str | FsPath,
    config: WalkConfig,
    beam: BeamOptions | None = None,
    beam_args: Iterable[str] = (),
) -> Manifest:
    """Stage `walk`: sample conditional walks from stage 1's graph into `out_dir/paths/*.parquet`."""
    graph_dir, out_dir = as_path(graph_dir), as_path(out_dir)
    as_of, window_days = resolve_window(graph_dir, config)
    resolved = config.model_copy(update={"as_of": as_of, "window_days": window_days,
                                         "exclude_relations": excluded_relations(config.exclude_relations)})
    run = begin_stage(STAGE, out_dir, resolved, upstream_dirs={"extract": graph_dir})
    if run.done:
        return run.finished
    _run_pipeline(graph_dir, resolved, out_dir, beam, list(beam_args))
    counts = Counter({f"rejected:{name}": 0 for name in STEP_CONDITIONS + PATH_CONDITIONS + DEDUP_LEVELS})
    counts.update(json.loads((out_dir / "counts.json").read_text()))
    (out_dir / "counts.json").unlink()
    shards = sorted(p.name for p in (out_dir / "paths").glob("*.parquet"))
    return run.finish(
        dict(counts),
        {"paths": [f"paths/{name}" for name in shards]},
        seed=config.seed,
        window_days=window_days,
        as_of=dt.datetime.combine(as_of, dt.time(), dt.UTC),
    )


def _run_pipeline(graph_dir: FsPath, config: WalkConfig, out_dir: FsPath, options: BeamOptions | None, args: list[str]) -> None:
    with beam.Pipeline(options=pipeline_options(options, args)) as pipeline:
        _ = pipeline | "Walk" >> WalkTransform(graph_dir, config, out_dir)


def register(subparsers) -> None:
    """`hopsmith walk`: stage 1's graph -> conditional random walks (Path records)."""
    defaults = WalkConfig()
    parser = subparsers.add_parser(
        "walk",
        help="stage 2a: conditional random walks over the graph -> relational paths",
        description="Sample relational paths from head entities over infobox relations, with the walk "
        "conditions counted per rejection, and write OUT/paths/*.parquet and manifest.json. Unknown --options "
        "are Apache Beam pipeline options.",
    )
    parser.add_argument("--graph", default="out/graph", help="stage 1 output folder (default: %(default)s)")
    parser.add_argument("--out", default="out/paths", help="output folder (default: %(default)s)")
    parser.add_argument("--hops", type=int, nargs="+", default=defaults.hops, help="path lengths, 1..8 (default: 2 3 4)")
    parser.add_argument("--walks-per-start", type=int, default=defaults.walks_per_start)
    parser.add_argument("--max-paths", type=int, default=None, help="keep at most this many paths")
    parser.add_argument("--hub-quantile", type=float, default=defaults.hub_quantile,
                        help="nodes above this degree quantile are not used as intermediates (default: %(default)s)")
    parser.add_argument("--min-out-degree", type=int, default=defaults.min_out_degree,
                        help="intermediate nodes need at least this many out-edges (default: %(default)s)")
    parser.add_argument("--step-retries", type=int, default=defaults.step_retries,
                        help="candidate edges tried per step before a walk dies (default: %(default)s)")
    parser.add_argument("--no-recent-fact", action="store_true", help="do not require a fact inside the recency window")
    parser.add_argument("--no-literal-answers", action="store_true", help="answers must be entities")
    parser.add_argument("--allow-multiple-objects", action="store_true",
                        help="do not require the final hop to have a single object")
    parser.add_argument("--include-relation", action="append", default=[], metavar="NAME",
                        help="walk a relation excluded by default (e.g. links_to); repeatable")
    parser.add_argument("--exclude-relation", action="append", default=[], metavar="NAME",
                        help="never walk this relation; repeatable")
    parser.add_argument("--include-unmapped", action="store_true",
                        help="also walk infobox parameters that map to no ontology property")
    parser.add_argument("--as-of", type=dt.date.fromisoformat, help="snapshot date (default: the graph's)")
    parser.add_argument("--window", type=int, dest="window_days", help="recency window in days (default: the graph's)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--shards", type=int, default=defaults.shards)
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    if read_manifest(args.graph) is None:
        raise UserError(f"--graph {args.graph} holds no finished stage 1 output: run `hopsmith extract` first")
    excluded = [r for r in excluded_relations(None) if r not in args.include_relation] + args.exclude_relation
    try:
        config = WalkConfig(
            hops=args.hops, walks_per_start=args.walks_per_start, max_paths=args.max_paths,
            hub_quantile=args.hub_quantile, min_out_degree=args.min_out_degree, step_retries=args.step_retries,
            require_recent_fact=not args.no_recent_fact, allow_literal_answers=not args.no_literal_answers,
            require_single_answer=not args.allow_multiple_objects, exclude_relations=excluded,
            mapped_only=not args.include_unmapped,
            as_of=args.as_of, window_days=args.window_days, seed=args.seed, shards=args.shards,
        )
    except ValidationError as error:
        raise UserError("; ".join(e["msg"] for e in error.errors())) from error
    manifest = run_walks(args.graph, args.out, config, beam_args=beam_args)
    counts = manifest.counts
    print(f"walk: {counts['paths:kept']} paths from {counts['starts:eligible']} start entities "
          f"({counts['walks:attempted']} walks, {counts['walks:completed']} completed) -> {args.out}")
    for key, value in counts.items():
        if key.startswith("rejected:"):
            print(f"  {key:<28} {value}")
    for line in below_floor(STAGE, counts):
        print(line)
    return 0
