"""Record a real model's replies behind a proxy, and replay them from a local server, per LLM role.

`Recorder(upstream)` is an `OpenAIServer` handler that forwards each request to a real OpenAI-compatible
server (llama.cpp in `make llm-check`) and keeps what came back: status, content, tool calls, the model
the server reported, and the role that asked (told apart by our own system prompts). `Replay(transcript)`
serves those replies again, each role's in the recorded order (cycling), so tests in `make test` meet
the failure shapes of a real small model (prose instead of JSON, echoes of the prompt, rambles, invalid
tool calls) without the model. A test can script an outage (`Replay.down`) or slow replies on top.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.servers import Reply

TRANSCRIPT = Path(__file__).resolve().parent / "data" / "llm_transcript.jsonl"
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


class Recorder:
    """Forward to `upstream` (an OpenAI-compatible /v1 URL) and record every exchange."""

    def __init__(self, upstream: str, timeout_s: float = 600.0, log: Path | None = None):
        self.upstream, self.timeout_s, self.log = upstream.rstrip("/"), timeout_s, log
        self.entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        request = urllib.request.Request(f"{self.upstream}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                status, data = response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            status, data = error.code, {"error": error.read().decode(errors="replace")[:500]}
        entry: dict[str, Any] = {"role": role_of(body), "status": status,
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
    """Serve recorded replies per role, in order, cycling; `down` makes every request a 503 (an outage)."""

    def __init__(self, entries: list[dict[str, Any]], delay_s: float = 0.0):
        self.by_role: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entry in entries:
            if entry["status"] == 200:
                self.by_role[entry["role"]].append(entry)
        self.delay_s = delay_s
        self.down = False
        self.served: dict[str, int] = defaultdict(int)
        self.requests_while_down = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        role = role_of(body)
        with self._lock:
            if self.down:
                self.requests_while_down += 1
                return Reply(status=503, error="upstream unavailable")
            recorded = self.by_role.get(role)
            if not recorded:
                return Reply(status=500, error=f"no recorded reply for role {role}")
            entry = recorded[self.served[role] % len(recorded)]
            self.served[role] += 1
        reply = reply_of(entry)
        reply.delay_s = self.delay_s
        return reply
