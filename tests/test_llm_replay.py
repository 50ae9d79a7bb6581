"""Every LLM role against the replies a real small model gave (Gemma 3 270M under llama.cpp, recorded by
`make llm-check` in tests/data/llm_transcript.jsonl), replayed by a server on 127.0.0.1 started here.

The real failure shapes stay in CI: prose where JSON was asked for, echoes of the prompt, rambles instead
of tool calls. The tests check what a user relies on: unusable replies are repaired or counted (never
re-sent as is), nonsense questions are rejected, every record is accounted for, an outage in the middle
of a stage leaves units unfinished (no error trajectory published) and a rerun finishes them, and Ctrl-C
ends a run within seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import synth.questions as questions_module
from critic.judge import run_judge
from graph.walk_stage import run_walks
from ground.io import read_records
from llm.client import StageIncomplete
from pipeline.renders import render_nanbeige
from schemas.config import JudgeConfig, LLMRole, QuestionConfig, TrajectoryConfig, WalkConfig
from schemas.critic import JudgedTrajectory
from schemas.questions import Question
from schemas.trajectory import Trajectory
from schemas.wiki import SkippedRecord
from synth.trajectories import run_trajectories
from tests.llm_replay import POLICY_EPISODES, Replay, load, replay_policy_episodes, role_of
from tests.processes import restore_sigint
from tests.servers import OpenAIServer
from tests.test_questions import MERKEL, MERKEL_FACTS
from tests.trajectory_fixtures import QUESTIONS, make_snapshot
from tests.walk_graphs import write_graph

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ["react", "function_calling", "tagged"]


def role(server: OpenAIServer, **overrides) -> LLMRole:
    return LLMRole(**{"base_url": server.base_url, "model": "gemma-3-270m", "timeout_s": 10.0, "max_retries": 1,
                      "backoff_s": 0.01, "max_concurrency": 2, "api_key_env": "HOPSMITH_TEST_KEY", **overrides})


@pytest.fixture(scope="module")
def transcript():
    entries = load()
    assert {"writer", "judge", "policy:react", "policy:tagged", "policy:function_calling"} <= {e["role"] for e in entries}
    return entries


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """The stage 3 snapshot (questions, index), plus a small graph with walked paths for the writer."""
    root = make_snapshot(tmp_path_factory.mktemp("replay"))
    write_graph(root / "merkel", MERKEL, MERKEL_FACTS)
    run_walks(root / "merkel", root / "paths", WalkConfig(hops=[2], walks_per_start=30, hub_quantile=1.0))
    return root


def test_the_transcript_holds_real_failure_shapes(transcript):
    """What the recorded model did: the replays below exercise these shapes."""
    writer = [e for e in transcript if e["role"] == "writer" and e["status"] == 200]
    assert writer and all(e["model"] for e in writer)
    policy = [e for e in transcript if e["role"].startswith("policy:")]
    assert policy and any(not e.get("tool_calls") for e in policy)  # a base model rarely calls a tool


def test_replayed_writer_replies_are_repaired_or_counted_and_nonsense_is_rejected(transcript, snapshot, tmp_path):
    replay = Replay(transcript)
    with OpenAIServer(replay) as server:
        # the crafted graph describes its starts by places alone (no anchor beyond the slice): named, they reach the writer
        config = QuestionConfig(writer=role(server), shortcut=role(server), shortcut_attempts=1, describe_start=0.0)
        manifest = questions_module.run_questions(snapshot / "merkel", snapshot / "paths", tmp_path / "q", config,
                                                  tmp_path / "cache")
        writer_bodies = [json.dumps(b, sort_keys=True) for b in server.requests if role_of(b) == "writer"]
    counts = manifest.counts
    kept = list(read_records(Question, tmp_path / "q" / "questions"))
    skipped = list(read_records(SkippedRecord, tmp_path / "q" / "skipped"))
    assert len(kept) + len(skipped) == counts["paths:read"] > 0  # every path accounted for
    invalid = counts.get("llm:question-writer:invalid_responses", 0)
    assert invalid == counts.get("llm:question-writer:repairs", 0) + counts.get("llm:question-writer:gave_up_invalid", 0)
    assert len(writer_bodies) == len(set(writer_bodies))  # no request was ever sent twice as is
    assert counts["llm:question-writer:requests"] == len(writer_bodies)
    report = json.loads((tmp_path / "q" / "llm_report.json").read_text())
    assert len(report["invalid"].get("question-writer", [])) == min(invalid, 5)
    assert report["models"]["question-writer"]  # the model the server reported
    for question in kept:  # what survives says what its plan gave: the start entity and no answer
        assert question.path.start.split(" (")[0] in question.text and question.answer not in question.text
        assert question.model == transcript[0]["model"] or question.model
    assert sum(v for k, v in counts.items() if k.startswith("rejected:")) == len(skipped)


def _trajectory_config(server: OpenAIServer, **role_overrides) -> TrajectoryConfig:
    return TrajectoryConfig(frameworks=FRAMEWORKS, rollouts=1, max_turns=4, questions_per_unit=1, seed=3,
                            policies={f: role(server, **role_overrides) for f in FRAMEWORKS})


def test_an_outage_mid_run_is_retried_on_rerun_and_no_error_trajectory_is_published(transcript, snapshot, tmp_path):
    replay = Replay(transcript)

    def outage_after(n: int):
        def handler(body):
            if len(server.requests) > n:
                replay.down = True
            return replay(body)
        return handler

    with OpenAIServer(lambda body: handler(body)) as server:
        handler = outage_after(6)
        config = _trajectory_config(server)
        with pytest.raises(StageIncomplete, match="work units unfinished after transient LLM failures"):
            run_trajectories(snapshot / "questions", snapshot / "index", tmp_path / "t", config, tmp_path / "cache")
        assert not (tmp_path / "t" / "manifest.json").exists() and replay.requests_while_down > 0
        sent_before = len(server.requests)
        replay.down, handler = False, replay
        manifest = run_trajectories(snapshot / "questions", snapshot / "index", tmp_path / "t", config,
                                    tmp_path / "cache")
        resent = [b for b in server.requests[sent_before:]]
    trajectories = list(read_records(Trajectory, tmp_path / "t" / "trajectories"))
    counts = manifest.counts
    assert len(trajectories) == counts["questions_used"] * len(FRAMEWORKS) == counts["trajectories"]
    assert "stop:error" not in counts and all(t.error is None for t in trajectories)
    assert resent and counts["llm:policy-gemma-3-270m:server_errors"] > 0  # the outage is reported
    assert all(t.model == transcript[0]["model"] for t in trajectories if t.turns)  # as the server reports it
    for t in trajectories:  # no ramble or echo of our prompt was taken as a final answer
        if t.final_answer is not None:
            assert t.final_answer.strip() and len(t.final_answer.split()) <= 40

    judge_replay = Replay(transcript)
    with OpenAIServer(judge_replay) as server:
        judge = JudgeConfig(judge=role(server, max_repairs=1, model="local-judge"), batch_size=4)
        judged_manifest = run_judge(tmp_path / "t", snapshot / "questions", snapshot / "index", tmp_path / "j", judge,
                                    tmp_path / "cache")
    judged = list(read_records(JudgedTrajectory, tmp_path / "j" / "judged"))
    jc = judged_manifest.counts
    assert len(judged) == jc["trajectories_in"] == len(trajectories)  # an unusable reply skips no trajectory
    turns = sum(len(j.judgements) for j in judged)
    fallbacks = sum(j.engine == "offline" for record in judged for j in record.judgements)
    assert jc.get("llm:judge:fallbacks", 0) == fallbacks <= turns
    assert jc.get("llm:judge:invalid_responses", 0) == jc.get("llm:judge:repairs", 0) + fallbacks
    for record in judged:  # rows name the configured engines and the models the server reported
        produced = render_nanbeige(record).produced_by
        assert (produced.policy_engine, produced.policy_model) == ("openai:gemma-3-270m", record.trajectory.model)
        if any(j.engine != "offline" for j in record.judgements):
            assert (produced.judge_engine, produced.judge_model) == ("offline+openai:local-judge", transcript[0]["model"])
        else:
            assert (produced.judge_engine, produced.judge_model) == ("offline", None)


def test_ctrl_c_ends_a_run_within_seconds(transcript, snapshot, tmp_path):
    replay = Replay(transcript, delay_s=60.0)  # a server busy with a long generation
    with OpenAIServer(replay) as server:
        command = [sys.executable, "-m", "cli.main", "trajectories", "--questions", str(snapshot / "questions"),
                   "--index", str(snapshot / "index"), "--out", str(tmp_path / "t"), "--cache", str(tmp_path / "c"),
                   "--llm-base-url", server.base_url, "--llm-model", "gemma-3-270m"]
        process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=restore_sigint)
        deadline = time.monotonic() + 120
        while not server.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert server.requests, "the run reached the model"
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
        waited = time.monotonic() - interrupted
    # in-flight requests are cancelled at once: the run ends within seconds, unfinished (the one-line
    # message and exit status 130 for an interrupt inside Beam are the CLI's; see tests/test_cli.py)
    assert process.returncode != 0 and waited < 15, (waited, stderr[-2000:])
    assert not (tmp_path / "t" / "manifest.json").exists() and len(server.requests) <= 2


def test_the_recorded_policy_episodes_replay_into_trajectories_of_every_framework(transcript, tmp_path):
    """What the critic's natural labelled set builds on: the real model's runs, without the model."""
    trajectories, replay = replay_policy_episodes(tmp_path, transcript)
    expected = {(q.question_id, f, r) for q in QUESTIONS for f in FRAMEWORKS for r in range(POLICY_EPISODES["rollouts"])}
    assert {(t.question_id, t.framework, t.rollout) for t in trajectories} == expected
    assert all(t.stop_reason != "error" and t.model == transcript[0]["model"] for t in trajectories)
    # every reply is the one the model gave in that episode (at that step), not another episode's
    assert replay.matched["role"] == 0 and replay.matched["request"] + replay.matched["episode step"] > 0, (
        dict(replay.matched), "the episodes are not in the transcript: record it again, `make llm-check RECORD=1`")
