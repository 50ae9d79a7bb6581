"""The records of walks: the PathHops of their edges (read from the graph's relation rows or shards), the
Path record with its Weisfeiler-Leman hash, and the three dedup levels' keys and plain deduplication.
"""

from __future__ import annotations

import functools
import hashlib
import warnings
from collections import Counter
from collections.abc import Iterable

import networkx as nx
import pyarrow as pa

from graph.conditions import DEDUP_LEVELS
from graph.csr import LITERAL, CSRGraph, split_literal_key
from ground.io import stable_hash
from schemas.questions import Path, PathHop


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


def to_path(graph: CSRGraph, nodes: list[int], edges: list[int], seed: int, conditions: list[str],
            hops: dict[int, PathHop] | None = None) -> Path:
    """The Path record of a walk; `hops` may hold the PathHops of its edges, read in a batch beforehand."""
    hops = hops if hops is not None else path_hops(graph, edges)
    return path_record(graph, nodes, edges, seed, conditions, [hops[e] for e in edges])


def path_record(graph: CSRGraph, nodes: list[int], edges: list[int], seed: int, conditions: list[str],
          hops: list[PathHop]) -> Path:
    """The Path record of a walk with the given hops (empty for a path whose hops are attached later)."""
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
