"""Finished stage outputs are verified against their manifests, never trusted.

A copy of the shared small run (`small_dataset_run`) is damaged (a truncated file, a flipped byte, a file
swapped for another valid one) in every stage folder; the rerun names each damaged file with its stage,
rebuilds those stages and no other, and ends with every file byte-identical to the undisturbed run. A failed
rebuild of any stage leaves its previous output in place and loadable, and the next run finishes it
byte-identical; a stage run on its own stops with one line before reading a damaged upstream folder.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from cli.main import main
from ground import stage as stage_module
from ground.errors import DamagedOutput
from ground.io import (
    file_digest,
    parquet_file,
    read_manifest,
    read_records,
    shard_files,
    verify_outputs,
    write_manifest,
)
from pipeline import dataset as dataset_module
from pipeline.dataset import STAGE_FOLDERS, load_config, run_dataset
from pipeline.validate import validate_dataset
from schemas.dataset import RLPrompt
from schemas.questions import Path as Path_
from tests.conftest import SMALL_CONFIG

KINDS = ("truncated", "flipped", "swapped")
FOLDERS = tuple(STAGE_FOLDERS.values())


def _copy(reference: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(reference, out, ignore=shutil.ignore_patterns(".hopsmith.lock"))
    return out


def _listed(folder: Path) -> list[str]:
    """The folder's manifest files, parquet shards first."""
    files = read_manifest(folder).files
    return sorted(files, key=lambda name: (not name.endswith(".parquet"), name))


def _swap_source(out: Path, target: Path) -> Path:
    """Another valid file of the run like `target`: the same name elsewhere (the other index, another split)
    or the same kind of file (a work unit's part, another shard), with other bytes."""
    data = target.read_bytes()
    candidates = sorted(p for p in out.rglob(f"*{target.suffix}") if p != target and p.read_bytes() != data)
    return min(candidates, key=lambda p: (p.name != target.name, p.parent.name != target.parent.name, str(p)))


def _damage(out: Path, folder: str, name: str, kind: str) -> Path:
    target = out / folder / name
    data = target.read_bytes()
    if kind == "truncated":
        target.write_bytes(data[: len(data) // 2])
    elif kind == "flipped":
        middle = len(data) // 2
        target.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1:])
    else:
        target.write_bytes(_swap_source(out, target).read_bytes())
    return target


def _rerun(out: Path, caplog) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ground.stage"):
        run_dataset(load_config(str(SMALL_CONFIG), {"out": str(out)}))
    return [record.getMessage() for record in caplog.records if record.name == "ground.stage"]


def _assert_identical(out: Path, reference: Path) -> None:
    for folder in FOLDERS:
        expected = read_manifest(reference / folder).files
        assert read_manifest(out / folder).files == expected, folder
        for name, digest in expected.items():
            assert file_digest(out / folder / name) == digest, f"{folder}/{name}"
    assert not (out / "dataset" / ".next").exists()


def _finished_at(out: Path) -> dict[str, object]:
    return {folder: read_manifest(out / folder).finished_at for folder in FOLDERS}


def test_every_kind_of_damage_in_every_stage_folder_is_named_and_rebuilt(small_dataset_run, tmp_path, caplog):
    """Three reruns cover every (folder, kind): the folders with three files or more take all three kinds at
    once, those with fewer (trajectories, difficulty, judged) one kind per rerun."""
    out = _copy(small_dataset_run, tmp_path)
    plan = [{folder: list(zip(KINDS, _listed(out / folder)[:3], strict=True)) for folder in FOLDERS
             if len(_listed(out / folder)) >= 3}]
    few = [folder for folder in FOLDERS if len(_listed(out / folder)) < 3]
    assert set(few) <= {"trajectories", "difficulty", "judged"} and set(plan[0]) | set(few) == set(FOLDERS)
    for kind in KINDS:
        if kind == KINDS[0]:
            plan[0].update({folder: [(kind, _listed(out / folder)[0])] for folder in few})
        else:
            plan.append({folder: [(kind, _listed(out / folder)[0])] for folder in few})
    covered = {(folder, kind) for damages in plan for folder, pairs in damages.items() for kind, _ in pairs}
    assert covered == {(folder, kind) for folder in FOLDERS for kind in KINDS}

    for damages in plan:
        before = _finished_at(out)
        damaged = {folder: [_damage(out, folder, name, kind) for kind, name in pairs]
                   for folder, pairs in damages.items()}
        lines = _rerun(out, caplog)
        for folder, paths in damaged.items():
            stage = next(s for s, f in STAGE_FOLDERS.items() if f == folder)
            for path in paths:
                assert any(f"stage {stage!r}: {path} " in line for line in lines), (path, lines)
        rebuilt = {folder for folder, at in _finished_at(out).items() if at != before[folder]}
        assert rebuilt == set(damaged)  # downstream stages keyed by the same upstream keys are kept
        _assert_identical(out, small_dataset_run)


