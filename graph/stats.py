"""Statistics of a stage-1 graph: size, relation histogram, degree distribution and head entities (the
figures `hopsmith graph-stats` prints)."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np

from graph.model import ENTITY, LITERAL, MISSING
from knowledge.ontology import load_ontology

DEGREE_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 1000)


def graph_stats(graph: nx.MultiDiGraph, top: int = 20) -> dict:
    """Nodes by kind, edges by source, the `top` relations, entity types (and the share typed by an ontology
    class), mapped edges, head entities and degrees.

    Degrees count entity-to-entity edges of nodes with a page (literals are values, not neighbours).
    """
    kinds = Counter(data["kind"] for _, data in graph.nodes(data=True))
    ontology = load_ontology()
    entities = [node for node, data in graph.nodes(data=True) if data["kind"] == ENTITY]
    relations = Counter(data["relation"] for _, _, data in graph.edges(data=True))
    sources = Counter(data["source"] for _, _, data in graph.edges(data=True))
    value_types = Counter(data["value_type"] for _, _, data in graph.edges(data=True))
    entity_edges = graph.edge_subgraph(
        [(u, v, k) for u, v, k, data in graph.edges(keys=True, data=True) if data["value_type"] == "entity"]
    )
    out_degree = np.array([entity_edges.out_degree(n) if n in entity_edges else 0 for n in entities], dtype=np.int64)
    in_degree = np.array([entity_edges.in_degree(n) if n in entity_edges else 0 for n in entities], dtype=np.int64)
    entity_graph = nx.DiGraph(graph.subgraph([n for n, d in graph.nodes(data=True) if d["kind"] != LITERAL]))
    components = sorted((len(c) for c in nx.weakly_connected_components(entity_graph)), reverse=True)
    return {
        "nodes": graph.number_of_nodes(),
        "nodes_by_kind": {kind: kinds.get(kind, 0) for kind in (ENTITY, MISSING, LITERAL)},
        "edges": graph.number_of_edges(),
        "edges_by_source": dict(sorted(sources.items())),
        "edges_by_value_type": dict(sorted(value_types.items())),
        "relation_count": len(relations),
        "relations_top": dict(relations.most_common(top)),
        "entity_types": dict(Counter(graph.nodes[n]["type"] for n in entities).most_common(top)),
        "typed_entities": sum(ontology.find_class(graph.nodes[n]["type"] or "") is not None for n in entities),
        "typed_share": round(sum(ontology.find_class(graph.nodes[n]["type"] or "") is not None for n in entities)
                             / len(entities), 4) if entities else 0.0,
        "infobox_edges_mapped": sum(bool(d.get("mapped")) for _, _, d in graph.edges(data=True)),
        "head_entities": sum(bool(graph.nodes[n]["is_head"]) for n in entities),
        "list_pages": sum(bool(graph.nodes[n]["is_list"]) for n in entities),
        "out_degree": degree_summary(out_degree),
        "in_degree": degree_summary(in_degree),
        "weak_components": len(components),
        "largest_component": components[0] if components else 0,
    }


def degree_summary(degrees: np.ndarray) -> dict:
    """Percentiles and a bucketed histogram ("0", "1", "2-4", ..., "1000+") of a degree array."""
    if degrees.size == 0:
        return {"mean": 0.0, "histogram": {}}
    summary = {
        "mean": round(float(degrees.mean()), 3),
        "median": float(np.median(degrees)),
        "p90": round(float(np.percentile(degrees, 90)), 3),
        "p99": round(float(np.percentile(degrees, 99)), 3),
        "max": int(degrees.max()),
    }
    histogram = {}
    for low, high in zip(DEGREE_BUCKETS, [*DEGREE_BUCKETS[1:], None], strict=True):
        inside = degrees >= low if high is None else (degrees >= low) & (degrees < high)
        label = f"{low}+" if high is None else str(low) if high == low + 1 else f"{low}-{high - 1}"
        histogram[label] = int(inside.sum())
    summary["histogram"] = histogram
    return summary


def format_stats(stats: dict) -> str:
    lines = [
        f"nodes              {stats['nodes']}  " + "  ".join(f"{k}={v}" for k, v in stats["nodes_by_kind"].items()),
        f"edges              {stats['edges']}  " + "  ".join(f"{k}={v}" for k, v in stats["edges_by_source"].items()),
        f"head entities      {stats['head_entities']}",
        f"typed entities     {stats['typed_entities']} ({stats['typed_share']:.1%} with an ontology class)",
        f"mapped edges       {stats['infobox_edges_mapped']} (infobox facts named by an ontology property)",
        f"list pages         {stats['list_pages']}",
        f"distinct relations {stats['relation_count']}",
        f"weak components    {stats['weak_components']} (largest {stats['largest_component']} nodes)",
        "edge value types   " + "  ".join(f"{k}={v}" for k, v in stats["edges_by_value_type"].items()),
        "relations (top):",
        *(f"  {name:<32} {count}" for name, count in stats["relations_top"].items()),
        "entity types (top):",
        *(f"  {name:<32} {count}" for name, count in stats["entity_types"].items()),
    ]
    for direction in ("out_degree", "in_degree"):
        summary = stats[direction]
        head = "  ".join(f"{k}={v}" for k, v in summary.items() if k != "histogram")
        lines.append(f"{direction.replace('_', ' ')} (entity edges): {head}")
        lines.extend(f"  {bucket:>8}: {count}" for bucket, count in summary["histogram"].items())
    return "\n".join(lines)
