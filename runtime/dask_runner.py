"""`--runner DaskRunner`: Beam's DaskRunner with the fixes a multi-output, multi-sink stage needs.

Beam 2.77's DaskRunner translates a pipeline into dask bags, but (1) it computes only the last step
applied, so any other sink never runs; (2) a ParDo's tagged outputs all land in one bag without their
tags, so `with_outputs` consumers read each other's records; (3) a side input is recomputed inside every
task that reads it (from the dump up); (4) a grouped partition is a lazy iterator, so a second step
reading it finds it empty; (5) a GroupByKey is dask.bag's task shuffle, which holds every record in flight
in the workers' memory, and a Reshuffle keeps its input's partitions, so what one task holds grows with the
input. Here every step whose outputs nobody consumes is computed, each ParDo emits `(tag, value)` pairs that
its consumers select by tag into lists, side inputs enter the task graph once as a delayed list, a Flatten
keeps its widest input's partition count, a GroupByKey is Dask's peer-to-peer shuffle (P2P: records cross
as Arrow tables of encoded keys and values and wait on disk, not in memory) into lists of groups, and a
Reshuffle computes and counts its input and cuts it into partitions of a few elements. The graph is
computed as built: dask.bag's optimisation (task fusion) rewrites P2P's barrier task and breaks it. Create
is Beam's own translation, and Flatten too but for its partition count.

Connect to a cluster with `--dask_client_address tcp://HOST:PORT`; without it a local cluster starts.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import operator
import re
import zlib
from typing import Any

import dask
import dask.bag as db
import dask.dataframe as dd
import dask.distributed as ddist
import pandas as pd
import pyarrow as pa
from apache_beam import DoFn, coders, pvalue
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor
from apache_beam.runners.common import DoFnContext, DoFnInvoker, DoFnSignature, Receiver, _OutputHandler
from apache_beam.runners.dask import dask_runner as beam_dask
from apache_beam.runners.dask.overrides import _GroupByKeyOnly, _Reshuffle, dask_overrides
from apache_beam.runners.dask.transform_evaluator import (
    TRANSLATIONS,
    Flatten,
    NoOp,
    defenestrate,
    get_windowed_value,
)
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import ParDo
from apache_beam.transforms.sideinputs import SideInputMap
from apache_beam.typehints import typehints

from ground.log_scrubbing import scrub_process_output
from schemas.secrets import register_secret_env, registered_secret_names


class _TagReceiver(Receiver):
    def __init__(self, tag, out: list):
        self.tag, self.out = tag, out

    def receive(self, windowed_value):
        self.out.append((self.tag, windowed_value.value))


class _Receivers(dict):
    def __init__(self, out: list):
        super().__init__()
        self.out = out

    def __missing__(self, tag):
        self[tag] = _TagReceiver(tag, self.out)
        return self[tag]


def _run_bundle(items, fn, label, args, kwargs, window_fn, side_specs, *side_values) -> list:
    """One dask partition through a DoFn: every output as `(tag, value)`, the main output's tag None."""
    out: list = []
    receivers = _Receivers(out)
    handler = _OutputHandler(
        window_fn=window_fn, main_receivers=receivers[None], tagged_receivers=receivers,
        per_element_output_counter=None, output_batch_converter=None, process_yields_batches=False,
        process_batch_yields_elements=False,
    )
    side_inputs = [
        SideInputMap(view, options, [get_windowed_value(v, mapping) for v in values])
        for (view, options, mapping), values in zip(side_specs, side_values, strict=True)
    ]
    invoker = DoFnInvoker.create_invoker(
        DoFnSignature(fn), handler, context=DoFnContext(label, state=None), side_inputs=side_inputs or None,
        input_args=args, input_kwargs=kwargs, user_state_context=None,
        bundle_finalizer_param=DoFn.BundleFinalizerParam(),
    )
    invoker.invoke_setup()
    invoker.invoke_start_bundle()
    for item in items:
        invoker.invoke_process(get_windowed_value(item, window_fn))
    invoker.invoke_finish_bundle()
    invoker.invoke_teardown()
    return out


