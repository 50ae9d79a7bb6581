"""Record a real model's replies behind a proxy, and replay them from a local server, per LLM role.

`Recorder(upstream)` is an `OpenAIServer` handler that forwards each request to a real OpenAI-compatible
server (llama.cpp in `make llm-check`) and keeps what came back: status, content, tool calls, the model
the server reported, and the role that asked (told apart by our own system prompts). `Replay(transcript)`
serves those replies again, so tests in `make test` meet the failure shapes of a real small model (prose
instead of JSON, echoes of the prompt, rambles, invalid tool calls) without the model: the reply recorded
for the identical request when there is one, else the one recorded at the same step of the same episode
(role, seed and question: a prompt changed since the recording), else the role's replies in recorded
order (cycling). A test can script an outage (`Replay.down`) or slow replies on top.

`replay_policy_episodes(folder)` replays the policy episodes `make llm-check` recorded on the stage-3 test
snapshot (tests/trajectory_fixtures.py) into trajectories: real-model runs of every framework, without the
model (see tests/data/README_llm_transcript.md).
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

from schemas.config import LLMRole, TrajectoryConfig
from schemas.trajectory import Trajectory
from tests.servers import OpenAIServer, Reply

TRANSCRIPT = Path(__file__).resolve().parent / "data" / "llm_transcript.jsonl"
MODEL = "gemma-3-270m"
# Every role on the local server, sized for a CPU that serves one request at a time. llama-cpp-python
# refuses `json_schema`, and its `json_object` grammar checks every one of Gemma's 262k tokens at each step
# (minutes per reply on 2 cores), so JSON is read from the plain reply (and repaired), as for any server
# without structured output.
LOCAL_ROLE = {"model": MODEL, "api_key_env": "HOPSMITH_LLM_CHECK_KEY", "timeout_s": 300.0, "max_concurrency": 1,
              "structured_output": "none", "max_tokens": 80, "max_repairs": 1}
FRAMEWORKS = ("react", "function_calling", "tagged")
# The text protocols' policies are shown the worked episode (`few_shot`): a base 270M model given only the
# format's description echoed it or invented observations and never wrote a call that parsed. Native
# function calling cannot be shown as text, and this server returns no native calls for a base model.
FEW_SHOT_FRAMEWORKS = ("react", "tagged")
# The recorded policy episodes: every question of the stage-3 test snapshot, in every framework.
POLICY_EPISODES = {"rollouts": 3, "max_turns": 6, "seed": 11, "questions_per_unit": 1}
# Our own system prompts, by the words they start with, and the role each belongs to.
ROLE_PROMPTS = (
    ("You write one multi-hop search question", "writer"),
    ("Answer the question from memory", "shortcut"),
    ("You are a strict critic", "judge"),
    ("You are a deep-search assistant", "policy:tagged"),
)


def role_of(body: dict[str, Any]) -> str:
    """Which LLM role sent a request, from its system prompt (and tools, for native function calling)."""
    messages = body.get("messages") or [{}]
    system = str(messages[0].get("content") or "") if messages[0].get("role") == "system" else ""
    for prefix, role in ROLE_PROMPTS:
        if system.startswith(prefix):
            return role
    if system.startswith("You are a research agent"):
        return "policy:function_calling" if body.get("tools") else "policy:react"
    return "other"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def request_key(body: dict[str, Any]) -> str:
    """The identity of a request: its whole body."""
    return _digest(body)


def episode_key(body: dict[str, Any]) -> str:
    """The episode a request belongs to: a policy's by its role and seed (one per question, framework and
    rollout, so a prompt reworded since the recording still finds its episode); another role's task by
    its role, seed and first user message."""
    role = role_of(body)
    if role.startswith("policy:") and body.get("seed") is not None:
        return _digest([role, body["seed"]])
    first_user = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "user"), None)
    return _digest([role, body.get("seed"), first_user])


class Recorder:
    """Forward to `upstream` (an OpenAI-compatible /v1 URL) and record every exchange."""

    def __init__(self, upstream: str, timeout_s: float = 600.0, log: Path | None = None):
        self.upstream, self.timeout_s, self.log = upstream.rstrip("/"), timeout_s, log
        self.entries: list[dict[str, Any]] = []
        self._steps: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        episode = episode_key(body)
        with self._lock:  # an episode's requests are sequential: its step is the order they arrive in
            step = self._steps[episode]
            self._steps[episode] += 1
        request = urllib.request.Request(f"{self.upstream}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                status, data = response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            status, data = error.code, {"error": error.read().decode(errors="replace")[:500]}
        entry: dict[str, Any] = {"role": role_of(body), "status": status, "request": request_key(body),
                                 "episode": episode, "step": step,
                                 "format": (body.get("response_format") or {}).get("type"),
                                 "repair": len(body.get("messages", [])) > 2 and body["messages"][-2]["role"] == "assistant"}
        if status == 200:
            message = data["choices"][0]["message"]
            calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                     for c in message.get("tool_calls") or []]
            usage = data.get("usage") or {}
            entry.update(content=message.get("content"), tool_calls=calls, model=data.get("model"),
                         prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0))
        else:
            entry["error"] = str(data.get("error"))[:500]
        with self._lock:
            self.entries.append(entry)
            if self.log is not None:  # as it happens, so a long run can be watched (and survives a crash)
                with self.log.open("a") as handle:
                    handle.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")
        return reply_of(entry)

    def save(self, path: Path) -> None:
        path.write_text("".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in self.entries))


def reply_of(entry: dict[str, Any]) -> Reply:
    if entry["status"] != 200:
        return Reply(status=entry["status"], error=entry.get("error"))
    return Reply(content=entry.get("content"), tool_calls=entry.get("tool_calls") or None, model=entry.get("model"),
                 prompt_tokens=entry.get("prompt_tokens", 0), completion_tokens=entry.get("completion_tokens", 0))


def load(path: Path = TRANSCRIPT) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Replay:
    """Serve recorded replies: the identical request's, else the same episode step's, else the role's in
    order, cycling (`matched` counts which); `down` makes every request a 503 (an outage)."""

    def __init__(self, entries: list[dict[str, Any]], delay_s: float = 0.0):
        self.by_role: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.by_request: dict[str, dict[str, Any]] = {}
        self.by_step: dict[tuple[str, int], dict[str, Any]] = {}
        for entry in entries:
            if entry["status"] == 200:
                self.by_role[entry["role"]].append(entry)
                if "request" in entry:
                    self.by_request.setdefault(entry["request"], entry)
                    self.by_step.setdefault((entry["episode"], entry["step"]), entry)
        self.delay_s = delay_s
        self.down = False
        self.served: dict[str, int] = defaultdict(int)
        self.matched: dict[str, int] = defaultdict(int)  # "request", "episode step" or "role" -> replies
        self.requests_while_down = 0
        self._steps: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        role, episode = role_of(body), episode_key(body)
        with self._lock:
            if self.down:
                self.requests_while_down += 1
                return Reply(status=503, error="upstream unavailable")
            step = self._steps[episode]
            self._steps[episode] += 1
            entry, matched = self.by_request.get(request_key(body)), "request"
            if entry is None:
                entry, matched = self.by_step.get((episode, step)), "episode step"
            if entry is None:
                recorded = self.by_role.get(role)
                if not recorded:
                    return Reply(status=500, error=f"no recorded reply for role {role}")
                entry, matched = recorded[self.served[role] % len(recorded)], "role"
            self.served[role] += 1
            self.matched[matched] += 1
        reply = reply_of(entry)
        reply.delay_s = self.delay_s
        return reply


def local_role(base_url: str, **extra: Any) -> dict[str, Any]:
    """An LLM role's settings on the local model server (`make llm-check`), as TOML or LLMRole values."""
    return {"base_url": base_url, **LOCAL_ROLE, **extra}


