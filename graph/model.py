"""The entity-relation graph as a networkx MultiDiGraph, built from stage 1's parquet outputs.

Nodes are keyed by title: entities with a page (`kind="entity"`, with type, description, head flag, ...),
entity objects without a page in the snapshot (`kind="missing"`), and, when asked for, literal values
(`kind="literal"`, keyed by `graph.csr.literal_key`, the key the walk sampler uses too). Every relation row
is one edge carrying its relation name, group index, source, qualifiers and provenance. networkx is the
model for analysis and small graphs; walks at scale use the CSR arrays of `graph.csr`.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from graph.csr import literal_key
from ground.errors import UserError
from ground.io import read_table
from ground.storage import as_path
from schemas.wiki import Entity, Relation

ENTITY, MISSING, LITERAL = "entity", "missing", "literal"
_ENTITY_ATTRIBUTES = ("type", "description", "is_head", "is_list", "last_modified", "page_id", "aliases", "infobox")


def load_graph(graph_dir: str | Path, literals: bool = True) -> nx.MultiDiGraph:
    """Build the MultiDiGraph of a stage-1 output folder (`entities/`, `relations/`)."""
    graph_dir = as_path(graph_dir)
    if not (graph_dir / "entities").is_dir() or not (graph_dir / "relations").is_dir():
        raise UserError(f"not a stage-1 output folder (no entities/ and relations/): {graph_dir}")
    entities = read_table(Entity, graph_dir / "entities").select(["title", *_ENTITY_ATTRIBUTES]).to_pylist()
    relations = read_table(Relation, graph_dir / "relations").to_pylist()
    return build_graph(entities, relations, literals)


def build_graph(entities: list[dict], relations: list[dict], literals: bool = True) -> nx.MultiDiGraph:
    """The graph from entity and relation rows (Arrow rows, as `read_table(...).to_pylist()` gives)."""
    graph = nx.MultiDiGraph()
    for row in entities:
        graph.add_node(row["title"], kind=ENTITY, **{name: row[name] for name in _ENTITY_ATTRIBUTES})
    for row in relations:
        head = row["head"]
        if head not in graph:
            graph.add_node(head, kind=MISSING)
        if row["value_type"] == "entity":
            target = row["tail"]
            if target not in graph:
                graph.add_node(target, kind=MISSING)
        elif literals:
            target = literal_key(row["value_type"], row["value"], row["unit"])
            if target not in graph:
                graph.add_node(target, kind=LITERAL, value_type=row["value_type"], value=row["value"],
                               unit=row["unit"])
        else:
            continue
        provenance = row["provenance"]
        graph.add_edge(
            head,
            target,
            relation=row["relation"],
            mapped=row.get("mapped", False),
            group_index=row["group_index"],
            source=row["source"],
            value_type=row["value_type"],
            date=row["date"],
            qualifiers={q["key"]: q["value"] for q in row["qualifiers"]},
            evidence=row["evidence"],
            page_id=provenance["page_id"],
            revision_id=provenance["revision_id"],
            timestamp=provenance["timestamp"],
            infobox=provenance["infobox"],
            parameter=provenance["parameter"],
        )
    return graph
