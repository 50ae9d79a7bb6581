"""Beam pipeline options shared by every stage's CLI: what the user passed, with embedded defaults."""

from __future__ import annotations

import functools
import itertools
import threading
import types
import weakref

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineRunner
from apache_beam.transforms import core as beam_core

from ground.errors import UserError
from runtime.heap import freeze_start_up_objects, map_large_allocations
from schemas.config import BeamOptions

IN_PROCESS_RUNNER = "runtime.beam.InProcessRunner"
# `--runner DaskRunner` is hopsmith's fixed subclass of Beam's (runtime/dask_runner.py). Beam's
# DirectRunner would first try to download and start its Prism runner binary; hopsmith never downloads
# anything at run time, so the direct runner's names run in-process instead (PrismRunner stays available).
RUNNER_ALIASES = {"DaskRunner": "runtime.dask_runner.DaskRunner", "DirectRunner": IN_PROCESS_RUNNER,
                  "SwitchingDirectRunner": IN_PROCESS_RUNNER, "InProcessRunner": IN_PROCESS_RUNNER}
# a stage's input reaches a worker process in messages of about this many bytes, cut between elements
INPUT_MESSAGE_BYTES = 4 << 20


class InProcessRunner(PipelineRunner):
    """Beam's FnApiRunner in this process (threads, or worker processes with direct_num_workers > 1).

    What DirectRunner runs after its Prism attempt fails, without the attempt: no download, no binary.
    Worker processes run `runtime.beam_worker`, Beam's worker with secrets scrubbed from what it logs.
    """

    def run_pipeline(self, pipeline, options):
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return _fn_api_runner_class()(provision_info=provision).run_pipeline(pipeline, options)


