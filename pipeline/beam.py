"""Beam pipeline options shared by every stage's CLI: what the user passed, with embedded defaults."""

from __future__ import annotations

import functools

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.runner import PipelineRunner

from schemas.config import BeamOptions

IN_PROCESS_RUNNER = "pipeline.beam.InProcessRunner"
# `--runner DaskRunner` is hopsmith's fixed subclass of Beam's (pipeline/dask_runner.py). Beam's
# DirectRunner would first try to download and start its Prism runner binary; hopsmith never downloads
# anything at run time, so the direct runner's names run in-process instead (PrismRunner stays available).
RUNNER_ALIASES = {"DaskRunner": "pipeline.dask_runner.DaskRunner", "DirectRunner": IN_PROCESS_RUNNER,
                  "SwitchingDirectRunner": IN_PROCESS_RUNNER, "InProcessRunner": IN_PROCESS_RUNNER}


class InProcessRunner(PipelineRunner):
    """Beam's FnApiRunner in this process (threads, or worker processes with direct_num_workers > 1).

    What DirectRunner runs after its Prism attempt fails, without the attempt: no download, no binary.
    Worker processes run `pipeline.beam_worker`, Beam's worker with secrets scrubbed from what it logs.
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
    """Beam's FnApiRunner (imported when a pipeline runs, not with this module), workers scrubbed."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.transforms import environments

    from pipeline import beam_worker

    class ScrubbedWorkersRunner(fn_runner.FnApiRunner):
        """FnApiRunner whose multi-processing workers start as `pipeline.beam_worker`: `run_pipeline` picks
        the worker command itself (Beam's bare worker), so the choice is replaced where it is stored."""

        @property
        def _default_environment(self):
            return self._environment

        @_default_environment.setter
        def _default_environment(self, environment):
            if isinstance(environment, environments.SubprocessSDKEnvironment):
                environment = environments.SubprocessSDKEnvironment.from_command_string(beam_worker.COMMAND)
            self._environment = environment

    return ScrubbedWorkersRunner



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
    if direct.direct_num_workers > 1 and direct.direct_running_mode == "in_memory":
        direct.direct_running_mode = "multi_processing"  # `--direct_num_workers 2` on the command line too
    return options


def use_filesystem_options(options: PipelineOptions) -> None:
    """Let Beam's FileSystems (`s3://`, `gs://`, ...) read with the run's options (`--s3_endpoint_url`,
    `--s3_region_name`, ...) outside the pipeline too: checksums and checks run on the launching machine.
    Credentials come from the environment as the cloud SDKs read them, never from hopsmith's options."""
    from apache_beam.io.filesystems import FileSystems

    FileSystems.set_options(options)
