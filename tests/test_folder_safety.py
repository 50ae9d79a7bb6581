"""hopsmith never deletes what it did not write, and two runs never write one output folder at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.main import main
from ground.errors import UserError
from ground.folder_lock import LOCK
from ground.stage import PENDING, begin_stage
from pipeline.dataset import SAMPLE_DUMP, SAMPLE_INDEX
from tests.processes import restore_sigint

REPO = Path(__file__).resolve().parent.parent


def _user_folder(folder: Path) -> dict[Path, bytes]:
    """A folder of someone's files (nested, hidden, a symlink), returned as path -> content."""
    files = {folder / "thesis.tex": b"\\section{mine}", folder / "photos" / "cat.jpg": b"\xff\xd8jpeg",
             folder / ".config": b"editor=vim", folder / "manifest.json.bak": b"{}"}
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (folder / "link").symlink_to(folder / "thesis.tex")
    return files


def _survived(files: dict[Path, bytes]) -> bool:
    return all(path.is_file() and path.read_bytes() == data for path, data in files.items())


def test_extract_refuses_a_folder_of_user_files(tmp_path, capsys):
    files = _user_folder(tmp_path / "mine")
    status = main(["extract", "--dump", str(SAMPLE_DUMP), "--index", str(SAMPLE_INDEX), "--out", str(tmp_path / "mine")])
    assert status == 2
    assert "was not written by hopsmith" in capsys.readouterr().err
    assert _survived(files) and sorted(p.name for p in (tmp_path / "mine").iterdir()) == sorted(
        [".config", "link", "manifest.json.bak", "photos", "thesis.tex"])


def test_dataset_refuses_a_same_named_subfolder_of_user_files(tmp_path, capsys):
    out = tmp_path / "out"
    files = _user_folder(out / "graph")
    assert main(["dataset", "--out", str(out)]) == 2
    assert "graph already exists and was not written by hopsmith" in capsys.readouterr().err
    assert _survived(files)


def test_a_restart_removes_only_what_the_stage_wrote(tmp_path):
    out = tmp_path / "stage"
    first = begin_stage("demo", out, {"n": 1})
    (out / "data").mkdir()
    (out / "data" / "part-0.parquet").write_bytes(b"old")
    (out / "scratch.json").write_text("{}")
    first.finish({"rows": 1}, {"data": ["data/part-0.parquet"]})
    (out / "my-notes.txt").write_text("keep me")  # the user adds a file to a finished stage folder

    second = begin_stage("demo", out, {"n": 2})  # another key: start afresh
    assert not (out / "data").exists() and not (out / "scratch.json").exists()
    assert (out / "my-notes.txt").read_text() == "keep me"
    assert (out / PENDING).read_text().splitlines() == [second.key, "my-notes.txt"]
    (out / "data").mkdir()  # the second run is interrupted after writing something

    begin_stage("demo", out, {"n": 3})  # an unfinished folder, yet another key
    assert not (out / "data").exists() and (out / "my-notes.txt").read_text() == "keep me"


def test_a_stage_never_takes_over_another_stages_folder(tmp_path):
    out = tmp_path / "stage"
    begin_stage("extract", out, {}).finish({}, {})
    with pytest.raises(UserError, match="holds the output of stage 'extract'"):
        begin_stage("walk", out, {})
    assert (out / "manifest.json").is_file()


def test_a_file_given_as_output_folder_is_refused(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("data")
    with pytest.raises(UserError, match="is a file"):
        begin_stage("demo", target, {})
    assert target.read_text() == "data"


def _hopsmith(*args: str, cwd: Path, log: Path | None = None) -> subprocess.Popen:
    """`hopsmith` in a child process; its output piped, or written to `log` for a run that goes on while the
    test waits (a pipe nobody reads fills up and stops the run mid-write on a loaded machine)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    output = open(log, "w") if log is not None else subprocess.PIPE
    return subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=cwd, env=env, text=True,
                            stdout=output, stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
                            preexec_fn=restore_sigint)


def _wait_for(path: Path, process: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_a_second_concurrent_run_on_one_out_stops_with_a_clear_message(tmp_path):
    out = tmp_path / "out"
    log = tmp_path / "first.log"
    first = _hopsmith("dataset", "--out", str(out), cwd=tmp_path, log=log)
    try:
        _wait_for(out / "graph" / PENDING, first, log)  # the first run is inside its first stage
        second = _hopsmith("dataset", "--out", str(out), cwd=tmp_path)
        _, err = second.communicate(timeout=300)
        assert second.returncode == 2, err
        assert "out is in use by another hopsmith run; wait until it ends" in err
        assert first.poll() is None  # the first run goes on undisturbed
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=300)


def test_a_stage_folder_locked_by_another_process_is_not_touched(tmp_path):
    """The stage-level lock: `hopsmith extract` into a folder another process is writing stops at once."""
    out = tmp_path / "graph"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from ground.folder_lock import lock_folder; "
         "lock_folder(sys.argv[1]); print('locked', flush=True); time.sleep(600)", str(out)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        extract = _hopsmith("extract", "--dump", str(SAMPLE_DUMP), "--index", str(SAMPLE_INDEX), "--out", str(out),
                            cwd=tmp_path)
        _, err = extract.communicate(timeout=300)
        assert extract.returncode == 2 and "in use by another hopsmith run" in err, err
        assert sorted(p.name for p in out.iterdir()) == [LOCK]
    finally:
        holder.kill()
        holder.wait()
