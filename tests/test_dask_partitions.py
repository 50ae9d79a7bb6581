"""How the Dask runner partitions a pipeline, checked on the bag graph it builds (no cluster): a Reshuffle
of created work items gives each item its own partition, so later steps and joins hold one item's share
per task instead of a fixed fraction of the whole input."""

from __future__ import annotations

import apache_beam as beam
import pytest

pytest.importorskip("distributed")

from apache_beam.runners.dask.overrides import dask_overrides  # noqa: E402

from pipeline.dask_runner import MAX_PARTITIONS_PER_THREAD, _BagVisitor, reshuffle_partitions  # noqa: E402


def _bags(build, threads: int = 2) -> dict[str, object]:
    """The bag of each labelled step of the pipeline `build` makes, as the runner translates it."""
    pipeline = beam.Pipeline()
    build(pipeline)
    pipeline.replace_all(dask_overrides())
    visitor = _BagVisitor({}, 4 * threads, threads)
    pipeline.visit(visitor)
    return {node.full_label: bag for node, bag in visitor.bags.items()}


def test_created_work_items_get_a_partition_each_and_the_joins_keep_them():
    def build(pipeline):
        units = pipeline | "Units" >> beam.Create([f"unit-{i}" for i in range(30)]) | "Spread" >> beam.Reshuffle()
        keys = units | "Keys" >> beam.FlatMap(lambda unit: [(f"{unit}-{k}", unit) for k in range(3)])
        _ = keys | "Group" >> beam.GroupByKey() | "Count" >> beam.MapTuple(lambda key, units: len(list(units)))

    bags = _bags(build)
    assert bags["Spread"].npartitions == 30
    assert bags["Keys"].npartitions == 30
    grouped = [bag for label, bag in bags.items() if label.startswith("Group/")]
    assert grouped and all(bag.npartitions == 30 for bag in grouped)
    assert sorted(count for _, count in bags["Count"].compute(scheduler="sync")) == [1] * 90  # (tag, value)


def test_a_reshuffle_of_computed_items_spreads_over_the_threads_only():
    def build(pipeline):
        _ = (pipeline | "Seed" >> beam.Create([100]) | "Items" >> beam.FlatMap(lambda n: list(range(n)))
             | "Spread" >> beam.Reshuffle())

    bags = _bags(build, threads=3)
    assert bags["Spread"].npartitions == 12  # 4 per thread: the item count is not known when the graph is built
    assert sorted(bags["Spread"].compute(scheduler="sync")) == list(range(100))


def test_reshuffle_partitions_bounds():
    assert reshuffle_partitions(1, 8, 2, 30) == 30
    assert reshuffle_partitions(1, 8, 2, 3) == 8  # never under the spread
    assert reshuffle_partitions(50, 8, 2, 3) == 50  # never fewer than it has
    assert reshuffle_partitions(1, 8, 2, 10**6) == MAX_PARTITIONS_PER_THREAD * 2
    assert reshuffle_partitions(1, 8, 2, None) == 8
