"""Walk conditions on crafted graphs: each condition rejects one specific path; determinism; Beam == plain."""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest

from graph import csr as csr_module
from graph.conditions import WalkParams, start_nodes
from graph.csr import LITERAL, NO_PAGE, PAGE, load_csr
from graph.reference import annotated_networkx, reference_walks
from graph.sampler import walk_graph
from graph.walk_records import deduplicate, path_hops, to_path
from graph.walk_stage import run_walks
from ground.io import read_records
from schemas.config import WalkConfig
from schemas.questions import Path
from tests.walk_graphs import AS_OF, OLD, RECENT, csr, entity, fact, write_graph

NO_HUBS = {"hub_quantile": 1.0}


def walk(entities, relations, **config):
    """Walks from the single head entity "S" (other entities are not heads)."""
    config = WalkConfig(**{"hops": [2], **NO_HUBS, **config})
    return walk_graph(csr(entities, relations), config)


def chains(paths):
    return sorted(tuple(p.nodes) for p in paths)


def others(*titles, type_="person"):
    return [entity(t, type_, head=False) for t in titles]


def test_csr_arrays_follow_the_relations():
    graph = csr(
        [entity("S"), *others("B")],
        [
            fact("S", "spouse", "B"),
            fact("S", "spouse", "B", group_index=2),  # group duplicate of the same object
            fact("S", "child", "C"),  # object without a page
            fact("S", "child", "D"),
            fact("B", "birth_date", "1950-01-02", "date", when=OLD),
            fact("S", "links_to", "B", source="link"),
        ],
    )
    s, b = graph.node_id("S"), graph.node_id("B")
    assert graph.kind[s] == PAGE and graph.kind[graph.node_id("C")] == NO_PAGE
    assert graph.build_counts["relations:excluded_relation"] == 1
    assert graph.build_counts["relations:duplicate_edge"] == 1
    assert graph.out_degree[s] == 3 and "links_to" not in graph.relation_names
    spouse, child = graph.relation_id("spouse"), graph.relation_id("child")
    assert graph.objects(s, spouse).tolist() == [b]
    assert len(graph.objects(s, child)) == 2
    edges = range(graph.indptr[s], graph.indptr[s + 1])
    single = {graph.relation_names[graph.rel[e]]: bool(graph.single_object[e]) for e in edges}
    assert single == {"spouse": True, "child": False}
    date_node = graph.dst[graph.indptr[b]]
    assert graph.kind[date_node] == LITERAL and graph.label(date_node) == "1950-01-02"
    assert not graph.in_window[graph.indptr[b]]  # the birth date's page revision is older than the window
    assert graph.sampler_nbytes() > 0


@pytest.mark.parametrize(
    ("condition", "entities", "relations", "config", "relaxed"),
    [
        ("inverse_hop", [entity("S"), *others("B")],
         [fact("S", "spouse", "B"), fact("B", "partner", "S")], {}, None),
        ("revisit", [entity("S"), *others("B", "C")],
         [fact("S", "a", "B"), fact("B", "b", "C"), fact("C", "c", "S")], {"hops": [3]}, None),
        ("repeated_relation", [entity("S"), *others("B")],
         [fact("S", "parent", "B"), fact("B", "parent", "C")], {}, {"forbid_repeated_relation": False}),
        ("list_page", [entity("S"), entity("List of things", "list", head=False, is_list=True)],
         [fact("S", "a", "List of things"), fact("List of things", "b", "C")], {}, None),
        ("disambiguation", [entity("S"), entity("Mercury", "disambiguation", head=False)],
         [fact("S", "a", "Mercury"), fact("Mercury", "b", "C")], {}, None),
        ("dead_end", [entity("S")], [fact("S", "a", "Nowhere")], {}, None),
        ("multiple_objects", [entity("S"), *others("B")],
         [fact("S", "spouse", "B"), fact("B", "child", "C1"), fact("B", "child", "C2")], {"tree_share": 0.0},
         {"require_single_answer": False}),
        ("literal_answer", [entity("S"), *others("B")],
         [fact("S", "spouse", "B"), fact("B", "birth_date", "1950-01-02", "date")],
         {"allow_literal_answers": False}, {"allow_literal_answers": True}),
        ("long_literal", [entity("S"), *others("B")],
         [fact("S", "spouse", "B"), fact("B", "motto", "a very long motto " * 5, "string")], {}, None),
        ("no_recent_fact", [entity("S"), *others("B")],
         [fact("S", "spouse", "B", when=OLD), fact("B", "birth_place", "C", when=OLD)], {},
         {"require_recent_fact": False}),
    ],
)
def test_each_condition_rejects_its_path(condition, entities, relations, config, relaxed):
    paths, counts = walk(entities, relations, **config)
    assert paths == []
    assert counts[f"rejected:{condition}"] > 0
    others_counted = {k for k, v in counts.items() if k.startswith("rejected:") and v and k != f"rejected:{condition}"}
    assert not others_counted, others_counted
    if relaxed is not None:
        relaxed_paths, relaxed_counts = walk(entities, relations, **{**config, **relaxed})
        assert relaxed_paths and relaxed_counts[f"rejected:{condition}"] == 0


