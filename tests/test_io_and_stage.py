"""Shard IO, work units and the stage life cycle (skip when finished, resume when not)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.scale import AS_OF, synthetic_pages
from extract.oracle import extract_records
from ground.folder_lock import unlock_folder
from ground.io import (
    MERGE_FAN_IN,
    RUN_BATCH_ROWS,
    WorkUnits,
    atomic_write_text,
    read_manifest,
    read_records,
    read_table,
    stable_hash,
    verify_outputs,
    write_records,
    write_run,
)
from ground.stage import PENDING, begin_stage
from schemas.base import to_table
from schemas.config import ExtractConfig
from schemas.wiki import Relation, SkippedRecord


def _skips(n, prefix="p"):
    return [SkippedRecord(title=f"{prefix}{i}", stage="read", reason="r") for i in range(n)]


def test_write_then_read_records(tmp_path):
    write_records(SkippedRecord, _skips(3), tmp_path / "t" / "a.parquet")
    write_records(SkippedRecord, _skips(2, "q"), tmp_path / "t" / "b.parquet")
    titles = [r.title for r in read_records(SkippedRecord, tmp_path / "t")]
    assert titles == ["p0", "p1", "p2", "q0", "q1"]
    assert read_table(SkippedRecord, tmp_path / "missing").num_rows == 0


def test_atomic_write_leaves_no_temp_files(tmp_path):
    atomic_write_text(tmp_path / "x.json", json.dumps({"a": 1}))
    assert os.listdir(tmp_path) == ["x.json"]


def test_stable_hash_is_order_insensitive_for_dict_keys():
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 2})


def test_work_units_resume(tmp_path):
    units = WorkUnits(tmp_path, ["skipped", "other"])
    assert not units.is_done("u1")
    units.write("u1", {"skipped": (SkippedRecord, _skips(1)), "other": (SkippedRecord, [])})
    assert units.is_done("u1") and not units.is_done("u2")
    # a unit with only some of its tables is not done
    write_records(SkippedRecord, _skips(1), units.part_path("skipped", "u2"))
    assert not units.is_done("u2")


def test_stage_skips_when_finished_and_restarts_on_new_config(tmp_path):
    out = tmp_path / "stage"
    run = begin_stage("demo", out, {"n": 1})
    assert not run.done and (out / PENDING).is_file()
    write_records(SkippedRecord, _skips(1), out / "parts" / "a.parquet")
    run.finish({"kept": 1}, {"parts": ["parts/a.parquet"]})
    assert not (out / PENDING).exists()

    again = begin_stage("demo", out, {"n": 1})
    assert again.done and again.finished.counts == {"kept": 1}

    changed = begin_stage("demo", out, {"n": 2})
    assert not changed.done and not (out / "parts").exists()


def test_interrupted_stage_keeps_its_work_units(tmp_path):
    out = tmp_path / "stage"
    begin_stage("demo", out, {"n": 1})
    WorkUnits(out, ["skipped"]).write("u1", {"skipped": (SkippedRecord, _skips(1))})
    resumed = begin_stage("demo", out, {"n": 1})
    assert not resumed.done and WorkUnits(out, ["skipped"]).is_done("u1")


def test_a_stage_rebuilt_beside_keeps_its_previous_output_until_it_finishes(tmp_path):
    """`beside`: the new output grows in `.next/` (its work units resumed after a kill) while the previous
    one stays readable and verified; `finish` moves it into place and removes what it no longer has."""
    out = tmp_path / "stage"
    first = begin_stage("demo", out, {"n": 1}, beside=True)
    assert first.work_dir == out  # nothing to keep: built in place
    write_records(SkippedRecord, _skips(2), out / "table" / "part-0.parquet")
    write_records(SkippedRecord, _skips(1), out / "old" / "part-0.parquet")
    previous = first.finish({"kept": 3}, {"table": ["table/part-0.parquet"], "old": ["old/part-0.parquet"]})

    second = begin_stage("demo", out, {"n": 2}, beside=True)
    assert second.work_dir == out / ".next"
    WorkUnits(second.work_dir, ["skipped"]).write("u1", {"skipped": (SkippedRecord, _skips(1))})
    unlock_folder(out)  # killed: the previous output is untouched
    assert read_manifest(out) == previous and verify_outputs(out, previous) == []
    assert read_table(SkippedRecord, out / "table").num_rows == 2

    resumed = begin_stage("demo", out, {"n": 2}, beside=True)
    assert WorkUnits(resumed.work_dir, ["skipped"]).is_done("u1")
    write_records(SkippedRecord, _skips(4, "new"), resumed.work_dir / "table" / "part-0.parquet")
    manifest = resumed.finish({"kept": 4}, {"table": ["table/part-0.parquet"]})
    assert read_manifest(out) == manifest and verify_outputs(out, manifest) == []
    assert [r.title for r in read_records(SkippedRecord, out / "table")] == ["new0", "new1", "new2", "new3"]
    assert not (out / ".next").exists() and not (out / "old").exists() and not (out / PENDING).exists()

    third = begin_stage("demo", out, {"n": 3}, beside=True)  # killed while moving `.next/` into place:
    write_records(SkippedRecord, _skips(1, "third"), third.work_dir / "table" / "part-0.parquet")
    (out / "manifest.json").unlink()
    unlock_folder(out)
    again = begin_stage("demo", out, {"n": 3}, beside=True)  # no finished output left: rebuilt in place
    assert again.work_dir == out and not (out / ".next").exists() and not again.done


def test_readers_of_a_finished_stage_read_only_what_its_manifest_lists(tmp_path):
    """The manifest is the commit: a shard beside the listed ones (a copy, a stray) is never read, in the
    stage folder or in a subfolder of it; a folder no finished stage covers is read whole."""
    out = tmp_path / "stage"
    run = begin_stage("demo", out, {"n": 1})
    write_records(SkippedRecord, _skips(2), out / "table" / "part-0.parquet")
    assert len(list(read_records(SkippedRecord, out / "table"))) == 2  # unfinished: no manifest yet
    run.finish({"kept": 2}, {"table": ["table/part-0.parquet"]})
    write_records(SkippedRecord, _skips(5, "stray"), out / "table" / "part-1.parquet")
    assert [r.title for r in read_records(SkippedRecord, out / "table")] == ["p0", "p1"]
    assert read_table(SkippedRecord, out / "table").num_rows == 2
    write_records(SkippedRecord, _skips(1), tmp_path / "loose" / "a.parquet")
    assert read_table(SkippedRecord, tmp_path / "loose").num_rows == 1


def test_a_resumed_stage_removes_what_a_killed_write_left(tmp_path):
    """Temporary files (`*.tmp`) of a killed run go on resume, anywhere in the stage's own entries; finished
    work units stay."""
    out = tmp_path / "stage"
    begin_stage("demo", out, {"n": 1})
    units = WorkUnits(out, ["skipped"])
    units.write("u1", {"skipped": (SkippedRecord, _skips(1))})
    leftovers = [out / "parts" / "skipped" / ".u2.parquet.a1b2.tmp", out / ".manifest.json.c3d4.tmp"]
    for path in leftovers:
        path.write_bytes(b"cut short")
    resumed = begin_stage("demo", out, {"n": 1})
    assert not resumed.done and units.is_done("u1")
    assert not any(path.exists() for path in leftovers)


def test_stage_key_follows_input_content(tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("one")
    first = begin_stage("demo", tmp_path / "o", {}, input_files=[data])
    first.finish({}, {})
    data.write_text("two")
    assert not begin_stage("demo", tmp_path / "o", {}, input_files=[data]).done


def test_work_units_are_planned_deterministically():
    from ground.io import plan_work_units

    units = plan_work_units(["c", "a", "e", "b", "d"], key=str, size=2)
    assert [u.items for u in units] == [("a", "b"), ("c", "d"), ("e",)]
    again = plan_work_units(["e", "d", "c", "b", "a"], key=str, size=2)
    assert [u.unit_id for u in units] == [u.unit_id for u in again]
    assert len({u.unit_id for u in units}) == 3


def test_the_default_runner_runs_in_process_and_never_fetches_prism(monkeypatch, tmp_path):
    """Beam's DirectRunner tries to download its Prism binary first; hopsmith's default never does."""
    import apache_beam
    from apache_beam.runners.portability import prism_runner

    from runtime.beam import pipeline_options

    started = []

    def no_prism(*args, **kwargs):
        started.append(args)
        raise RuntimeError("would download and start the Prism binary")  # DirectRunner falls back on errors

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", no_prism)
    for case, args in enumerate(([], ["--runner", "DirectRunner"], ["--direct_num_workers", "2"])):
        target = tmp_path / f"out{case}"
        with apache_beam.Pipeline(options=pipeline_options(None, args)) as pipeline:
            _ = (pipeline | apache_beam.Create(["a", "b"]) | apache_beam.Map(str.upper)
                 | apache_beam.io.WriteToText(str(target)))
        assert sorted("".join(p.read_text() for p in tmp_path.glob(f"out{case}*")).split()) == ["A", "B"]
    assert started == []


def test_beam_reads_each_functions_signature_once_with_the_same_answer():
    """runtime.beam keeps Beam's answer for each function's parameters: the same as Beam's own, for a
    method and a plain function, read once however often Beam asks; a callable object is asked each time."""
    import functools

    import apache_beam
    from apache_beam.transforms import core

    import runtime.beam  # noqa: F401 - installs the remembered signatures

    original = core.get_function_args_defaults.beam_original
    asked = []

    class Stateless(apache_beam.DoFn):
        def process(self, element, side=apache_beam.DoFn.SideInputParam, limit=3):
            yield element

    def plain(a, b=2):
        return a

    remembered = runtime.beam._remembered_signatures(lambda f: asked.append(f) or original(f))
    partial = functools.partial(plain, 1)
    for f in (Stateless().process, Stateless().process, plain, plain, partial, partial):
        assert remembered(f) == original(f)
    assert asked == [asked[0], plain, partial, partial] and asked[0].__func__ is Stateless.process


def test_pipeline_options_views_are_built_once_and_share_the_options_values():
    """Beam asks for a view of the options at every transform: each class's view is built once per options
    object, and a value set through one view is what every view and the options read."""
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

    from runtime.beam import _remembered_views, pipeline_options

    built = []
    original = PipelineOptions.view_as.beam_original
    remembered = _remembered_views(lambda options, cls: built.append(cls) or original(options, cls))
    options, other = pipeline_options(), pipeline_options()
    views = [remembered(options, StandardOptions), remembered(options, StandardOptions),
             remembered(options, DirectOptions), remembered(other, StandardOptions)]
    assert views[0] is views[1] and views[3] is not views[0]
    assert built == [StandardOptions, DirectOptions, StandardOptions]
    views[0].streaming = True
    assert options.view_as(StandardOptions).streaming and options.get_all_options()["streaming"]
    assert not other.view_as(StandardOptions).streaming
    options._all_options = dict(options._all_options)  # replaced options values: a new view reads them
    assert remembered(options, StandardOptions) is not views[0] and len(built) == 4


def test_a_merge_holds_a_batch_of_each_run_not_a_footer_that_grows_with_the_run(tmp_path):
    """Extract's last merge level opens up to MERGE_FAN_IN of the longest runs at once. Its runs are Arrow
    streams: opening one holds one batch, however long it is. The parquet intermediate runs they replaced
    (row groups of 256) held their whole footer: ~7 MiB a reader at 100,000 relation rows."""
    relations = extract_records(synthetic_pages(60, seed=3), ExtractConfig(as_of=AS_OF)).relations
    table = to_table(Relation, relations)
    table = pa.concat_tables([table] * (100_000 // table.num_rows + 1))
    run, parquet = tmp_path / "run.arrows", tmp_path / "run.parquet"
    assert write_run(table.schema, [table], run, RUN_BATCH_ROWS) == table.num_rows
    pq.write_table(table, parquet, row_group_size=256, compression="zstd")
    growth = {path.suffix: _rss_growth_opening(path, MERGE_FAN_IN) for path in (run, parquet)}
    assert growth[".arrows"] < 24 * 2**20, growth  # one decoded batch (~15 KB) and a codec each
    assert growth[".parquet"] > 8 * growth[".arrows"], growth  # what this guards against


def _rss_growth_opening(path, readers: int) -> int:
    """Bytes of resident memory a fresh process gains by opening `readers` readers of `path` at once (as
    the merge does) and reading each one's first batch."""
    code = f"""
from ground.io import parquet_file, run_batches

def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024

def read(path):
    if path.endswith(".arrows"):
        return run_batches(path)
    return parquet_file(path).iter_batches(batch_size={RUN_BATCH_ROWS})

next(read({str(path)!r}))  # libraries and codecs loaded
before = rss()
readers = [read({str(path)!r}) for _ in range({readers})]
firsts = [next(reader) for reader in readers]
print(rss() - before)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    return int(done.stdout.split()[-1])