def policy_role(base_url: str, framework: str) -> LLMRole:
    """A framework's policy on the local model server, as `make llm-check` configures it."""
    return LLMRole(**local_role(base_url, few_shot=framework in FEW_SHOT_FRAMEWORKS))


def policy_episode_config(base_url: str) -> TrajectoryConfig:
    """The stage-3 run whose episodes `make llm-check` records: the same config replays them."""
    return TrajectoryConfig(frameworks=list(FRAMEWORKS), policies={f: policy_role(base_url, f) for f in FRAMEWORKS},
                            **POLICY_EPISODES)


def replay_policy_episodes(folder: Path, entries: list[dict[str, Any]] | None = None) -> tuple[list[Trajectory], Replay]:
    """The recorded real-model policy episodes, replayed into trajectories under `folder`: the stage-3 test
    snapshot is rebuilt there and stage 3 runs on it against a replay of the transcript. Returns the
    trajectories (every framework and rollout of every question) and the replay (`matched` says how many
    replies matched their recorded request exactly, i.e. the prompts have not changed since recording)."""
    from ground.io import read_records
    from synth.trajectories import run_trajectories
    from tests.trajectory_fixtures import make_snapshot

    snapshot = make_snapshot(Path(folder) / "snapshot")
    replay = Replay(load() if entries is None else entries)
    with OpenAIServer(replay) as server:
        run_trajectories(snapshot / "questions", snapshot / "index", Path(folder) / "trajectories",
                         policy_episode_config(server.base_url), Path(folder) / "cache")
    return list(read_records(Trajectory, Path(folder) / "trajectories" / "trajectories")), replay
