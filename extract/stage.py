"""Stage 1's life cycle: `run_extract` keys the run by its config and inputs, skips a finished identical
run, runs the Beam pipeline (`extract.transforms`), or its steps as plain calls where Beam would run them
in this process with one worker (`extract.in_process`), and writes the manifest once the counts reconcile
(`pages_in == kept + skipped`)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections import Counter
from pathlib import Path

from extract.as_of import timestamp_ceiling
from extract.in_process import extract_in_process
from extract.sources import check_readable
from extract.tables import IMPLAUSIBLE_COUNT, STAGE, TABLES, outcome_counts
from extract.units import STATS_FILE
from ground.errors import StageIncomplete, UserError
from ground.io import WorkUnits, read_column, shard_files, write_records
from ground.stage import begin_stage
from ground.storage import as_path, is_url, remove_tree
from schemas.config import BeamOptions, ExtractConfig
from schemas.manifest import Manifest

log = logging.getLogger(__name__)

def run_extract(
    config: ExtractConfig, out_dir: str | Path, beam: BeamOptions | None = None, beam_args=()
) -> Manifest:
    """Run stage 1 over the configured source into `out_dir`; a finished identical run is skipped."""
    options, in_process = None, config.dump is not None
    if config.dump is None or beam_args or (beam is not None and beam != BeamOptions()) or _remote(config, out_dir):
        from runtime.beam import pipeline_options, runs_in_this_process, use_filesystem_options

        options = pipeline_options(beam, list(beam_args))
        use_filesystem_options(options)  # s3:// or gs:// dump and output folder
        in_process = in_process and runs_in_this_process(options)
    # else Beam's defaults: its in-process runner with one worker, whose steps run as plain calls without
    # importing Beam (`extract.in_process`; the import alone is about 1.3 CPU-s of start-up)
    out_dir = as_path(out_dir)
    # beside: the previous graph stays in place until the new one is complete (`ground.stage`)
    run = begin_stage(STAGE, out_dir, _stage_config(config), input_files=_input_files(config), beside=True)
    if run.done:
        log.info("extract: %s is up to date", out_dir)
        return run.finished
    work_dir = run.work_dir
    for table in TABLES:
        for stale in shard_files(work_dir / table):
            stale.unlink()
    ceiling = timestamp_ceiling(config)
    if in_process:
        extract_in_process(config, work_dir, ceiling)
    else:
        import apache_beam

        from extract.transforms import ExtractGraph, ExtractUnits

        with apache_beam.Pipeline(options=options) as pipeline:
            _ = (pipeline | "ExtractUnits" >> ExtractUnits(config, work_dir, ceiling)
                 | "ExtractGraph" >> ExtractGraph(config, work_dir, ceiling))
    return _finish(run, config, work_dir)


def _remote(config: ExtractConfig, out_dir) -> bool:
    """Whether a path is on object storage, read through Beam's FileSystems with the run's options."""
    return any(is_url(path) for path in (config.dump, config.index, out_dir) if path is not None)


def _stage_config(config: ExtractConfig) -> dict:
    """The config the stage is keyed by. A dump is pinned by its checksum; a live wiki is not, so an API run
    is keyed by the UTC day it fetches on: rerun the same day, it is skipped; the next day, it fetches anew."""
    keyed = config.model_dump(mode="json")
    if config.api_url is not None:
        keyed["api_fetch_day"] = dt.datetime.now(dt.UTC).date().isoformat()
    return keyed


def _input_files(config: ExtractConfig) -> list[str]:
    """The dump and index files the manifest checksums (an API run has none); missing ones are UserErrors."""
    if (config.dump is None) == (config.api_url is None):
        raise UserError("choose one source: --dump PATH or --api URL")
    files = [(config.dump, "dump"), (config.index, "index")]
    return [check_readable(path, what) for path, what in files if path is not None]


def no_page_message(config: ExtractConfig, counts: dict[str, int], out_dir: Path) -> str:
    """Why an input gave no page to build on: nothing readable, or every page skipped (top reasons)."""
    source = config.dump or config.api_url
    if not counts["pages_in"]:
        return (f"extract: no readable page in {source}: is it a MediaWiki XML export (.xml or .xml.bz2)? "
                "Nothing to build a dataset from")
    reasons = sorted(((n, k.removeprefix("skipped:")) for k, n in counts.items() if k.startswith("skipped:")),
                     reverse=True)
    listed = ", ".join(f"{reason} {n:,}" for n, reason in reasons[:4])
    return (f"extract: {counts['pages_in']:,} pages read from {source}, none kept ({listed}); the skipped "
            f"records are in {out_dir / 'skipped'}. Nothing to build a dataset from")


def _finish(run, config: ExtractConfig, out_dir: Path) -> Manifest:
    stats_path = out_dir / STATS_FILE
    stats = json.loads(stats_path.read_text())
    outputs: dict[str, list[str]] = {}
    for table, model in TABLES.items():
        if not shard_files(out_dir / table):
            write_records(model, [], out_dir / table / "part-00000-of-00001.parquet")
        outputs[table] = [str(p.relative_to(out_dir)) for p in shard_files(out_dir / table)]
    entities = Counter(read_column(out_dir / "entities", "is_head"))
    reasons = read_column(out_dir / "skipped", "reason")
    sources = read_column(out_dir / "relations", "source")
    counts = outcome_counts(stats["pages_in"], entities.total(), reasons, sources, entities[True], stats["excluded"])
    if counts["pages_in"] != counts["kept"] + counts["skipped"]:
        raise RuntimeError(f"extract counts do not reconcile: {counts}")
    if unavailable := counts.get("skipped:api_unavailable", 0):  # transient: not finished work
        raise StageIncomplete(f"extract: {unavailable} of {counts['pages_in']} titles could not be fetched (the API "
                              "kept failing until its retries ran out); rerun the same command to fetch again")
    if counts["kept"] == 0:
        raise UserError(no_page_message(config, counts, out_dir))
    if stats["implausible"]:
        counts[IMPLAUSIBLE_COUNT] = stats["implausible"]
    as_of = dt.datetime.fromisoformat(stats["as_of"]) if stats["as_of"] else None
    units = {"units": stats["units"], "extracted": stats["units_extracted"],
             "reused": stats["units"] - stats["units_extracted"]}
    manifest = run.finish(counts, outputs, as_of=as_of, work_units=units, as_of_reason=stats["as_of_reason"],
                          window_days=config.window_days)
    (run.out_dir / STATS_FILE).unlink()  # moved into place with the output
    remove_tree(WorkUnits(run.out_dir, ()).folder)  # only an unfinished run needs the parts
    return manifest