def _select(part, tag) -> list:
    """One tag's values of a ParDo's partition, as a list: a partition read by several steps must not be
    a lazy iterator, or the second reader finds it exhausted."""
    return [value for value_tag, value in part if value_tag == tag]


def _concat(parts: list[list]) -> list:
    return [value for part in parts for value in part]


def _task_name(label: str) -> str:
    """A Beam label as a Dask task name (the dashboard and `client.processing()` then say which step runs)."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", label).strip("_") or "step"


# A Reshuffle spreads its input at most ELEMENTS_PER_PARTITION elements per partition, fewer when that
# would leave a worker thread fewer than PARTITIONS_PER_THREAD partitions, and over at most SPREAD_LIMIT
# partitions. Partitions then grow with the input (extract: a partition is 4 work units), so what a task
# holds does not; a GroupByKey keeps its input's partition count, and P2P's cost grows with (partitions in)
# x (partitions out): at 25,000 articles on 2 workers, one unit per partition cost 10% more CPU time than 4
# (334 against 303 s for the whole run). Few elements of unequal cost (extract's 16 shard merges, 4 of them
# the relations') go one per partition, so that the threads finish close together: 4 per partition put
# the 4 relation merges in one task, and at 400,000 articles one worker merged alone for 10 minutes
ELEMENTS_PER_PARTITION = 4
PARTITIONS_PER_THREAD = 8
SPREAD_LIMIT = 50_000

_BINARY = pd.ArrowDtype(pa.binary())
# one shuffled record: the bucket is a stable hash of the encoded key (Python's hash() is salted per process)
_SHUFFLE_META = pd.DataFrame({"bucket": pd.Series([], dtype="int64"), "key": pd.Series([], dtype=_BINARY),
                              "value": pd.Series([], dtype=_BINARY)})


def _encoded(items, key_coder: coders.Coder, value_coder: coders.Coder) -> pd.DataFrame:
    """One partition of a GroupByKey's `(key, value)` input as rows of encoded bytes, what P2P ships. Like
    Beam's own translation, only the global window is supported: each value's window is dropped."""
    keys, values = [], []
    for key, value in items:  # a value in its window (ReifyWindows), dropped as Beam's translation does
        keys.append(key_coder.encode(key))
        values.append(value_coder.encode(defenestrate(value)))
    return pd.DataFrame({"bucket": pd.Series([zlib.crc32(key) for key in keys], dtype="int64"),
                         "key": pd.Series(keys, dtype=_BINARY), "value": pd.Series(values, dtype=_BINARY)})


def _grouped(frame: pd.DataFrame, key_coder: coders.Coder, value_coder: coders.Coder) -> list:
    """One shuffled partition as `(key, [values])` groups, ordered by encoded key and value, so that a
    group does not depend on the order in which the shuffle delivered its records."""
    table = pa.Table.from_pandas(frame[["key", "value"]], preserve_index=False).sort_by(
        [("key", "ascending"), ("value", "ascending")])
    rows = zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)
    return [(key_coder.decode(key), [value_coder.decode(value) for _, value in group])
            for key, group in itertools.groupby(rows, key=operator.itemgetter(0))]


def _elements_per_partition(count: int, threads: int) -> int:
    per_partition = min(ELEMENTS_PER_PARTITION, count // (PARTITIONS_PER_THREAD * threads))
    return max(1, per_partition, -(-count // SPREAD_LIMIT))


def _read_by(node: AppliedPTransform) -> list[AppliedPTransform]:
    """The steps whose outputs `node` reads, as main or side input."""
    values = [*node.inputs, *(side.pvalue for side in node.side_inputs)]
    return [value.producer for value in values if isinstance(value, pvalue.PCollection)]


class _Readers(PipelineVisitor):
    """How many steps read each step's outputs."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()

    def visit_transform(self, node: AppliedPTransform) -> None:
        self.counts.update(_read_by(node))


