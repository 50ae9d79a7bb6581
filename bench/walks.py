"""Walk sampler benchmark: the vectorised CSR sampler against a plain networkx loop, same conditions.

Both sample 3-hop conditional walks on one synthetic graph (>= 1M edges; 100k with --quick) with
skewed degrees, literal objects and a recency mix, every condition on (the shortcut check too); rates
are in CPU time of this process, so that a shared machine's other load does not count. The CSR sampler's
memory for 10M edges is computed from the array sizes of the built graph (they grow linearly in nodes and edges).
"""

from __future__ import annotations

import datetime as dt
import time

import numpy as np
import pyarrow as pa

from graph.conditions import WalkParams, start_nodes
from graph.csr import build_csr
from graph.reference import annotated_networkx, reference_walks
from graph.sampler import sample_walks
from schemas.base import arrow_schema
from schemas.config import WalkConfig
from schemas.wiki import Entity, Relation

AS_OF = dt.date(2026, 3, 1)
HOPS = 3
RELATIONS = 40
EDGES_PER_NODE = 5


def _column(schema: pa.Schema, name: str, values) -> pa.Array:
    return pa.array(values, type=schema.field(name).type)


def synthetic_tables(num_edges: int, seed: int = 0) -> tuple[pa.Table, pa.Table]:
    """Entities and relations (stage 1 schemas) of a random graph with a power-law-ish in-degree."""
    rng = np.random.default_rng(seed)
    nodes = num_edges // EDGES_PER_NODE
    titles = np.array([f"Entity {i}" for i in range(nodes)], dtype=object)
    stamp = dt.datetime.combine(AS_OF, dt.time(), dt.UTC)
    entity_schema = arrow_schema(Entity)
    entities = pa.table({
        "schema_version": _column(entity_schema, "schema_version", ["1.0"] * nodes),
        "title": _column(entity_schema, "title", titles),
        "type": _column(entity_schema, "type", np.array(["person", "place", "organization"], object)[np.arange(nodes) % 3]),
        "description": _column(entity_schema, "description", [""] * nodes),
        "last_modified": pa.array(np.full(nodes, int(stamp.timestamp() * 1e6)), pa.timestamp("us", tz="UTC")),
        "is_head": _column(entity_schema, "is_head", np.arange(nodes) % 2 == 0),
        "page_id": _column(entity_schema, "page_id", np.arange(nodes)),
        "revision_id": _column(entity_schema, "revision_id", np.arange(nodes)),
        "infobox": pa.nulls(nodes, pa.string()),
        "aliases": pa.ListArray.from_arrays(np.zeros(nodes + 1, np.int32), pa.array([], pa.string())),
        "is_list": _column(entity_schema, "is_list", np.arange(nodes) % 97 == 0),
    }, schema=entity_schema)

    heads = rng.integers(nodes, size=num_edges)
    ranks = np.minimum((rng.pareto(1.2, size=num_edges) * nodes / 50).astype(np.int64), nodes - 1)
    tails = rng.permutation(nodes)[ranks]
    literal = rng.random(num_edges) < 0.2
    relation = np.array([f"relation_{i}" for i in range(RELATIONS)], dtype=object)[
        np.minimum(rng.zipf(1.5, size=num_edges) - 1, RELATIONS - 1)
    ]
    days_old = np.where(rng.random(num_edges) < 0.3, rng.integers(0, 180, num_edges), rng.integers(200, 4000, num_edges))
    stamps = int(stamp.timestamp() * 1e6) - days_old * 86_400 * 1_000_000
    values = np.array([f"{1800 + v % 220}-01-01" for v in range(220)], dtype=object)[rng.integers(220, size=num_edges)]
    relation_schema = arrow_schema(Relation)
    provenance_type = relation_schema.field("provenance").type
    provenance = pa.StructArray.from_arrays(
        [pa.array(heads), pa.array(titles[heads]), pa.array(heads), pa.array(stamps, pa.timestamp("us", tz="UTC")),
         pa.nulls(num_edges, pa.string()), pa.array(relation)],
        fields=list(provenance_type),
    )
    relations = pa.table({
        "schema_version": _column(relation_schema, "schema_version", ["1.0"] * num_edges),
        "head": pa.array(titles[heads]),
        "relation": pa.array(relation),
        "mapped": pa.array(np.ones(num_edges, bool)),
        "group_index": pa.nulls(num_edges, pa.int64()),
        "tail": pa.array(np.where(literal, None, titles[tails])),
        "value": pa.array(np.where(literal, values, None)),
        "value_type": pa.array(np.where(literal, "date", "entity").astype(object)),
        "unit": pa.nulls(num_edges, pa.string()),
        "date": pa.nulls(num_edges, pa.date32()),
        "qualifiers": pa.ListArray.from_arrays(np.zeros(num_edges + 1, np.int32), pa.array([], relation_schema.field("qualifiers").type.value_type)),
        "source": pa.array(["infobox"] * num_edges),
        "evidence": pa.nulls(num_edges, pa.string()),
        "provenance": provenance,
    }, schema=relation_schema)
    return entities, relations


