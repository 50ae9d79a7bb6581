"""Beam pipeline options shared by every stage's CLI: what the user passed, with embedded defaults."""

from __future__ import annotations

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from schemas.config import BeamOptions

# `--runner DaskRunner` is hopsmith's fixed subclass of Beam's (pipeline/dask_runner.py).
RUNNER_ALIASES = {"DaskRunner": "pipeline.dask_runner.DaskRunner"}


def pipeline_options(beam: BeamOptions | None = None, extra_args: list[str] | None = None) -> PipelineOptions:
    """PipelineOptions from a BeamOptions config plus raw `--flag value` arguments (the latter win).

    With no options this is the in-process DirectRunner; `direct_num_workers > 1` switches the
    DirectRunner to multi-processing so workers really run in parallel. `--runner DaskRunner` with
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
    standard.runner = RUNNER_ALIASES.get(standard.runner, standard.runner)
    direct = options.view_as(DirectOptions)
    if direct.direct_num_workers > 1 and direct.direct_running_mode == "in_memory":
        direct.direct_running_mode = "multi_processing"  # `--direct_num_workers 2` on the command line too
    return options

