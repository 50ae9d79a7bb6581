"""The reference walk: the sampler's algorithm as a plain loop over a networkx graph, kept as the readable
model and the benchmark baseline. Only tests and benchmarks import it; the walk stage never does.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

import networkx as nx
import numpy as np

from graph.conditions import WalkParams, branchable_edges
from graph.csr import LITERAL, CSRGraph
from graph.sampler import walks_per_start
from schemas.config import WalkConfig


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


def to_networkx(graph: CSRGraph) -> nx.MultiDiGraph:
    """The CSR graph as a networkx MultiDiGraph (node attribute `kind`, edge attribute `relation`)."""
    nx_graph = nx.MultiDiGraph()
    for node in range(graph.num_nodes):
        nx_graph.add_node(node, kind=int(graph.kind[node]))
    src = np.repeat(np.arange(graph.num_nodes), graph.out_degree)
    for edge in range(graph.num_edges):
        nx_graph.add_edge(int(src[edge]), int(graph.dst[edge]), key=edge, relation=int(graph.rel[edge]))
    return nx_graph


def annotated_networkx(graph: CSRGraph, params: WalkParams) -> nx.MultiDiGraph:
    """The CSR graph as networkx with the attributes `reference_walks` reads."""
    nx_graph = to_networkx(graph)
    for node, data in nx_graph.nodes(data=True):
        data.update(is_list=bool(graph.is_list[node]), is_disambiguation=bool(graph.is_disambiguation[node]),
                    degree=int(graph.degree[node]))
    branchable = branchable_edges(graph)
    for _, dst, key, data in nx_graph.edges(keys=True, data=True):
        data.update(in_window=bool(graph.in_window[key]), single_object=bool(graph.single_object[key]),
                    too_long=bool(params.too_long[dst]), branchable=bool(branchable[key]))
    return nx_graph