@dataclasses.dataclass
class _BagVisitor(PipelineVisitor):
    bag_kwargs: dict
    client: ddist.Client  # a Reshuffle's input is computed and counted while the graph is built
    threads: int  # the cluster's worker threads (at least 1)
    readers: collections.Counter  # steps reading each step (_Readers)
    # results the run reads that were computed while the graph was built (_spread): the scheduler forgets a
    # result once no client holds its future, so these are held until the run ends
    held: list[db.Bag] = dataclasses.field(default_factory=list)
    bags: dict[AppliedPTransform, db.Bag] = dataclasses.field(default_factory=collections.OrderedDict)
    tagged: set[AppliedPTransform] = dataclasses.field(default_factory=set)

    def bag_of(self, value: pvalue.PCollection) -> db.Bag:
        """The bag holding one PCollection; a ParDo's outputs are selected by their tag."""
        producer = value.producer
        bag = self.bags[producer]
        if producer in self.tagged:
            bag = bag.map_partitions(_select, value.tag)
        return bag

    def visit_transform(self, node: AppliedPTransform) -> None:
        inputs = [self.bag_of(v) for v in node.inputs if not isinstance(v, pvalue.PBegin)]
        if type(node.transform) is ParDo:  # not its subclasses: GroupAlsoByWindow is a no-op here, as in Beam
            self.bags[node] = self._pardo(node, inputs[0])
            self.tagged.add(node)
            return
        if isinstance(node.transform, _Reshuffle):
            self.bags[node] = self._spread(node, inputs[0])
            return
        if isinstance(node.transform, _GroupByKeyOnly):
            self.bags[node] = self._group_by_key(node, inputs[0])
            return
        op = TRANSLATIONS.get(node.transform.__class__, NoOp)(node, bag_kwargs=self.bag_kwargs)
        if isinstance(op, Flatten):  # as many partitions as its largest input, not their sum: joins in a
            # loop (redirect rounds) would otherwise double the partitions, and the shuffle's tasks, each round
            flat = op.apply(input_bag=inputs)
            widest = max((bag.npartitions for bag in inputs), default=1)
            self.bags[node] = flat.repartition(widest) if flat.npartitions > widest else flat
        else:
            self.bags[node] = op.apply(input_bag=inputs[0] if inputs else None)

    def _spread(self, node: AppliedPTransform, bag: db.Bag) -> db.Bag:
        """A Reshuffle: its input, computed first and brought to the launcher (a Reshuffle here spreads a
        work plan: extract's units, walk's tasks, the shard merges), cut into partitions of at most
        ELEMENTS_PER_PARTITION elements (see there). The partitions of the steps and joins after it then
        grow with the input, and what one task holds does not; and as the graph's own data they are tasks
        with no inputs, which the scheduler hands to whichever worker is free (partitions cut from a result
        would all start on the worker that holds it). The steps before it that other steps read too are
        kept for the run, so they run once (walk: the graph, also a side input, is loaded once)."""
        shared = [step for step in self._upstream(node) if self.readers[step] > 1]  # read again later: kept
        held, *kept = self.client.persist([bag, *(self.bags[step] for step in shared)], optimize_graph=False)
        self.bags.update(zip(shared, kept, strict=True))
        self.held += kept
        elements = held.compute(optimize_graph=False)
        return db.from_sequence(elements, partition_size=_elements_per_partition(len(elements), self.threads))

    @staticmethod
    def _upstream(node: AppliedPTransform) -> set[AppliedPTransform]:
        seen: set[AppliedPTransform] = set()
        todo = [node]
        while todo:
            for step in _read_by(todo.pop()):
                if step not in seen:
                    seen.add(step)
                    todo.append(step)
        return seen

    def _group_by_key(self, node: AppliedPTransform, bag: db.Bag) -> db.Bag:
        """A GroupByKey through Dask's P2P shuffle, keys encoded by Beam's deterministic key coder, into as
        many partitions as its input; each output partition is a list of `(key, [values])`."""
        key_type, value_type = typehints.coerce_to_kv_type(node.inputs[0].element_type, node.full_label).tuple_types
        key_coder = coders.registry.get_coder(key_type).as_deterministic_coder(node.full_label)
        if isinstance(value_type, typehints.WindowedTypeConstraint):  # the values reach it in their windows
            value_type = value_type.inner_type
        value_coder = coders.registry.get_coder(value_type)
        name = _task_name(node.full_label)
        frames = bag.map_partitions(_encoded, key_coder, value_coder, token=f"{name}-encode")
        shuffled = dd.from_delayed(frames.to_delayed(optimize_graph=False), meta=_SHUFFLE_META,
                                   verify_meta=False).shuffle("bucket", npartitions=bag.npartitions,
                                                              shuffle_method="p2p")
        key = f"{name}-{dask.base.tokenize(shuffled, key_coder, value_coder)}"  # unique to this shuffle's data
        return db.from_delayed([dask.delayed(_grouped)(part, key_coder, value_coder, dask_key_name=(key, index))
                                for index, part in enumerate(shuffled.to_delayed(optimize_graph=False))])

    def _pardo(self, node: AppliedPTransform, bag: db.Bag) -> db.Bag:
        transform = node.transform
        args, kwargs = transform.raw_side_inputs
        main = next(iter(node.main_inputs.values()))
        window_fn = main.windowing.windowfn if hasattr(main, "windowing") else None
        specs, values = [], []
        for side in node.side_inputs:
            specs.append((type(side), side._view_options(), side._window_mapping_fn))
            values.append(dask.delayed(_concat)(self.bag_of(side.pvalue).to_delayed(optimize_graph=False)))
        return bag.map_partitions(_run_bundle, transform.fn, transform.label, list(args), kwargs, window_fn,
                                  specs, *values, token=_task_name(node.full_label))

    def sinks(self) -> list[db.Bag]:
        """Every step none of whose outputs is read by another: computing these runs the whole pipeline."""
        return [bag for node, bag in self.bags.items() if not self.readers[node]]