@functools.cache
def _fn_api_runner_class():
    """Beam's FnApiRunner (imported when a pipeline runs, not with this module), workers scrubbed, and
    stage inputs streamed to worker processes in pieces (`_streamed_input_sender`)."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.transforms import environments

    from runtime import beam_worker

    class ScrubbedWorkersRunner(fn_runner.FnApiRunner):
        """FnApiRunner whose multi-processing workers start as `runtime.beam_worker`: `run_pipeline` picks
        the worker command itself (Beam's bare worker), so the choice is replaced where it is stored."""

        @property
        def _default_environment(self):
            return self._environment

        @_default_environment.setter
        def _default_environment(self, environment):
            if isinstance(environment, environments.SubprocessSDKEnvironment):
                environment = environments.SubprocessSDKEnvironment.from_command_string(beam_worker.COMMAND)
            self._environment = environment

    fn_runner.BundleManager._send_input_to_worker = _streamed_input_sender(fn_runner.BundleManager._send_input_to_worker)
    return ScrubbedWorkersRunner


def _streamed_input_sender(send_whole):
    """Beam's FnApiRunner sends each stage's input to a worker process as one message: the whole output of
    a GroupByKey, held at once by the worker, so a worker's memory grew with the wiki (and a grouped output
    past protobuf's 2 GiB message limit could not be sent at all). This sends it in element-aligned pieces of about
    INPUT_MESSAGE_BYTES, from a thread, since the worker drains its input only once the bundle has started
    (Beam sends the bundle request after the input). Workers in this process (in-memory) keep Beam's way."""
    from apache_beam.runners.worker.data_plane import InMemoryDataChannel

    def send_in_pieces(self, process_bundle_id, read_transform_id, byte_streams):
        if isinstance(self._worker_handler.data_conn, InMemoryDataChannel):
            return send_whole(self, process_bundle_id, read_transform_id, byte_streams)
        coder = self.bundle_context_manager.get_input_coder_impl(read_transform_id)
        pieces = [(data, piece_ends(data, coder, INPUT_MESSAGE_BYTES)) for data in byte_streams or []]
        stream = self._worker_handler.data_conn.output_stream(process_bundle_id, read_transform_id)

        def send():
            for data, ends in pieces:
                for start, end in itertools.pairwise([0, *ends]):
                    stream.write(data[start:end])
                    stream.flush()
            stream.close()

        threading.Thread(target=send, name=f"input-{read_transform_id}", daemon=True).start()

    return send_in_pieces


def piece_ends(data: bytes, coder_impl, limit: int) -> list[int]:
    """End offsets cutting `data` (elements encoded back to back, as on Beam's data plane) into pieces of
    at least `limit` bytes (the last may be shorter), each ending where an element ends."""
    if len(data) <= limit:
        return [len(data)] if data else []
    from apache_beam.coders.coder_impl import create_InputStream

    stream, ends, start = create_InputStream(data), [], 0
    while stream.size() > 0:
        coder_impl.decode_from_stream(stream, True)
        end = len(data) - stream.size()
        if end - start >= limit or stream.size() == 0:
            ends.append(end)
            start = end
    return ends


def _remembered_signatures(args_defaults):
    """Beam's `get_function_args_defaults` that reads each function's signature once. Beam asks for the
    signature of every method of a DoFn each time it checks whether the DoFn keeps state: 26,000
    `inspect.signature` calls to build and run the extract stage's 200 transforms, a third of its fixed
    start-up. A function's parameters do not change, so the answer is kept per function (weakly: a
    pipeline's lambdas go with it) and per bound or not; other callables are asked each time."""
    remembered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get_function_args_defaults(f):
        bound = isinstance(f, types.MethodType)
        function = f.__func__ if bound else f
        if not isinstance(function, types.FunctionType):
            return args_defaults(f)
        answers = remembered.setdefault(function, {})
        if bound not in answers:
            answers[bound] = args_defaults(f)
        args, defaults = answers[bound]
        return list(args), list(defaults)

    get_function_args_defaults.beam_original = args_defaults
    return get_function_args_defaults


if not hasattr(beam_core.get_function_args_defaults, "beam_original"):
    beam_core.get_function_args_defaults = _remembered_signatures(beam_core.get_function_args_defaults)


def _remembered_views(view_as):
    """Beam's `PipelineOptions.view_as` that builds each view once per options object and view class.
    Beam asks for a view at every transform it applies and every type hint it checks, and each one builds
    an argparse parser and parses the flags again: 760 views to build and run the extract stage, a sixth
    of its fixed start-up. A view keeps no values of its own (it reads and writes the options' shared
    `_all_options`), so the first view of a class answers every later call (kept weakly, with its options)."""
    remembered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def remembered_view_as(self, cls):
        views = remembered.setdefault(self, {})
        view = views.get(cls)
        if view is None or view._all_options is not self._all_options:
            view = views[cls] = view_as(self, cls)
        return view

    remembered_view_as.beam_original = view_as
    return remembered_view_as


if not hasattr(PipelineOptions.view_as, "beam_original"):
    PipelineOptions.view_as = _remembered_views(PipelineOptions.view_as)


def pipeline_options(beam: BeamOptions | None = None, extra_args: list[str] | None = None) -> PipelineOptions:
    """PipelineOptions from a BeamOptions config plus raw `--flag value` arguments (the latter win).

    With no options (or `--runner DirectRunner`) this is the in-process runner; `direct_num_workers > 1`
    switches it to multi-processing so workers really run in parallel. `--runner DaskRunner` with
    `--dask_client_address tcp://HOST:PORT` runs on a dask.distributed cluster.
    """
    beam = beam or BeamOptions()
    args = [f"--runner={beam.runner}"]
    if beam.runner == "DirectRunner":
        mode = beam.direct_running_mode
        if beam.direct_num_workers > 1 and mode == "in_memory":
            mode = "multi_processing"
        args += [f"--direct_num_workers={beam.direct_num_workers}", f"--direct_running_mode={mode}"]
    args += list(beam.extra_args) + list(extra_args or [])
    options = PipelineOptions(args)
    standard = options.view_as(StandardOptions)
    standard.runner = RUNNER_ALIASES.get(standard.runner or "DirectRunner", standard.runner)
    direct = options.view_as(DirectOptions)
    if direct.direct_num_workers < 0:  # the config's field is bounded; a pass-through flag is checked here
        raise UserError(f"--direct_num_workers = {direct.direct_num_workers}: must be >= 0 (0: one per CPU)")
    if direct.direct_num_workers > 1 and direct.direct_running_mode == "in_memory":
        direct.direct_running_mode = "multi_processing"  # `--direct_num_workers 2` on the command line too
    return options


def runs_in_this_process(options: PipelineOptions) -> bool:
    """Whether the options run a pipeline here, one bundle at a time: the in-process runner (the default,
    and `--runner DirectRunner`) with one worker in in-memory mode. A stage may then call its steps as
    plain functions; `--direct_running_mode multi_threading`, more workers or another runner run Beam."""
    direct = options.view_as(DirectOptions)
    return (options.view_as(StandardOptions).runner == IN_PROCESS_RUNNER and direct.direct_num_workers == 1
            and direct.direct_running_mode == "in_memory")


def use_filesystem_options(options: PipelineOptions) -> None:
    """Let Beam's FileSystems (`s3://`, `gs://`, ...) read with the run's options (`--s3_endpoint_url`,
    `--s3_region_name`, ...) outside the pipeline too: checksums and checks run on the launching machine.
    Credentials come from the environment as the cloud SDKs read them, never from hopsmith's options."""
    from apache_beam.io.filesystems import FileSystems

    FileSystems.set_options(options)


class BoundedHeapDoFn(beam.DoFn):
    """A DoFn that maps its worker's large allocations (`runtime.heap`) on whatever runner's worker it is
    set up: hopsmith's own worker processes do it at start, a Dask or Flink worker here; and that freezes
    the worker's start-up objects, so the collection after each unit stays cheap."""

    def setup(self):
        map_large_allocations()
        freeze_start_up_objects()