def test_hub_is_not_an_intermediate_node_but_can_be_an_answer():
    fans = [f"Fan {i}" for i in range(20)]
    entities = [entity("S"), *others("Hub", "B", *fans)]
    relations = [fact(f, "likes", "Hub") for f in fans]
    relations += [fact("S", "club", "Hub"), fact("Hub", "city", "Town"), fact("S", "spouse", "B"), fact("B", "club", "Hub")]
    walk = functools.partial(globals()["walk"], forbid_shortcut=False)  # S -> B -> Hub while S links Hub too
    paths, counts = walk(entities, relations, hub_quantile=0.95, hub_min_degree=0, walks_per_start=30)
    assert counts["rejected:hub"] > 0
    assert chains(paths) == [("S", "B", "Hub")]
    # In a small slice the top page (degree 23) is not a hub unless it reaches hub_min_degree.
    paths, counts = walk(entities, relations, hub_quantile=0.95, hub_min_degree=23, walks_per_start=30)
    assert counts["rejected:hub"] > 0
    paths, counts = walk(entities, relations, hub_quantile=0.95, hub_min_degree=24, walks_per_start=30)
    assert counts["rejected:hub"] == 0 and ("S", "Hub", "Town") in chains(paths)


def test_inverse_hop_disabled_falls_through_to_revisit():
    paths, counts = walk([entity("S"), *others("B")], [fact("S", "spouse", "B"), fact("B", "partner", "S")],
                         forbid_inverse_hop=False)
    assert paths == [] and counts["rejected:revisit"] > 0 and counts["rejected:inverse_hop"] == 0


def test_dedup_levels_each_drop_one_path():
    # S->B->C and S->C->B: same relation sequence over the same node set (isomorphic); each is a shortcut
    # (S links both), so that condition is off here.
    iso = [fact("S", "a", "B"), fact("S", "a", "C"), fact("B", "b", "C"), fact("C", "b", "B")]
    paths, counts = walk([entity("S"), *others("B", "C")], iso, walks_per_start=50, step_retries=8,
                         forbid_shortcut=False)
    assert len(paths) == 1 and counts["rejected:isomorphic"] == 1 and counts["rejected:duplicate"] > 0
    # S->B1->Z and S->B2->Z with B1, B2 of one type: the same question once B is obfuscated (WL hash).
    wl = [fact("S", "a", "B1"), fact("S", "a", "B2"), fact("B1", "b", "Z"), fact("B2", "b", "Z")]
    paths, counts = walk([entity("S"), *others("B1", "B2")], wl, walks_per_start=50)
    assert len(paths) == 1 and counts["rejected:wl_duplicate"] == 1 and counts["rejected:isomorphic"] == 0
    # Non-ASCII titles and relations hash too.
    accented = [fact("Zoë", "a", "B1"), fact("Zoë", "a", "B2"), fact("B1", "b–c", "Zürich"), fact("B2", "b–c", "Zürich")]
    paths, counts = walk([entity("Zoë"), *others("B1", "B2")], accented, walks_per_start=50)
    assert len(paths) == 1 and counts["rejected:wl_duplicate"] == 1
    # Different intermediate types keep both paths.
    typed = [entity("S"), entity("B1", "person", head=False), entity("B2", "city", head=False)]
    paths, _ = walk(typed, wl, walks_per_start=50)
    assert chains(paths) == [("S", "B1", "Z"), ("S", "B2", "Z")]