def _translate(pipeline, client: ddist.Client, bag_kwargs: dict) -> _BagVisitor:
    """The pipeline as dask bags, one per step (`_BagVisitor.bags`), for `client`'s cluster."""
    pipeline.replace_all(dask_overrides())
    readers = _Readers()
    pipeline.visit(readers)
    visitor = _BagVisitor(bag_kwargs, client, max(1, sum(client.nthreads().values())), readers.counts)
    pipeline.visit(visitor)
    return visitor


@dataclasses.dataclass
class DaskRunnerResult(beam_dask.DaskRunnerResult):
    """Waits for every sink, raises a worker's error here, and closes the client afterwards."""

    held: list[db.Bag] = dataclasses.field(default_factory=list)  # results the run reads (_BagVisitor.held)

    def wait_until_finish(self, duration=None) -> str:
        try:
            return super().wait_until_finish(duration)
        finally:
            if self._state != PipelineState.RUNNING:
                self.client.close()


class ScrubWorkerOutput(ddist.WorkerPlugin):
    """On every worker, secrets masked in what it logs and prints (`ground.log_scrubbing.scrub_process_output`),
    including the launcher's `api_key_env` variables: a Dask worker's log lines otherwise reach its
    terminal unscrubbed."""

    def __init__(self, secret_names: list[str]):
        self.secret_names = secret_names

    def setup(self, worker) -> None:
        for name in self.secret_names:
            register_secret_env(name)
        scrub_process_output()


class DaskRunner(beam_dask.DaskRunner):
    """Executes a pipeline on a dask.distributed cluster (see the module docstring for the fixes)."""

    def run_pipeline(self, pipeline, options) -> DaskRunnerResult:
        dask_options: dict[str, Any] = options.view_as(beam_dask.DaskOptions).get_all_options(
            drop_default=True, current_only=True)
        bag_kwargs = beam_dask.DaskOptions._extract_bag_kwargs(dask_options)
        # Dask logs each P2P shuffle's start and end at WARNING: routine here, where every GroupByKey is one
        logging.getLogger("distributed.shuffle._scheduler_plugin").setLevel(logging.ERROR)
        client = ddist.Client(**dask_options)
        client.register_plugin(ScrubWorkerOutput(registered_secret_names()), name="hopsmith-scrub-output")
        visitor = _translate(pipeline, client, bag_kwargs)
        done = [sink.map_partitions(lambda part: [sum(1 for _ in part)]) for sink in visitor.sinks()]
        # not optimised: dask.bag's graph optimisation rewrites the P2P shuffle's barrier task, which breaks it
        return DaskRunnerResult(client, client.compute(done, optimize_graph=False), visitor.held)
