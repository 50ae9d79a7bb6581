"""Beam pipeline options shared by every stage's CLI: what the user passed, with embedded defaults."""

from __future__ import annotations

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from schemas.config import BeamOptions


def pipeline_options(beam: BeamOptions | None = None, extra_args: list[str] | None = None) -> PipelineOptions:
    """PipelineOptions from a BeamOptions config plus raw `--flag value` arguments (the latter win).

    With no options this is the in-process DirectRunner; `direct_num_workers > 1` switches the
    DirectRunner to multi-processing so workers really run in parallel.
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
    direct = options.view_as(DirectOptions)
    if direct.direct_num_workers > 1 and direct.direct_running_mode == "in_memory":
        direct.direct_running_mode = "multi_processing"  # `--direct_num_workers 2` on the command line too
    return options