def run(quick: bool) -> dict[str, float]:
    num_edges = 100_000 if quick else 1_000_000
    entities, relations = synthetic_tables(num_edges)
    started = time.perf_counter()
    graph = build_csr(entities, relations, as_of=AS_OF, window_days=182)
    build_s = time.perf_counter() - started
    config = WalkConfig(hops=[HOPS], walks_per_start=8, hub_quantile=0.99)
    params = WalkParams.build(graph, config)
    starts = start_nodes(graph)

    started = time.process_time()  # CPU time: the machine is shared, and both loops run in this one process
    _, _, counts = sample_walks(graph, params, starts, HOPS, np.random.default_rng(0))
    csr_s = time.process_time() - started
    csr_rate = counts["walks:attempted"] / csr_s

    nx_graph = annotated_networkx(graph, params)
    baseline_starts = starts[: max(1, len(starts) // (20 if quick else 100))].tolist()
    started = time.process_time()
    _, baseline_counts = reference_walks(nx_graph, baseline_starts, HOPS, config, params.hub_threshold, seed=0)
    nx_s = time.process_time() - started
    nx_rate = baseline_counts["walks:attempted"] / nx_s

    bytes_per_edge = (graph.dst.nbytes + graph.rel.nbytes + graph.edge_row.nbytes + graph.source_row.nbytes
                      + graph.in_window.nbytes + graph.single_object.nbytes) / graph.num_edges
    bytes_per_node = (graph.sampler_nbytes() - bytes_per_edge * graph.num_edges) / graph.num_nodes
    nodes_at_10m = graph.num_nodes * 10_000_000 / graph.num_edges
    sampler_gb_10m = (bytes_per_edge * 10_000_000 + bytes_per_node * nodes_at_10m) / 1e9
    result = {
        "edges": float(graph.num_edges),
        "nodes": float(graph.num_nodes),
        "csr_build_s": build_s,
        "csr_walks_per_s": csr_rate,
        "networkx_walks_per_s": nx_rate,
        "speedup": csr_rate / nx_rate,
        "csr_completed_fraction": counts["walks:completed"] / counts["walks:attempted"],
        "networkx_completed_fraction": baseline_counts["walks:completed"] / baseline_counts["walks:attempted"],
        "sampler_gb_at_10m_edges": sampler_gb_10m,
    }
    print(f"   graph: {graph.num_edges:,} edges, {graph.num_nodes:,} nodes, CSR built in {build_s:.1f}s")
    print(f"   CSR sampler  : {csr_rate:,.0f} walks/s a core (CPU time; {counts['walks:attempted']:,} walks, {HOPS} hops)")
    print(f"   networkx loop: {nx_rate:,.0f} walks/s a core ({baseline_counts['walks:attempted']:,} walks, same conditions)")
    print(f"   speedup: {csr_rate / nx_rate:.1f}x (target >= 20x)")
    print(f"   completed walks: CSR {result['csr_completed_fraction']:.3f}, networkx {result['networkx_completed_fraction']:.3f}")
    print(f"   sampler graph arrays at 10M edges: {sampler_gb_10m:.3f} GB (target <= 2 GB; "
          f"{bytes_per_edge:.0f} B/edge, {bytes_per_node:.0f} B/node)")
    return result
