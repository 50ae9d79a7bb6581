"""The LLM policy: each turn is one chat completion through the shared LLMClient.

Retries, 429 handling, the on-disk cache and the bound on requests in flight are the client's; episodes
of many questions run concurrently on one event loop and share that bound. The prompt is rebuilt each
turn by the framework with a bounded ContextWindow, so its size does not grow with the turn count.
A role with `few_shot` also shows the model a worked episode (data/policy/few_shot_episode.json) in its
framework's protocol, as earlier chat turns before the question: how small local models are commonly
prompted, since a model never tuned on a protocol copies shown turns far more reliably than it follows a
description.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from llm.client import LLMClient
from schemas.questions import Question
from schemas.trajectory import Turn
from synth.frameworks import ContextWindow, Framework, get_framework
from synth.frameworks.base import ModelOutput
from synth.policies.base import PolicyOutput


def prompt_chars(messages: list[dict]) -> int:
    """Characters of message text and tool-call arguments: the prompt's size without re-serialising it."""
    total = 0
    for message in messages:
        total += len(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            total += len(call["function"]["arguments"]) + len(call["function"]["name"])
    return total


FEW_SHOT_EPISODE = Path(__file__).resolve().parents[2] / "data" / "policy" / "few_shot_episode.json"


@cache
def few_shot_turns(framework_name: str) -> tuple[dict[str, Any], ...]:
    """The worked episode as the framework's chat turns (another question, solved in three calls)."""
    episode = json.loads(FEW_SHOT_EPISODE.read_text(encoding="utf-8"))
    return tuple(get_framework(framework_name).example_messages(episode["question"], episode["steps"]))


class LLMPolicy:
    name = "llm"

    def __init__(self, client: LLMClient, window: ContextWindow, few_shot: bool = False):
        self.client = client
        self.window = window
        self.few_shot = few_shot

    @property
    def engine(self) -> str:
        return self.client.engine

    @property
    def model(self) -> str | None:
        return self.client.role.model

    def start(self, question: Question, framework: Framework, seed: int, rollout: int) -> LLMAgent:
        return LLMAgent(self, question, framework, seed, rollout)

    def example_turns(self, framework: Framework) -> list[dict[str, Any]]:
        """The turns this role shows before the question: the worked episode when `few_shot` is set."""
        return list(few_shot_turns(framework.name)) if self.few_shot else []


@dataclass
class LLMAgent:
    policy: LLMPolicy
    question: Question
    framework: Framework
    seed: int
    rollout: int

    async def act(self, turns: list[Turn]) -> PolicyOutput:
        messages = self.framework.build_messages(self.question.text, self.question.as_of, turns, self.policy.window)
        messages[1:1] = self.policy.example_turns(self.framework)
        tools = self.framework.request_tools()
        result = await self.policy.client.chat(
            messages, tools=tools, seed=self.seed, cache_salt=f"{self.framework.name}/rollout={self.rollout}"
        )
        content = result.content
        if result.reasoning and "<think>" not in content:  # as the model wrote it, before the server split it
            content = f"<think>\n{result.reasoning}\n</think>\n\n{content}"
        return PolicyOutput(
            output=ModelOutput(content, result.tool_calls),
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            seconds=result.seconds,
            prompt_chars=prompt_chars(messages),
            model=result.model or None,
        )
