"""How the Dask runner partitions a pipeline, checked on the bag graph it builds against an in-process
dask.distributed cluster of 2 worker threads: a Reshuffle cuts its input into partitions of at most
ELEMENTS_PER_PARTITION elements, fewer when a thread would get fewer than PARTITIONS_PER_THREAD partitions,
and into at most SPREAD_LIMIT partitions; a GroupByKey is a P2P shuffle into as many partitions as its input,
whose groups do not depend on the order the shuffle delivered them in; each task is named after its Beam
step; extract's unit keys are made only after redirect resolution."""

from __future__ import annotations

import functools
import random

import apache_beam as beam
import pytest

distributed = pytest.importorskip("distributed")

from apache_beam import coders  # noqa: E402

from extract.as_of import timestamp_ceiling  # noqa: E402
from extract.transforms import ExtractGraph, ExtractUnits  # noqa: E402
from pipeline.dataset import SAMPLE_DUMP, SAMPLE_INDEX  # noqa: E402
from runtime import dask_runner  # noqa: E402
from runtime.dask_runner import _encoded, _grouped, _translate  # noqa: E402
from schemas.config import ExtractConfig  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None) as local:
        yield local


def _bags(build, client) -> dict[str, object]:
    """The bag of each labelled step of the pipeline `build` makes, as the runner translates it."""
    built = beam.Pipeline()
    build(built)
    # as Pipeline.run does: through the runner API, which turns side inputs into placeholders
    pipeline = beam.Pipeline.from_runner_api(built.to_runner_api(use_fake_coders=True), built.runner, built._options)
    return {node.full_label: bag for node, bag in _translate(pipeline, client, {}).bags.items()}


def _units_and_counts(pipeline, units: int = 30):
    planned = (pipeline | "Seed" >> beam.Create([units]) | "Plan" >> beam.FlatMap(lambda n: [f"u{i}" for i in range(n)])
               | "Spread" >> beam.Reshuffle())
    keys = planned | "Keys" >> beam.FlatMap(lambda unit: [(f"k{int(unit[1:]) % 7}", unit) for _ in range(3)])
    _ = keys | "Group" >> beam.GroupByKey() | "Count" >> beam.MapTuple(lambda key, units: (key, len(list(units))))


def _compute(bag, client) -> list:
    return [value for _, value in client.compute(bag, optimize_graph=False).result()]  # ParDos emit (tag, value)


def _sizes(bag, client) -> list[int]:
    return [len(part) for part in client.gather(client.compute(bag.to_delayed(optimize_graph=False)))]


def test_a_reshuffle_cuts_its_input_into_small_partitions_and_a_join_keeps_them(client):
    bags = _bags(functools.partial(_units_and_counts, units=200), client)
    assert bags["Spread"].npartitions == 50 and _sizes(bags["Spread"], client) == [4] * 50  # 200 by at most 4
    assert bags["Keys"].npartitions == 50
    grouped = [bag for label, bag in bags.items() if label.startswith("Group/")]
    assert grouped and all(bag.npartitions == 50 for bag in grouped)
    expected = {f"k{k}": 3 * sum(1 for i in range(200) if i % 7 == k) for k in range(7)}
    assert sorted(_compute(bags["Count"], client)) == sorted(expected.items())
    assert bags["Count"].name.startswith("Count-") and bags["Keys"].name.startswith("Keys-")
    assert sorted(client.compute(bags["Spread"], optimize_graph=False).result()) == sorted(f"u{i}" for i in range(200))


def test_each_thread_gets_several_partitions_within_the_spread_limit(client, monkeypatch):
    # 30 units, fewer than 8 partitions of 4 per thread: one each, as extract's 16 unequal shard merges
    assert _sizes(_bags(_units_and_counts, client)["Spread"], client) == [1] * 30
    monkeypatch.setattr(dask_runner, "ELEMENTS_PER_PARTITION", 100)
    many = functools.partial(_units_and_counts, units=400)
    assert _sizes(_bags(many, client)["Spread"], client) == [25] * 16  # 8 per worker thread, not 4 of 100
    monkeypatch.setattr(dask_runner, "SPREAD_LIMIT", 4)
    assert _sizes(_bags(_units_and_counts, client)["Spread"], client) == [8, 8, 8, 6]


def test_groups_do_not_depend_on_the_order_the_shuffle_delivered_them():
    key_coder = coders.registry.get_coder(tuple).as_deterministic_coder("test")
    value_coder = coders.registry.get_coder(str)
    records = [((f"title {i % 5}", i % 2), f"value {i}") for i in range(60)]
    groups = []
    for seed in (1, 2):
        shuffled = records[:]
        random.Random(seed).shuffle(shuffled)
        groups.append(_grouped(_encoded(shuffled, key_coder, value_coder), key_coder, value_coder))
    assert groups[0] == groups[1]
    assert len(groups[0]) == 10 and all(isinstance(key, tuple) and len(values) == 6 for key, values in groups[0])
    assert sorted(value for _, values in groups[0] for value in values) == sorted(value for _, value in records)


def test_a_step_before_a_reshuffle_that_other_steps_read_runs_once(client, tmp_path):
    runs = tmp_path / "runs"

    def load(seed: int) -> int:  # walk's graph: planned from and read as a side input
        with runs.open("a") as log:
            log.write("x")
        return seed * 10

    def build(pipeline):
        loaded = pipeline | "Seed" >> beam.Create([3]) | "Load" >> beam.Map(load)
        tasks = loaded | "Tasks" >> beam.FlatMap(lambda n: list(range(n))) | "Spread" >> beam.Reshuffle()
        _ = tasks | "Use" >> beam.Map(lambda task, base: task + base, base=beam.pvalue.AsSingleton(loaded))

    bags = _bags(build, client)
    assert sorted(_compute(bags["Use"], client)) == list(range(30, 60))
    assert runs.read_text() == "x"


def test_extract_asks_the_title_join_only_once_redirects_are_resolved(client, tmp_path):
    """Every unit's join keys are made only once redirect resolution has finished, so the title join's
    shuffle takes them as they come rather than holding the whole wiki's keys while it waits for the
    resolved redirects (measured: 38.6 -> 17.9 MiB held at 25,000 articles on 1 worker)."""
    config = ExtractConfig(dump=str(SAMPLE_DUMP), index=str(SAMPLE_INDEX))
    ceiling = timestamp_ceiling(config)

    def build(pipeline):
        _ = (pipeline | "ExtractUnits" >> ExtractUnits(config, tmp_path, ceiling)
             | "ExtractGraph" >> ExtractGraph(config, tmp_path, ceiling))

    bags = _bags(build, client)
    resolved = bags["ExtractGraph/ResolveRedirects/Final/ParDo(_SplitResolved)"]
    unit_keys = bags["ExtractGraph/UnitKeys"]
    asked = set(unit_keys.__dask_graph__().keys())
    assert resolved.__dask_keys__() and set(resolved.__dask_keys__()) <= asked
    # and resolution does not wait for the unit keys: it starts from the redirect parts
    assert not set(unit_keys.__dask_keys__()) & set(resolved.__dask_graph__().keys())
