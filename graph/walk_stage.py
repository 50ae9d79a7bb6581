"""Stage `walk` on Beam: `run_walks` and its `WalkTransform`.

Start nodes are split into tasks spread over workers; the graph travels as a side input without its
relation rows (`load_csr(keep_relations=False)`): the hops of the kept paths are read back from the
relation shards by row when they are written. Dedup and the `max_paths` limit run as Beam steps with the
same outcome as the plain `graph.sampler.walk_graph`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path as FsPath

import apache_beam as beam
import numpy as np

from graph.conditions import (
    DEDUP_LEVELS,
    PATH_CONDITIONS,
    STEP_CONDITIONS,
    WalkParams,
    chain_edges,
    start_nodes,
)
from graph.csr import CSRGraph, RelationSource, excluded_relations, load_csr
from graph.sampler import start_tasks, task_walks
from graph.walk_records import HOP_COLUMNS, dedup_keys, hop_record, path_record
from ground.io import atomic_write_text, read_manifest, write_records
from ground.stage import begin_stage
from ground.storage import as_path
from runtime.beam import BoundedHeapDoFn, pipeline_options
from schemas.config import BeamOptions, WalkConfig
from schemas.manifest import Manifest
from schemas.questions import Path

STAGE = "walk"
DEFAULT_WINDOW_DAYS = 182


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
            path = path_record(graph, nodes, edges, self.config.seed, held, [])
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
            | "Tasks" >> beam.FlatMap(start_tasks, config.starts_per_task)
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
    # beside: the previous paths stay in place until the new ones are complete (a failed rebuild keeps them)
    run = begin_stage(STAGE, out_dir, resolved, upstream_dirs={"extract": graph_dir}, beside=True)
    if run.done:
        return run.finished
    work_dir = run.work_dir
    _run_pipeline(graph_dir, resolved, work_dir, beam, list(beam_args))
    # every count the summary and the yield floors name, zero when no start was eligible (no task ran)
    counts = Counter({f"rejected:{name}": 0 for name in STEP_CONDITIONS + PATH_CONDITIONS + DEDUP_LEVELS}
                     | {"walks:attempted": 0, "walks:completed": 0, "paths:kept": 0})
    counts.update(json.loads((work_dir / "counts.json").read_text()))
    (work_dir / "counts.json").unlink()
    shards = sorted(p.name for p in (work_dir / "paths").glob("*.parquet"))
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
