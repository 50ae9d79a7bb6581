"""The stage as two Beam composites: `ExtractUnits` (phase 1, `extract.units`) and `ExtractGraph` (phase 2,
`extract.joins` and `extract.shards`). Their steps are plain classes and functions those modules hold, run
here as DoFns (`Step`) and keyed joins; `extract.in_process` calls the same steps without Beam. What only
Beam needs lives here: the pointer-doubling join (`ResolveRedirects`), tagged outputs and combiners.

Scale: phase 1 extracts each work unit (a multistream byte range) into parts, so a killed run redoes only
the units without parts; phase 2 resolves redirect chains, link targets and aliases by keyed joins
(CoGroupByKey), so no worker holds the redirect map. The side inputs left are the as-of choice (one value),
the duplicated titles with the losing revisions' keys (sized by the duplicates, a few hundred in an enwiki
dump), the unit ids and two counts. Each table is written as `part-NNNNN-of-NNNNN.parquet` shards keyed by
a hash of the title and sorted inside, so the files are the same bytes whatever the runner, worker count
or units reused."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import apache_beam as beam

from extract.joins import (
    REDIRECT_ROUNDS,
    UnitKeys,
    contested_articles,
    contested_title,
    duplicate_decisions,
    final_classes,
    step_pointers,
    title_fixups,
    unit_redirects,
    unit_titles,
)
from extract.shards import FinishUnit, MergeShard
from extract.sources.transforms import source_transform
from extract.tables import TABLES, shard_of
from extract.units import ExtractUnit, choose_as_of_from_stats, plan_dump_units, unit_stats, write_stats
from runtime.beam import BoundedHeapDoFn
from schemas.config import ExtractConfig
from wikitext.markup import normalize_title

API_UNITS = 16  # hash buckets an API read is cut into


class Step(BoundedHeapDoFn):
    """One of the stage's plain steps (`ExtractUnit`, `UnitKeys`, `FinishUnit`, `MergeShard`: `process`,
    and `setup` where it has one) as a DoFn whose worker's heap is bounded (`runtime.heap`)."""

    def __init__(self, step):
        self.step = step

    def setup(self):
        if hasattr(self.step, "setup"):
            self.step.setup()  # first: what it loads is frozen with the worker's start-up objects
        super().setup()

    def process(self, element, *side_inputs):
        yield from self.step.process(element, *side_inputs)


class _ExtractUnitStep(Step):
    """`ExtractUnit`, each unit counted in Beam's metrics as extracted or reused."""

    def process(self, element):
        for unit_id, extracted in self.step.process(element):
            beam.metrics.Metrics.counter("hopsmith.extract", "units.extracted" if extracted else "units.reused").inc()
            yield unit_id, extracted


class ResolveRedirects(beam.PTransform):
    """(redirect title, target) pairs -> (title, final target) for resolved chains, and the titles caught
    in a cycle (tag "cycles"): `resolve_redirects` as a keyed join, whose memory grows with the largest
    key group (the redirects pointing at one title), not with the wiki."""

    def __init__(self, rounds: int = REDIRECT_ROUNDS):
        super().__init__()
        self.rounds = rounds

    def expand(self, pairs):
        state = pairs | "OneTargetPerTitle" >> beam.CombinePerKey(max) | "Start" >> beam.MapTuple(
            lambda title, target: (title, (target, False)))
        for round_ in range(self.rounds):
            askers = state | f"Askers{round_}" >> beam.Filter(lambda kv: not kv[1][1]) | f"ByPointer{round_}" >> (
                beam.MapTuple(lambda title, s: (s[0], title)))
            done = state | f"Done{round_}" >> beam.Filter(lambda kv: kv[1][1])
            stepped = {"askers": askers, "state": state} | f"Join{round_}" >> beam.CoGroupByKey() | (
                f"Step{round_}" >> beam.FlatMap(step_pointers))
            state = (done, stepped) | f"Next{round_}" >> beam.Flatten()
        return state | "Final" >> beam.ParDo(_SplitResolved()).with_outputs("cycles", main="resolved")



class _SplitResolved(beam.DoFn):
    def process(self, element):
        title, (pointer, done) = element
        yield (title, pointer) if done else beam.pvalue.TaggedOutput("cycles", title)



def decide_duplicates(keyed):
    """`duplicate_decisions` as a Beam step: the losers' keys on the tagged output "losers"."""
    for tag, value in duplicate_decisions(keyed):
        yield beam.pvalue.TaggedOutput(tag, value) if tag == "losers" else value


class SumCounts(beam.CombineFn):
    """Per-page counters (plumbing left out, by reason) summed over the run."""

    def create_accumulator(self):
        return Counter()

    def add_input(self, total, counts):
        total.update(counts)
        return total

    def merge_accumulators(self, accumulators):
        merged = Counter()
        for accumulator in accumulators:
            merged.update(accumulator)
        return merged

    def extract_output(self, total):
        return dict(total)


