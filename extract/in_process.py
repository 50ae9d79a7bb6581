"""The stage's two phases as plain calls in this process: what `ExtractUnits` and `ExtractGraph` run, with
each keyed join a dict instead of a shuffle.

`run_extract` takes this path where Beam would run the same steps in this process anyway (its in-process
runner, one worker, in-memory mode, a local dump): there, importing Beam, building the pipeline and running
its bundles cost more than the joins themselves (about 2.5 CPU-s of fixed cost, and a coder round trip of
every key), and nothing on this path imports Beam. The steps are the
Beam path's own DoFns and functions (`ExtractUnit`, `UnitKeys`, `final_classes`, `title_fixups`, `FinishUnit`,
`MergeShard`), called in the same order, so a unit's parts, its runs and the output shards are the same
bytes and a killed run resumes from the same finished units (tests/test_extract_paths.py). Any other runner,
more workers or an API source run the Beam pipeline, which stays the reference for distributed runs."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from pathlib import Path

import pyarrow as pa

from extract.joins import (
    UnitKeys,
    contested_articles,
    contested_title,
    duplicate_decisions,
    final_classes,
    resolve_pointers,
    title_fixups,
    unit_redirects,
    unit_titles,
)
from extract.shards import FinishUnit, MergeShard
from extract.tables import TABLES
from extract.units import ExtractUnit, choose_as_of_from_stats, plan_dump_units, unit_stats, write_stats
from runtime.heap import fewer_young_collections, freeze_start_up_objects, map_large_allocations
from schemas.config import ExtractConfig


def _grouped(pairs: Iterable[tuple[Hashable, object]]) -> list[tuple[Hashable, list]]:
    """A GroupByKey in memory: (key, values) in the order the keys first came."""
    groups: dict = defaultdict(list)
    for key, value in pairs:
        groups[key].append(value)
    return list(groups.items())


def extract_in_process(config: ExtractConfig, out_dir: str | Path, ceiling: tuple[dt.datetime, str]) -> None:
    """Both phases over a dump into `out_dir` (parts, runs, shards and the stats file), as the pipeline
    `ExtractUnits | ExtractGraph` writes them."""
    if config.dump is None:
        raise ValueError("the in-process path reads a dump; an API source runs the Beam pipeline")
    out_dir = str(out_dir)
    extractor = ExtractUnit(config, out_dir, ceiling[0])
    extractor.setup()
    pa.array([])  # pyarrow imports pandas at its first conversion: before the freeze, or every collection scans it
    map_large_allocations()  # what `extract.transforms.Step` does on a Beam worker
    freeze_start_up_objects()
    with fewer_young_collections():
        units = [done for unit in plan_dump_units(config) for done in extractor.process(unit)]

        stats = [row for unit in units for row in unit_stats(unit, out_dir)]
        choice = choose_as_of_from_stats(stats, config, ceiling)
        losers, by_unit = _fixups_by_unit(units, out_dir)
        finisher = FinishUnit(out_dir, config.output_shards, config.window_days)
        excluded: Counter = Counter()
        for unit_id, _ in units:  # each unit's fix-ups let go once it is finished
            for counts in finisher.process((unit_id, {"fixups": by_unit.pop(unit_id, [])}), choice.as_of, losers):
                excluded.update(counts)
        unit_ids = [unit_id for unit_id, _ in units]
        merger = MergeShard(out_dir, config.output_shards)
        for table in TABLES:
            for shard in range(config.output_shards):
                for _ in merger.process((table, shard), unit_ids, dict(excluded)):
                    pass
    write_stats(stats, choice, dict(excluded), units, out_dir)


def _fixups_by_unit(units: list[tuple[str, bool]], out_dir: str) -> tuple[dict, dict[str, list]]:
    """`ExtractGraph`'s joins: the losing duplicates' keys, and each unit's fix-ups (duplicate and redirect
    outcomes, link targets and their classes, named values, aliases)."""
    titles = (pair for unit in units for pair in unit_titles(unit, out_dir))
    contested = dict(pair for group in _grouped(titles) for pair in contested_title(group))
    articles = (pair for unit in units for pair in contested_articles(unit, out_dir, contested))
    losers: dict = {}
    fixups: list[tuple[str, tuple]] = []
    for group in _grouped(articles):
        for tag, value in duplicate_decisions(group):
            if tag == "losers":
                losers[value[0]] = value[1]
            else:
                fixups.append(value)
    resolved, _cycles = resolve_pointers(pair for unit in units for pair in unit_redirects(unit, out_dir))

    finder = UnitKeys(out_dir)
    keys = [pair for unit in units for pair in finder.process(unit, losers, len(resolved))]
    entity_keys = (pair for pair in keys if pair[1][0] == "entity")
    redirected = ((final, ("redirected", title)) for title, final in resolved)
    classes = [pair for group in _grouped((*entity_keys, *redirected)) for pair in final_classes(group)]
    finals = ((title, ("final", final)) for title, final in resolved)
    aliases = ((final, ("alias", title)) for title, final in resolved)
    fixups += (pair for group in _grouped((*keys, *classes, *finals, *aliases)) for pair in title_fixups(group))
    return losers, dict(_grouped(fixups))