def random_graph(seed: int, people: int = 60):
    rng = np.random.default_rng(seed)
    names = [f"P{i}" for i in range(people)]
    entities = [entity(n, head=bool(i % 2 == 0)) for i, n in enumerate(names)]
    relations = []
    for i, name in enumerate(names):
        for relation in ("spouse", "employer", "mentor"):
            if rng.random() < 0.7:
                relations.append(fact(name, relation, names[rng.integers(people)], when=OLD if rng.random() < 0.5 else RECENT))
        relations.append(fact(name, "birth_date", f"{1900 + i}-01-01", "date"))
        relations.append(fact(name, "birth_place", f"Town {i % 7}"))
    return entities, relations


def test_deterministic_for_a_seed_and_seed_sensitive():
    entities, relations = random_graph(0)
    graph = csr(entities, relations)
    config = WalkConfig(hops=[2, 3, 4], walks_per_start=4, starts_per_task=7)
    first, counts_1 = walk_graph(graph, config)
    again, counts_2 = walk_graph(graph, config)
    assert [p.model_dump() for p in first] == [p.model_dump() for p in again] and counts_1 == counts_2
    other, _ = walk_graph(graph, config.model_copy(update={"seed": 1}))
    assert chains(first) != chains(other)
    assert {len(p.hops) for p in first} == {2, 3, 4}


def test_every_path_satisfies_every_condition():
    entities, relations = random_graph(1)
    graph = csr(entities, relations)
    config = WalkConfig(hops=[2, 3, 4], walks_per_start=6, hub_quantile=0.9)
    paths, _ = walk_graph(graph, config)
    params = WalkParams.build(graph, config)
    assert paths
    for path in paths:
        intermediates = [graph.node_id(n) for n in path.nodes[1:-1]]
        relations_on_path = [h.relation for h in path.hops]
        assert len(set(path.nodes)) == len(path.nodes)
        assert all(a != b for a, b in zip(relations_on_path, relations_on_path[1:], strict=False))
        assert all(not params.is_hub[i] for i in intermediates)
        assert any(h.in_window for h in path.hops)
        assert path.hops[0].head == path.start and path.answer == path.nodes[-1]
        for hop, (head, tail) in zip(path.hops, zip(path.nodes, path.nodes[1:], strict=False), strict=True):
            assert hop.head == head and (hop.tail or hop.value) == tail


def test_vectorised_sampler_finds_the_same_paths_as_the_networkx_model():
    entities, relations = random_graph(2, people=25)
    graph = csr(entities, relations)
    config = WalkConfig(hops=[3], walks_per_start=150, hub_quantile=0.95, step_retries=6)
    params = WalkParams.build(graph, config)
    starts = start_nodes(graph)
    fast, fast_counts = walk_graph(graph, config)
    accepted, reference_counts = reference_walks(annotated_networkx(graph, params), starts.tolist(), 3, config,
                                                 params.hub_threshold, seed=0)
    distinct = {(tuple(n), tuple(e)) for n, e in accepted}
    reference, _ = deduplicate(to_path(graph, list(n), list(e), 0, []) for n, e in distinct)
    assert chains(fast) == chains(reference)
    for name in ("rejected:revisit", "rejected:dead_end", "rejected:multiple_objects"):
        assert (fast_counts[name] > 0) == (reference_counts[name] > 0)


