"""The conditional walk sampler and its plain one-process drivers (no Beam).

`sample_walks` is vectorised over all walks of a batch (numpy over the CSR arrays): each step draws a
random out-edge, checks it against the walk conditions (`graph.conditions`) and redraws a failing one up
to `step_retries` times before the walk dies. `task_walks` runs every configured hop count over one slice
of start nodes with its own seeded RNG; `walk_task` turns a task's walks into Path records, and
`walk_graph` all tasks' into deduplicated ones in one process: the plain function behind the Beam
transform of `graph.walk_stage`.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator

import numpy as np

from graph.conditions import STEP_CONDITIONS, StartBalls, WalkParams, held_conditions, start_nodes
from graph.csr import LITERAL, CSRGraph
from graph.walk_records import deduplicate, path_hops, to_path
from schemas.config import WalkConfig
from schemas.questions import Path

_CODE = {name: code for code, name in enumerate(STEP_CONDITIONS, start=1)}


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
    balls = StartBalls.build(graph, params, starts, hops - 1) if config.forbid_shortcut and hops > 1 else None
    counts["walks:attempted"] += len(walks)
    for step in range(hops):
        final = step == hops - 1
        pending = np.flatnonzero(alive)
        branching = may_branch & (branch_step == step)
        branch_here = bool(branching.any())
        for _ in range(config.step_retries):
            if not len(pending):
                break
            path = nodes[pending, : step + 1]
            current = path[:, step]
            draw = rng.random(len(pending))
            choice = graph.indptr[current] + (draw * out_degree[current]).astype(np.int64)
            # A walk that may branch takes a branchable edge at its branch step where its node has one.
            tree = np.zeros(len(pending), bool)
            if branch_here:
                branches = params.branch_indptr[current + 1] - params.branch_indptr[current]
                tree = branching[pending] & (branches > 0)
                picked = params.branch_indptr[current[tree]] + (draw[tree] * branches[tree]).astype(np.int64)
                choice[tree] = params.branch_edges[picked]
            nxt = graph.dst[choice].astype(np.int64)
            relation = graph.rel[choice]
            reason = np.zeros(len(pending), np.int8)
            reject = functools.partial(_reject, reason)
            if step > 0:
                if config.forbid_inverse_hop:
                    reject("inverse_hop", nxt == path[:, step - 1])
                if config.forbid_repeated_relation:
                    reject("repeated_relation", relation == graph.rel[edges[pending, step - 1]])
            revisit = nxt == path[:, 0]
            for earlier in range(1, step + 1):
                revisit |= nxt == path[:, earlier]
            reject("revisit", revisit)
            reject("list_page", graph.is_list[nxt])
            reject("disambiguation", graph.is_disambiguation[nxt])
            if balls is not None and step > 0:
                unrejected = np.flatnonzero(reason == 0)  # the costliest check: only where no earlier one failed
                shortcut = np.zeros(len(pending), bool)
                shortcut[unrejected] = balls.shortcut(graph, params, path[unrejected, 0], nxt[unrejected],
                                                      choice[unrejected], step + 1)
                reject("shortcut", shortcut)
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
            for code, number in enumerate(np.bincount(reason, minlength=len(STEP_CONDITIONS) + 1)[1:], start=1):
                if number:
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


def walk_task(graph: CSRGraph, params: WalkParams, task_index: int, starts: np.ndarray) -> tuple[list[Path], Counter]:
    """One task: every configured hop count from a slice of start nodes, with its own seeded RNG."""
    walks, counts = task_walks(graph, params, task_index, starts)
    records = path_hops(graph, [edge for _, edges, _ in walks for edge in edges])
    return [to_path(graph, nodes, edges, params.config.seed, held, records) for nodes, edges, held in walks], counts


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


def start_tasks(graph: CSRGraph, size: int) -> Iterator[tuple[int, list[int]]]:
    """Start nodes in fixed-size slices; the slice index seeds the slice's RNG."""
    for index, chunk in enumerate(_chunks(start_nodes(graph), size)):
        yield index, chunk.tolist()
