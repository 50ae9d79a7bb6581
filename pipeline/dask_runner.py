"""`--runner DaskRunner`: Beam's DaskRunner with the fixes a multi-output, multi-sink stage needs.

Beam 2.77's DaskRunner translates a pipeline into dask bags, but (1) it computes only the last step
applied, so any other sink never runs; (2) a ParDo's tagged outputs all land in one bag without their
tags, so `with_outputs` consumers read each other's records; (3) a side input is recomputed inside every
task that reads it (from the dump up); (4) a grouped partition is a lazy iterator, so a second step
reading it finds it empty. Here every step whose outputs nobody consumes is computed, each ParDo emits
`(tag, value)` pairs that its consumers select by tag into lists, grouped partitions are lists, side inputs
enter the task graph once as a delayed list, and a Flatten keeps its widest input's partition count. The
translations of Create, GroupByKey and Flatten are otherwise Beam's own.

Connect to a cluster with `--dask_client_address tcp://HOST:PORT`; without it a local cluster starts.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any

import dask
import dask.bag as db
import dask.distributed as ddist
from apache_beam import DoFn, pvalue
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor
from apache_beam.runners.common import DoFnContext, DoFnInvoker, DoFnSignature, Receiver, _OutputHandler
from apache_beam.runners.dask import dask_runner as beam_dask
from apache_beam.runners.dask.overrides import _Reshuffle, dask_overrides
from apache_beam.runners.dask.transform_evaluator import (
    TRANSLATIONS,
    Flatten,
    GroupByKey,
    NoOp,
    get_windowed_value,
)
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import ParDo
from apache_beam.transforms.sideinputs import SideInputMap

from pipeline.secrets import register_secret_env, registered_secret_names, scrub_process_output


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


# partitions a Reshuffle makes per worker thread: slack to even out unequal work units. A GroupByKey keeps
# its input's count. More did not lower extract's peak per worker (100,000 articles, 2 workers: 728 MiB
# with 4 per thread, at least 884 with 16, 810 with one per unit, whose task shuffle takes two stages)
SPREAD_PER_THREAD = 4


@dataclasses.dataclass
class _BagVisitor(PipelineVisitor):
    bag_kwargs: dict
    spread: int  # partitions a Reshuffle spreads its input over (at least)
    bags: dict[AppliedPTransform, db.Bag] = dataclasses.field(default_factory=collections.OrderedDict)
    tagged: set[AppliedPTransform] = dataclasses.field(default_factory=set)
    consumed: set[AppliedPTransform] = dataclasses.field(default_factory=set)

    def bag_of(self, value: pvalue.PCollection) -> db.Bag:
        """The bag holding one PCollection; a ParDo's outputs are selected by their tag."""
        producer = value.producer
        self.consumed.add(producer)
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
            self.bags[node] = inputs[0].repartition(max(inputs[0].npartitions, self.spread))
            return
        op = TRANSLATIONS.get(node.transform.__class__, NoOp)(node, bag_kwargs=self.bag_kwargs)
        if isinstance(op, Flatten):  # as many partitions as its largest input, not their sum: joins in a
            # loop (redirect rounds) would otherwise double the partitions, and the shuffle's tasks, each round
            flat = op.apply(input_bag=inputs)
            widest = max((bag.npartitions for bag in inputs), default=1)
            self.bags[node] = flat.repartition(widest) if flat.npartitions > widest else flat
        else:
            self.bags[node] = op.apply(input_bag=inputs[0] if inputs else None)
            if isinstance(op, GroupByKey):
                self.bags[node] = self.bags[node].map_partitions(list)  # Beam's is a lazy map (see _select)

    def _pardo(self, node: AppliedPTransform, bag: db.Bag) -> db.Bag:
        transform = node.transform
        args, kwargs = transform.raw_side_inputs
        main = next(iter(node.main_inputs.values()))
        window_fn = main.windowing.windowfn if hasattr(main, "windowing") else None
        specs, values = [], []
        for side in node.side_inputs:
            specs.append((type(side), side._view_options(), side._window_mapping_fn))
            values.append(dask.delayed(_concat)(self.bag_of(side.pvalue).to_delayed()))
        return bag.map_partitions(_run_bundle, transform.fn, transform.label, list(args), kwargs, window_fn,
                                  specs, *values, token=_task_name(node.full_label))

    def sinks(self) -> list[db.Bag]:
        """Every step none of whose outputs is read by another: computing these runs the whole pipeline."""
        return [bag for node, bag in self.bags.items() if node not in self.consumed]


@dataclasses.dataclass
class DaskRunnerResult(beam_dask.DaskRunnerResult):
    """Waits for every sink, raises a worker's error here, and closes the client afterwards."""

    def wait_until_finish(self, duration=None) -> str:
        try:
            return super().wait_until_finish(duration)
        finally:
            if self._state != PipelineState.RUNNING:
                self.client.close()


class ScrubWorkerOutput(ddist.WorkerPlugin):
    """On every worker, secrets masked in what it logs and prints (`pipeline.secrets.scrub_process_output`),
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
        client = ddist.Client(**dask_options)
        client.register_plugin(ScrubWorkerOutput(registered_secret_names()), name="hopsmith-scrub-output")
        pipeline.replace_all(dask_overrides())
        visitor = _BagVisitor(bag_kwargs, SPREAD_PER_THREAD * max(1, sum(client.nthreads().values())))
        pipeline.visit(visitor)
        done = [sink.map_partitions(lambda part: [sum(1 for _ in part)]) for sink in visitor.sinks()]
        return DaskRunnerResult(client, client.compute(list(dask.optimize(*done))))
