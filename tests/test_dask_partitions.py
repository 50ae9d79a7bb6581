"""How the Dask runner partitions a pipeline, checked on the bag graph it builds (no cluster): a Reshuffle
spreads its input over SPREAD_PER_THREAD partitions per worker thread, a GroupByKey keeps them (one stage
of dask.bag's task shuffle), and each task is named after its Beam step."""

from __future__ import annotations

import apache_beam as beam
import pytest

pytest.importorskip("distributed")

from apache_beam.runners.dask.overrides import dask_overrides  # noqa: E402

from pipeline.dask_runner import SPREAD_PER_THREAD, _BagVisitor  # noqa: E402


def _bags(build, threads: int) -> dict[str, object]:
    """The bag of each labelled step of the pipeline `build` makes, as the runner translates it."""
    pipeline = beam.Pipeline()
    build(pipeline)
    pipeline.replace_all(dask_overrides())
    visitor = _BagVisitor({}, SPREAD_PER_THREAD * threads)
    pipeline.visit(visitor)
    return {node.full_label: bag for node, bag in visitor.bags.items()}


def test_a_reshuffle_spreads_over_the_threads_and_a_join_keeps_its_partitions():
    def build(pipeline):
        units = (pipeline | "Seed" >> beam.Create([30]) | "Plan" >> beam.FlatMap(lambda n: [f"u{i}" for i in range(n)])
                 | "Spread" >> beam.Reshuffle())
        keys = units | "Keys" >> beam.FlatMap(lambda unit: [(f"{unit}-{k}", unit) for k in range(3)])
        _ = keys | "Group" >> beam.GroupByKey() | "Count" >> beam.MapTuple(lambda key, units: len(list(units)))

    bags = _bags(build, threads=3)
    assert bags["Spread"].npartitions == 12 and bags["Keys"].npartitions == 12
    grouped = [bag for label, bag in bags.items() if label.startswith("Group/")]
    assert grouped and all(bag.npartitions == 12 for bag in grouped)
    assert sorted(count for _, count in bags["Count"].compute(scheduler="sync")) == [1] * 90  # (tag, value)
    assert bags["Count"].name.startswith("Count-") and bags["Keys"].name.startswith("Keys-")
    assert sorted(bags["Spread"].compute(scheduler="sync")) == sorted(f"u{i}" for i in range(30))
