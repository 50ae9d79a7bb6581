"""No secret in any text hopsmith prints, logs or stores (`schemas.secrets`, `ground.log_scrubbing`), checked against a real LLM
endpoint on 127.0.0.1 whose error replies echo the request's credentials."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ground.log_scrubbing import ScrubLogs
from schemas.config import IndexConfig, LLMRole, TrajectoryConfig
from schemas.secrets import scrub
from schemas.wiki import SkippedRecord
from synth.environment import build_index
from synth.trajectories import run_trajectories
from tests.servers import LoopbackServer, QuietHandler
from tests.trajectory_fixtures import make_graph, make_questions

REPO = Path(__file__).resolve().parent.parent
# a variable whose name says nothing about secrets: only the role's `api_key_env` makes it one
KEY_ENV = "HOPSMITH_JUDGE_ACCESS"
KEY = "sk-judge-SENTINEL-7f3a9c2e41"


def test_scrub_masks_environment_secrets_and_header_shaped_values(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_AAAAsecretBBBBCCCCDDDD")
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "plain-secret-value-123")
    text = ("hub said hf_AAAAsecretBBBBCCCCDDDD; svc plain-secret-value-123; "
            "{'authorization': 'Bearer tok-unknown-to-us-42'}, x-api-key: other-unknown-99")
    scrubbed = scrub(text)
    for secret in ("hf_AAAAsecretBBBBCCCCDDDD", "plain-secret-value-123", "tok-unknown-to-us-42", "other-unknown-99"):
        assert secret not in scrubbed
    assert "Bearer ***" in scrubbed and scrubbed.startswith("hub said ***; svc ***; ")
    assert scrub("the api_key_env is OPENAI_API_KEY; 12 pages") == "the api_key_env is OPENAI_API_KEY; 12 pages"


def test_the_variable_a_role_names_holds_a_secret(monkeypatch):
    monkeypatch.setenv("ODDLY_NAMED_VAR", "value-of-the-odd-one-123")
    assert scrub("saw value-of-the-odd-one-123") == "saw value-of-the-odd-one-123"
    LLMRole(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="ODDLY_NAMED_VAR")
    assert scrub("saw value-of-the-odd-one-123") == "saw ***"


def test_a_secret_set_or_changed_after_a_scrub_is_masked_at_the_next(monkeypatch):
    # `secret_values` keeps its last reading only while the environment stays as it was
    assert scrub("saw late-secret-value-456") == "saw late-secret-value-456"
    monkeypatch.setenv("LATE_SERVICE_TOKEN", "late-secret-value-456")
    assert scrub("saw late-secret-value-456") == "saw ***"
    monkeypatch.setenv("LATE_SERVICE_TOKEN", "changed-secret-value-789")
    assert scrub("saw late-secret-value-456, changed-secret-value-789") == "saw late-secret-value-456, ***"


def test_a_log_record_and_its_traceback_are_scrubbed(monkeypatch, caplog):
    monkeypatch.setenv("HF_TOKEN", "hf_LOGsecretLOGsecretLOG")
    handler = logging.StreamHandler(stream := __import__("io").StringIO())
    handler.addFilter(ScrubLogs())
    logger = logging.getLogger("hopsmith.test.secrets")
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError("server echoed hf_LOGsecretLOGsecretLOG")
        except RuntimeError:
            logger.error("request failed with %s", "Authorization: Bearer hf_LOGsecretLOGsecretLOG", exc_info=True)
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "request failed" in written and "Traceback" in written and "RuntimeError" in written
    assert "hf_LOGsecretLOGsecretLOG" not in written


def test_a_stored_skip_detail_never_holds_a_secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stored-SENTINEL-000111")
    record = SkippedRecord(title="t", stage="judge", reason="llm_error",
                           detail="502: {'echo': 'sk-stored-SENTINEL-000111'}")
    assert "sk-stored-SENTINEL" not in record.detail


class EchoingEndpoint(LoopbackServer):
    """An OpenAI-compatible endpoint that quotes the request's Authorization header and the bare key: as the
    body of a 502 (a proxy that is down), or as the reply's text (a model that is not a judge)."""

    def __init__(self, mode: str):
        self.requests = 0
        self.mode = mode
        super().__init__(self._handler())
        self.base_url = f"{self.url}/v1"

    def _handler(self):
        endpoint = self

        class Handler(QuietHandler):

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                endpoint.requests += 1
                auth = self.headers.get("Authorization", "")
                echo = f"upstream failed for {auth} (key {auth.removeprefix('Bearer ')})"
                status, reply = 502, {"error": {"message": echo}}
                if endpoint.mode == "echoing_reply":
                    status, reply = 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                          "choices": [{"index": 0, "finish_reason": "stop",
                                                       "message": {"role": "assistant", "content": echo}}]}
                body = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(body)

        return Handler


@pytest.fixture(scope="module")
def trajectories(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("secrets")
    make_graph(root / "graph")
    build_index(root / "graph", root / "index", IndexConfig(chunk_chars=400))
    make_questions(root / "questions")
    run_trajectories(root / "questions", root / "index", root / "trajectories",
                     TrajectoryConfig(rollouts=1, questions_per_unit=4, seed=3), root / "cache")
    return root


@pytest.mark.parametrize("mode", ["server_error", "echoing_reply"])
def test_an_endpoint_echoing_the_key_leaves_it_in_no_file_and_no_output(trajectories, tmp_path, mode):
    run_dir = tmp_path / "run"
    config = tmp_path / "judge.toml"
    config.write_text(f'[judge]\nmodel = "m"\napi_key_env = "{KEY_ENV}"\nmax_retries = 1\nbackoff_s = 0.01\n')
    with EchoingEndpoint(mode) as endpoint:
        command = [sys.executable, "-m", "cli.main", "-v", "--debug", "judge",
                   "--trajectories", str(trajectories / "trajectories"), "--questions", str(trajectories / "questions"),
                   "--index", str(trajectories / "index"), "--out", str(run_dir / "judged"),
                   "--cache", str(run_dir / "cache"), "--config", str(config), "--judge-base-url", endpoint.base_url]
        env = {**os.environ, "PYTHONPATH": str(REPO), KEY_ENV: KEY}
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert endpoint.requests > 0
    output = done.stdout + done.stderr
    assert KEY not in output, output
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert written and all(KEY.encode() not in path.read_bytes() for path in written)
    if mode == "server_error":  # the stage is unfinished (a rerun retries it) and says so in one line
        assert done.returncode == 2 and "hopsmith: error: judge:" in output, output
    else:  # the unusable replies are kept as samples in the stage's LLM report, masked
        assert done.returncode == 0, output
        report = (run_dir / "judged" / "llm_report.json").read_text()
        assert "upstream failed for Bearer ***" in report
