"""`hopsmith dataset` end to end on the shipped sample: every config, resumption after a kill, determinism.

One uninterrupted run (a module fixture) is the reference: the small config (tests/data/dataset_small.toml)
with offline engines, except the judge, an LLM judge served by a real OpenAI-compatible HTTP server on
127.0.0.1. A second run in another folder, starting from copies of the reference's finished stages up to
the trajectories, is killed in the middle of the LLM judge stage and rerun: it must produce byte-identical
shards without sending again the requests whose answers it already had. Runs are subprocesses of the CLI.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import datasets
import pytest

from ground.io import read_records
from pipeline import renders
from pipeline.card import parse_card_header
from pipeline.dataset import STAGE_FOLDERS
from pipeline.layout import CONFIGS, features
from pipeline.validate import validate_dataset
from schemas.critic import JudgedTrajectory
from tests.servers import OpenAIServer, Reply

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests/data/dataset_small.toml"
SENTINEL = "hf_SENTINEL_e2e_token_5f3a9c"


JUDGE_CONCURRENCY = 2
ASSESSMENT = {"sensible_next_step": 0.9, "sensible_rationale": "a sensible step", "logical_soundness": 0.8,
              "soundness_rationale": "supported by the observations"}


@pytest.fixture(scope="module")
def judge_server():
    with OpenAIServer(lambda body: Reply(content=json.dumps(ASSESSMENT), delay_s=0.02)) as server:
        yield server


@pytest.fixture(scope="module")
def config_file(judge_server, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "run.toml"
    path.write_text(CONFIG.read_text() + f"""
[judge]
batch_size = 8

[judge.judge]
base_url = "{judge_server.base_url}"
model = "judge-test"
api_key_env = "HOPSMITH_TEST_JUDGE_KEY"
max_concurrency = {JUDGE_CONCURRENCY}
""")
    return path


def _command(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "cli.main", "dataset", "--config", str(config), "--out", str(out)]


def _env() -> dict[str, str]:
    return {**os.environ, "HF_TOKEN": SENTINEL, "HOPSMITH_TEST_JUDGE_KEY": "sk-local"}


def _run(config: Path, out: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(_command(config, out), capture_output=True, text=True, cwd=ROOT, env=_env(),
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _published(out: Path) -> dict[str, str]:
    """sha256 of every published file of a run (the manifest records wall-clock times, so it is left out)."""
    root = out / "dataset"
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("manifest.json",)
    }


@pytest.fixture(scope="module")
def reference(config_file, judge_server, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("reference") / "out"
    result = _run(config_file, out)
    assert judge_server.requests, "the judge stage used the LLM judge"
    return out, result


def test_every_config_is_produced_and_loads_with_declared_features(reference, tmp_path):
    out, result = reference
    root = out / "dataset"
    card = (root / "README.md").read_text()
    header = parse_card_header(card)
    assert [c["config_name"] for c in header["configs"]] == list(CONFIGS)
    # The card claims the world-identifying gate only with its limit (one fact at a time, a reviewed list).
    assert "`identifying_clue`" in card and "combination of facts" in card
    for entry in header["configs"]:
        data_files = {f["split"]: str(root / f["path"]) for f in entry["data_files"]}
        loaded = datasets.load_dataset("parquet", data_files=data_files, cache_dir=str(tmp_path / "hf"))
        assert "train" in loaded
        for dataset in loaded.values():
            assert len(dataset) > 0 and dataset.features == features(entry["config_name"])
    report = validate_dataset(root)
    assert report.errors == [] and report.rows["trajectories"] > 0
    assert "hopsmith run summary" in result.stderr
    for stage in STAGE_FOLDERS:
        assert stage in result.stderr
    assert "skipped:" in result.stderr  # skip reasons per stage come from the manifests


def test_renders_of_real_trajectories_round_trip(reference):
    out, _ = reference
    judged = list(read_records(JudgedTrajectory, out / "dataset/data/trajectories"))
    kinds = set()
    for record in judged:
        views = renders.turn_views(record.trajectory)
        kinds.update(v.kind for v in views)
        for render, parse in (
            (renders.toolmind_conversation, renders.parse_toolmind),
            (renders.nanbeige_messages, renders.parse_nanbeige),
            (renders.openai_messages, renders.parse_openai),
        ):
            assert parse([m.model_dump() for m in render(record)]).turns == views
    assert {"call", "final"} <= kinds


def test_no_token_anywhere(reference):
    out, result = reference
    assert SENTINEL not in result.stdout + result.stderr
    leaks = [p for p in out.rglob("*") if p.is_file() and SENTINEL.encode() in p.read_bytes()]
    assert leaks == []


def test_rerun_reuses_every_stage(reference, config_file, judge_server):
    out, _ = reference
    before = (out / "dataset/manifest.json").read_text()
    requests = len(judge_server.requests)
    result = _run(config_file, out)
    assert result.stderr.count("finished by an earlier run") == len(STAGE_FOLDERS)
    assert (out / "dataset/manifest.json").read_text() == before
    assert len(judge_server.requests) == requests


def _mid_judge(out: Path) -> bool:
    """True once the LLM judge stage has finished a work unit (and has more to do)."""
    return any((out / "judged/parts/judged").glob("*.parquet"))


def _bodies(requests: list[dict]) -> list[str]:
    return [json.dumps(body, sort_keys=True) for body in requests]


def test_killed_run_resumes_to_identical_shards(reference, config_file, judge_server, tmp_path):
    reference_out, _ = reference
    reference_requests = _bodies(judge_server.requests)
    out = tmp_path / "out"
    for stage in ("extract", "walk", "questions", "index", "trajectories"):  # reuse finished stages: quick
        shutil.copytree(reference_out / STAGE_FOLDERS[stage], out / STAGE_FOLDERS[stage])
    first = len(judge_server.requests)
    process = subprocess.Popen(_command(config_file, out), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not _mid_judge(out) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, "the run finished before it could be interrupted"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert not (out / "judged/manifest.json").is_file()
    _run(config_file, out)
    assert _published(out) == _published(reference_out)
    assert validate_dataset(out / "dataset").errors == []
    # the same requests as the uninterrupted run; only those in flight at the kill may be sent again
    resumed = Counter(_bodies(judge_server.requests[first:]))
    assert set(resumed) == set(reference_requests)
    assert sum((resumed - Counter(reference_requests)).values()) <= JUDGE_CONCURRENCY
