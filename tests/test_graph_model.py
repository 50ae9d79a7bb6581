"""The networkx graph built from stage 1's parquet outputs, its statistics and `hopsmith graph-stats`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli.main import main
from extract.oracle import extract_records
from extract.sources import iter_dump_pages
from extract.tables import TABLES
from graph.model import ENTITY, LITERAL, MISSING, load_graph
from graph.stats import degree_summary, graph_stats
from ground.io import write_records
from schemas.config import ExtractConfig

DUMP = Path(__file__).resolve().parents[1] / "data" / "sample" / "enwiki-sample-pages-articles-multistream.xml.bz2"


@pytest.fixture(scope="module")
def graph_dir(tmp_path_factory):
    """The sample's stage-1 tables, written without Beam (the Beam path is tested in test_extract_*)."""
    out = tmp_path_factory.mktemp("graph")
    result = extract_records(iter_dump_pages(DUMP), ExtractConfig())
    for table, model in TABLES.items():
        write_records(model, getattr(result, table), out / table / "part-00000-of-00001.parquet")
    return out, result


def test_graph_mirrors_the_tables(graph_dir):
    out, result = graph_dir
    graph = load_graph(out)
    assert graph.number_of_edges() == len(result.relations)
    entities = [n for n, d in graph.nodes(data=True) if d["kind"] == ENTITY]
    assert sorted(entities) == sorted(e.title for e in result.entities)
    nolan = graph.nodes["Christopher Nolan"]
    assert nolan["type"] == "Person" and "Christopher Edward Nolan" in nolan["aliases"]
    edges = graph.get_edge_data("Inception", "Christopher Nolan")
    assert {e["relation"] for e in edges.values()} >= {"director", "links_to"}
    director = next(e for e in edges.values() if e["relation"] == "director")
    assert director["infobox"] == "infobox film" and director["parameter"] == "director"
    spouse = next(e for e in graph.get_edge_data("Steven Spielberg", "Amy Irving").values())
    assert spouse["qualifiers"] == {"start": "1985", "end": "1989", "end_reason": "divorced"}
    literal_kinds = {d["value_type"] for _, d in graph.nodes(data=True) if d["kind"] == LITERAL}
    assert literal_kinds == {"date", "number", "quantity", "string"}
    without_literals = load_graph(out, literals=False)
    assert not [n for n, d in without_literals.nodes(data=True) if d["kind"] == LITERAL]
    assert without_literals.number_of_edges() == sum(r.value_type == "entity" for r in result.relations)


def test_stats(graph_dir):
    out, result = graph_dir
    stats = graph_stats(load_graph(out), top=5)
    assert stats["edges"] == len(result.relations)
    assert stats["nodes_by_kind"][ENTITY] == len(result.entities)
    assert stats["nodes"] == sum(stats["nodes_by_kind"].values())
    assert stats["nodes_by_kind"][MISSING] > 0  # linked titles without a page in the sample
    assert stats["head_entities"] == sum(e.is_head for e in result.entities)
    assert stats["edges_by_source"] == {"infobox": sum(r.source == "infobox" for r in result.relations),
                                        "link": sum(r.source == "link" for r in result.relations)}
    assert list(stats["relations_top"])[0] == "links_to" and len(stats["relations_top"]) == 5
    assert stats["typed_entities"] == len(result.entities) and stats["typed_share"] == 1.0  # every sample page
    assert stats["infobox_edges_mapped"] == sum(r.mapped for r in result.relations) > 0
    assert sum(stats["out_degree"]["histogram"].values()) == len(result.entities)
    assert stats["largest_component"] > 0.9 * len(result.entities)  # the sample is one connected graph


def test_degree_summary_buckets():
    summary = degree_summary(np.array([0, 1, 2, 4, 5, 1000]))
    assert summary["max"] == 1000 and summary["median"] == 3.0
    assert summary["histogram"]["0"] == 1 and summary["histogram"]["2-4"] == 2 and summary["histogram"]["1000+"] == 1


def test_graph_stats_cli(graph_dir, capsys):
    out, result = graph_dir
    assert main(["graph-stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["nodes_by_kind"]["entity"] == len(result.entities)
    assert main(["graph-stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"head entities      {stats['head_entities']}" in text and "links_to" in text
    assert main(["graph-stats", str(out / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("hopsmith: error: not a stage-1 output folder")
