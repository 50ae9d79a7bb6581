"""No silent empty success: an input with no readable page is an error, an empty dataset never validates or
publishes, and a run below its yield floors says so (`ground.yields`)."""

from __future__ import annotations

import os

from cli.main import main
from ground.stage import begin_stage
from pipeline.dataset import build_dataset, stage_dirs
from pipeline.run_summary import print_summary
from schemas.config import DatasetConfig
from tests.dataset_fixtures import sample_records, write_upstream


def test_random_bytes_as_dump_is_an_error_not_an_empty_dataset(tmp_path, capfd):
    dump = tmp_path / "random.xml.bz2"
    dump.write_bytes(os.urandom(200_000))
    out = tmp_path / "out"
    assert main(["dataset", "--dump", str(dump), "--out", str(out)]) == 2
    err = capfd.readouterr().err
    assert f"hopsmith: error: extract: no readable page in {dump}" in err
    assert not (out / "graph" / "manifest.json").exists() and not (out / "dataset").exists()


def _dataset(out, test_fraction: float, count: int):
    questions, judged = sample_records(count) if count else ([], [])
    dirs = write_upstream(out, questions, judged)
    build_dataset(DatasetConfig(out=str(out), test_fraction=test_fraction, max_rows_per_shard=7), dirs)
    return dirs["dataset"]


def test_an_empty_dataset_never_validates_nor_publishes(tmp_path, capfd):
    dataset = _dataset(tmp_path / "out", 0.25, 0)
    for flags in ([], ["--allow-low-yield"]):
        assert main(["validate", str(dataset), *flags]) == 1
        assert "invalid: the dataset is empty" in capfd.readouterr().out
        assert main(["publish", str(dataset), "--repo-id", "org/name", "--dry-run", *flags]) == 2
        assert "the dataset is empty" in capfd.readouterr().err


def test_an_empty_train_split_fails_validate_unless_accepted(tmp_path, capfd):
    dataset = _dataset(tmp_path / "out", 0.99, 4)  # each of these question ids hashes into `test`
    assert main(["validate", str(dataset)]) == 1
    out = capfd.readouterr().out
    assert "invalid: low yield: the train split of `questions` is empty (accept it with --allow-low-yield)" in out
    assert main(["publish", str(dataset), "--repo-id", "org/name", "--dry-run"]) == 2
    capfd.readouterr()
    assert main(["validate", str(dataset), "--allow-low-yield"]) == 0
    assert "accepted: low yield: the train split of `questions` is empty" in capfd.readouterr().out
    assert main(["publish", str(dataset), "--repo-id", "org/name", "--dry-run", "--allow-low-yield"]) == 0


def test_a_healthy_dataset_has_no_yield_complaint(tmp_path, capfd):
    dataset = _dataset(tmp_path / "out", 0.25, 12)
    assert main(["validate", str(dataset)]) == 0
    assert "low yield" not in capfd.readouterr().out


def test_the_run_summary_names_each_missed_floor_in_plain_words(tmp_path, capfd):
    dirs = stage_dirs(tmp_path / "out")
    begin_stage("walk", dirs["walk"], {}).finish({"paths:kept": 0, "walks:attempted": 40}, {})
    begin_stage("questions", dirs["questions"], {}).finish({"questions:kept": 3}, {})
    print_summary(dirs)
    err = capfd.readouterr().err
    assert "low yield: walk: the walk found no relational path (paths:kept = 0, floor 1)" in err
    assert "questions:" not in err.split("low yield:", 1)[1]  # 3 questions clear the floor
    assert "`hopsmith validate` refuses it unless given --allow-low-yield" in err