def test_run_walks_through_beam_matches_the_plain_function_and_resumes(tmp_path):
    entities, relations = random_graph(3, people=30)
    # the hops are read back by row from several relation shards of several row groups each
    graph_dir = write_graph(tmp_path / "graph", entities, relations, relation_shards=3, row_group_rows=7)
    config = WalkConfig(hops=[2, 3], walks_per_start=3, starts_per_task=4, shards=3)
    manifest = run_walks(graph_dir, tmp_path / "paths", config)
    written = list(read_records(Path, tmp_path / "paths" / "paths"))
    expected, counts = walk_graph(csr(entities, relations), config.model_copy(update={"as_of": None}))
    assert sorted((p.model_dump() for p in written), key=lambda p: p["path_id"]) == [p.model_dump() for p in expected]
    assert manifest.counts["paths:kept"] == len(written) == counts["paths:kept"]
    assert manifest.counts["walks:attempted"] == counts["walks:attempted"]
    assert all(f"rejected:{c}" in manifest.counts for c in ("hub", "revisit", "no_recent_fact", "wl_duplicate"))
    again = run_walks(graph_dir, tmp_path / "paths", config)
    assert again.key == manifest.key and again.finished_at == manifest.finished_at
    limited = run_walks(graph_dir, tmp_path / "limited", config.model_copy(update={"max_paths": 5}))
    kept = sorted(p.path_id for p in read_records(Path, tmp_path / "limited" / "paths"))
    assert kept == [p.path_id for p in expected[:5]]
    assert limited.counts["paths:kept"] == 5 and limited.counts["rejected:max_paths"] == len(expected) - 5


def test_a_walk_drawn_to_branch_may_branch_at_an_intermediate_hop():
    # S's two producers are pages with facts: a branchable hop at step 0, whose object branches then pick.
    entities = [entity("S", "film"), *others("P1", "P2", "Q1", "Q2")]
    relations = [fact("S", "producer", "P1"), fact("S", "producer", "P2"), fact("S", "country", "Land"),
                 fact("P1", "spouse", "Q1"), fact("P2", "spouse", "Q2"), fact("P1", "birth_place", "Avon"),
                 fact("P2", "birth_place", "Bath")]
    paths, counts = walk(entities, relations, tree_share=1.0, walks_per_start=40)
    assert counts["walks:branched"] > 0
    inner = [p for p in paths if p.hops[0].relation == "producer"]
    assert inner and all(len(p.nodes) == 3 for p in inner)
    assert any("branching_final_hop" not in p.conditions for p in inner)  # the branch is not the final hop
    _, never = walk(entities, relations, tree_share=0.0, walks_per_start=40)
    assert never["walks:branched"] == 0 and never["walks:may_branch"] == 0


def test_a_step_to_a_node_an_earlier_node_links_to_is_a_shortcut():
    # S -> B -> C while S names C itself: "the birthplace of S's spouse" is just S's residence, one hop.
    entities = [entity("S"), *others("B", "C", "D")]
    relations = [fact("S", "spouse", "B"), fact("B", "birthPlace", "C"), fact("S", "residence", "C"),
                 fact("C", "country", "Land"), fact("B", "almaMater", "D"), fact("D", "city", "Town")]
    paths, counts = walk(entities, relations, hops=[2, 3], walks_per_start=60)
    assert counts["rejected:shortcut"] > 0
    assert ("S", "B", "C") not in chains(paths) and ("S", "B", "D", "Town") in chains(paths)
    assert ("S", "B", "C", "Land") not in chains(paths)  # Land is one hop from C, which S links to
    assert all("no_shortcut_edge" in p.conditions for p in paths)
    relaxed, relaxed_counts = walk(entities, relations, hops=[2, 3], walks_per_start=60, forbid_shortcut=False)
    assert ("S", "B", "C") in chains(relaxed) and relaxed_counts["rejected:shortcut"] == 0


def test_a_literal_is_a_shortcut_only_over_the_same_relation():
    # S and its spouse B share a birth year: B's birth date is no shortcut, S's own founding date of 1950 is.
    entities = [entity("S"), *others("B")]
    relations = [fact("S", "spouse", "B"), fact("S", "birthDate", "1950", "date"), fact("B", "birthDate", "1950", "date")]
    paths, counts = walk(entities, relations, walks_per_start=30)
    assert counts["rejected:shortcut"] > 0 and paths == []
    entities = [entity("S"), *others("B")]
    relations = [fact("S", "spouse", "B"), fact("S", "foundingDate", "1950", "date"),
                 fact("B", "birthDate", "1950", "date")]
    paths, counts = walk(entities, relations, walks_per_start=30)
    assert counts["rejected:shortcut"] == 0 and chains(paths) == [("S", "B", "1950")]