class ExtractUnits(beam.PTransform):
    """PBegin -> (unit id, extracted now?) once each unit's parts exist under `out_dir/parts` (phase 1)."""

    def __init__(self, config: ExtractConfig, out_dir: str | Path, ceiling: tuple[dt.datetime, str]):
        super().__init__()
        self.config, self.out_dir, self.ceiling = config, str(out_dir), ceiling

    def expand(self, pbegin):
        config = self.config
        if config.dump is not None:
            units = (pbegin | "Source" >> beam.Create([config]) | "PlanUnits" >> beam.FlatMap(plan_dump_units)
                     | "SpreadUnits" >> beam.Reshuffle())
        else:
            units = (
                pbegin
                | "Read" >> source_transform(config)
                | "Bucket" >> beam.Map(lambda r: (f"api-{shard_of(normalize_title(r.title), API_UNITS):02d}", r))
                | "Units" >> beam.GroupByKey()
            )
        return units | "ExtractUnit" >> beam.ParDo(_ExtractUnitStep(ExtractUnit(config, self.out_dir, self.ceiling[0])))


class ExtractGraph(beam.PTransform):
    """(unit id, extracted now?) -> the stage's tables written under `out_dir` (phase 2: the joins).

    Only keys cross the shuffle (see `extract.joins`); a redirect's final page's class reaches the title join
by one more keyed join at the final title (`final_classes`). Side inputs: the as-of choice (one value), the
    titles seen twice and the duplicates' keys (sized by the duplicated titles, not by the wiki), the
    unit ids (one per unit) and the count of resolved redirects (one value, read by `UnitKeys` to wait)."""

    def __init__(self, config: ExtractConfig, out_dir: str | Path, ceiling: tuple[dt.datetime, str]):
        super().__init__()
        self.config, self.out_dir, self.ceiling = config, str(out_dir), ceiling

    def expand(self, units):
        config, out_dir, shards = self.config, self.out_dir, self.config.output_shards
        stats = units | "ReadStats" >> beam.FlatMap(unit_stats, out_dir) | "AllStats" >> beam.combiners.ToList()
        choice = stats | "ChooseAsOf" >> beam.Map(choose_as_of_from_stats, config, self.ceiling)
        as_of = beam.pvalue.AsSingleton(choice | "AsOf" >> beam.Map(lambda chosen: chosen.as_of))
        contested = beam.pvalue.AsDict(
            units
            | "Titles" >> beam.FlatMap(unit_titles, out_dir)
            | "GroupTitles" >> beam.GroupByKey()  # not CombinePerKey: its lifting holds up to 10^6 titles per worker
            | "OnlyDuplicates" >> beam.FlatMap(contested_title)
        )
        decided = (
            units
            | "Contested" >> beam.FlatMap(contested_articles, out_dir, contested)
            | "GroupDuplicates" >> beam.GroupByKey()
            | "DecideDuplicates" >> beam.FlatMap(decide_duplicates).with_outputs("losers", main="skips")
        )
        losers = beam.pvalue.AsDict(decided.losers)
        resolved = (units | "RedirectPairs" >> beam.FlatMap(unit_redirects, out_dir)
                    | "ResolveRedirects" >> ResolveRedirects())
        resolved_count = beam.pvalue.AsSingleton(resolved.resolved | "CountResolved" >> beam.combiners.Count.Globally())
        keys = units | "UnitKeys" >> beam.ParDo(Step(UnitKeys(out_dir)), losers, resolved_count)
        classes = (
            (keys | "EntityKeys" >> beam.Filter(lambda kv: kv[1][0] == "entity"),
             resolved.resolved | "RedirectedTo" >> beam.MapTuple(lambda title, final: (final, ("redirected", title))))
            | "AllClassKeys" >> beam.Flatten()
            | "JoinFinals" >> beam.GroupByKey()
            | "FinalClasses" >> beam.FlatMap(final_classes)
        )
        fixups = (
            (keys, classes,
             resolved.resolved | "Finals" >> beam.MapTuple(lambda title, final: (title, ("final", final))),
             resolved.resolved | "AliasOf" >> beam.MapTuple(lambda title, final: (final, ("alias", title))))
            | "AllTitleKeys" >> beam.Flatten()
            | "JoinTitles" >> beam.GroupByKey()
            | "TitleFixups" >> beam.FlatMap(title_fixups)
        )
        excluded = (
            {"fixups": (decided.skips, fixups) | "AllFixups" >> beam.Flatten(), "unit": units}
            | "ByUnit" >> beam.CoGroupByKey()
            | "FinishUnits" >> beam.ParDo(Step(FinishUnit(out_dir, shards, config.window_days)), as_of, losers)
            | "SumExcluded" >> beam.CombineGlobally(SumCounts())
        )
        excluded = beam.pvalue.AsSingleton(excluded)
        unit_ids = beam.pvalue.AsList(units | "UnitIds" >> beam.Map(lambda unit: unit[0]))
        _ = (units.pipeline
             | "MergeTasks" >> beam.Create([(table, shard) for table in TABLES for shard in range(shards)])
             | "SpreadMerges" >> beam.Reshuffle()
             | "MergeShards" >> beam.ParDo(Step(MergeShard(out_dir, shards)), unit_ids, excluded))
        all_units = units | "AllUnits" >> beam.combiners.ToList()
        return stats | "Stats" >> beam.Map(write_stats, beam.pvalue.AsSingleton(choice), excluded,
                                           beam.pvalue.AsSingleton(all_units), out_dir)