def test_a_failed_dataset_rebuild_keeps_the_previous_dataset_loadable(small_dataset_run, tmp_path, monkeypatch,
                                                                    caplog):
    out = _copy(small_dataset_run, tmp_path)
    previous = read_manifest(out / "dataset")
    renamed = load_config(str(SMALL_CONFIG), {"out": str(out), "name": "renamed-run"})

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(dataset_module, "write_plots", fail)  # after every shard of the new build is written
    with pytest.raises(OSError, match="disk full"):
        run_dataset(renamed)
    root = out / "dataset"
    assert read_manifest(root) == previous and verify_outputs(root, previous) == []
    report = validate_dataset(root)
    assert not report.errors and report.shards > 0

    monkeypatch.undo()
    run_dataset(renamed)
    rebuilt = read_manifest(root)
    assert rebuilt.key != previous.key and "renamed-run" in (root / "README.md").read_text()
    assert not (root / ".next").exists() and verify_outputs(root, rebuilt) == []
    assert not validate_dataset(root).errors


def test_a_stage_run_alone_stops_before_reading_a_damaged_upstream_folder(small_dataset_run, tmp_path, capsys):
    out = _copy(small_dataset_run, tmp_path)
    target = _damage(out, "graph", _listed(out / "graph")[0], "flipped")
    status = main(["walk", "--graph", str(out / "graph"), "--out", str(tmp_path / "paths")])
    error = capsys.readouterr().err.strip()
    assert status == 2 and len(error.splitlines()) == 1, error
    assert f"stage 'extract': {target} does not match its manifest's checksum" in error
    assert "rerun it" in error


def test_a_reader_checks_each_shard_size_against_the_manifest(small_dataset_run, tmp_path):
    out = _copy(small_dataset_run, tmp_path)
    name = next(n for n in _listed(out / "dataset") if n.startswith("data/rl/"))
    target = _damage(out, "dataset", name, "truncated")
    with pytest.raises(DamagedOutput, match=f"stage 'dataset': {target} has"):
        shard_files(out / "dataset" / "data" / "rl")
    with pytest.raises(DamagedOutput, match=f"stage 'dataset': {target} has"):
        list(read_records(RLPrompt, target))


def test_a_failed_walk_rebuild_keeps_the_previous_paths(small_dataset_run, tmp_path, monkeypatch):
    """The walk stage too builds beside its previous output: the paths the later stages were built from stay."""
    from graph import walk_stage

    out = _copy(small_dataset_run, tmp_path)
    previous = read_manifest(out / "paths")
    config = load_config(str(SMALL_CONFIG), {"out": str(out), "walk.max_paths": 23}).walk

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(walk_stage, "_run_pipeline", fail)
    with pytest.raises(OSError, match="disk full"):
        walk_stage.run_walks(out / "graph", out / "paths", config)
    assert read_manifest(out / "paths") == previous and verify_outputs(out / "paths", previous) == []
    assert len(list(read_records(Path_, out / "paths" / "paths"))) == previous.counts["paths:kept"]


@pytest.mark.parametrize("stage", ["extract", "index", "questions", "trajectories", "judge"])
def test_a_failed_stage_rebuild_keeps_its_previous_output_and_the_next_run_finishes_it(
        stage, small_dataset_run, tmp_path, monkeypatch):
    """Every stage builds beside its previous output (`ground.stage`, `.next/`): a rebuild that fails once all
    its new files are written (the manifest's checksums) leaves the previous files listed, whole and readable;
    the next run resumes the rebuild and ends byte-identical to the undisturbed run."""
    out = _copy(small_dataset_run, tmp_path)
    folder = out / STAGE_FOLDERS[stage]
    original = read_manifest(folder)
    previous = original.model_copy(update={"key": "an-earlier-config"})  # a rebuild is due, as after a change
    write_manifest(folder, previous)
    config = load_config(str(SMALL_CONFIG), {"out": str(out)})

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(stage_module, "digest_outputs", fail)
    with pytest.raises(OSError, match="disk full"):
        run_dataset(config)
    assert (folder / ".next").is_dir()  # the new build, beside
    assert read_manifest(folder) == previous and verify_outputs(folder, previous) == []
    for table, names in previous.outputs.items():  # read whole, as many rows as the undisturbed run's
        rows = [parquet_file(folder / name).read().num_rows for name in names if name.endswith(".parquet")]
        expected = [parquet_file(small_dataset_run / STAGE_FOLDERS[stage] / name).metadata.num_rows
                    for name in names if name.endswith(".parquet")]
        assert rows == expected, table

    monkeypatch.undo()
    run_dataset(config)
    assert not (folder / ".next").exists() and read_manifest(folder).key == original.key
    _assert_identical(out, small_dataset_run)