def test_a_start_s_own_fact_is_a_shortcut_also_when_its_ball_stops_growing(monkeypatch):
    # The ball holds the start alone once it passes its size cap; the start's own facts still count.
    monkeypatch.setattr("graph.conditions.MAX_BALL_PAIRS", 0)
    entities = [entity("S"), *others("B")]
    relations = [fact("S", "spouse", "B"), fact("S", "birthDate", "1950", "date"), fact("B", "birthDate", "1950", "date")]
    paths, counts = walk(entities, relations, walks_per_start=30)
    assert counts["rejected:shortcut"] > 0 and paths == []

def test_a_route_around_the_path_is_a_shortcut_too():
    # S -> B -> D -> C, but S -> X -> C reaches C in two hops: a 3-hop question about C would have a shorter route.
    entities = [entity("S"), *others("B", "D", "X", "C")]
    relations = [fact("S", "spouse", "B"), fact("B", "almaMater", "D"), fact("D", "city", "C"),
                 fact("S", "employer", "X"), fact("X", "city", "C"), fact("C", "country", "Land"),
                 fact("D", "founder", "Ed")]
    paths, counts = walk(entities, relations, hops=[3], walks_per_start=80)
    assert counts["rejected:shortcut"] > 0
    assert ("S", "B", "D", "C") not in chains(paths) and ("S", "B", "D", "Ed") in chains(paths)
    relaxed, _ = walk(entities, relations, hops=[3], walks_per_start=80, forbid_shortcut=False)
    assert ("S", "B", "D", "C") in chains(relaxed)


def test_longer_walks_get_more_attempts():
    entities, relations = random_graph(4, people=20)
    graph = csr(entities, relations)
    starts = len(start_nodes(graph))
    for growth in (1.0, 3.0):
        _, counts = walk_graph(graph, WalkConfig(hops=[2, 3, 4], walks_per_start=5, long_walk_growth=growth))
        assert counts["walks:attempted"] == starts * round(5 + 5 * growth + 5 * growth**2)


def test_a_walk_worker_graph_holds_no_relation_rows_and_reads_hops_by_row(tmp_path, monkeypatch):
    monkeypatch.setattr("graph.csr.ROWS_PER_READ", 12)  # several reads per shard, of two groups of 5 rows
    entities, relations = random_graph(4, people=40)
    graph_dir = write_graph(tmp_path / "graph", entities, relations, relation_shards=3, row_group_rows=5)
    load = functools.partial(load_csr, graph_dir, as_of=AS_OF, window_days=182, exclude_relations=["mentor"])
    full, walking = load(), load(keep_relations=False)
    assert walking.relations is None and full.relations.num_rows > 0
    assert len(pickle.dumps(walking)) < len(pickle.dumps(full)) - len(pickle.dumps(full.relations)) // 2
    edges = range(full.num_edges)
    assert path_hops(walking, edges) == path_hops(full, edges)  # every edge, across shards and row groups
    assert [h.relation for h in path_hops(walking, edges).values()].count("mentor") == 0
    config = WalkConfig(hops=[2, 3], walks_per_start=3)
    paths = walk_graph(full, config)[0]
    assert paths and [p.model_dump() for p in walk_graph(pickle.loads(pickle.dumps(walking)), config)[0]] == [
        p.model_dump() for p in paths]


def test_hops_are_read_in_whole_row_groups_of_a_bounded_number_of_rows(monkeypatch):
    monkeypatch.setattr(csr_module, "ROWS_PER_READ", 12)
    sizes = [5, 5, 5, 30, 5, 5]
    reads = [read.tolist() for read in csr_module._row_group_reads(np.array([0, 1, 2, 3, 5]), sizes)]
    assert reads == [[0, 1], [2], [3], [5]]  # a group larger than a read is read alone


def test_the_walk_command_reports_a_graph_without_any_start(tmp_path, capsys):
    """A graph none of whose entities is a head (a file of old pages): no task runs, and the command still
    prints its summary with zero walks (it once failed on the missing count)."""
    from cli.main import main

    graph_dir = write_graph(tmp_path / "graph", others("A", "B"), [fact("A", "spouse", "B")])
    assert main(["walk", "--graph", str(graph_dir), "--out", str(tmp_path / "paths")]) == 0
    out = capsys.readouterr().out
    assert "walk: 0 paths from 0 start entities (0 walks, 0 completed)" in out
