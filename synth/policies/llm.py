"""The LLM policy: each turn is one chat completion through the shared LLMClient.

Retries, 429 handling, the on-disk cache and the bound on requests in flight are the client's; episodes
of many questions run concurrently on one event loop and share that bound. The prompt is rebuilt each
turn by the framework with a bounded ContextWindow, so its size does not grow with the turn count.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.llm import LLMClient
from schemas.questions import Question
from schemas.trajectory import Turn
from synth.frameworks import ContextWindow, Framework
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


class LLMPolicy:
    name = "llm"

    def __init__(self, client: LLMClient, window: ContextWindow):
        self.client = client
        self.window = window

    @property
    def engine(self) -> str:
        return self.client.engine

    @property
    def model(self) -> str | None:
        return self.client.role.model

    def start(self, question: Question, framework: Framework, seed: int, rollout: int) -> LLMAgent:
        return LLMAgent(self, question, framework, seed, rollout)


@dataclass
class LLMAgent:
    policy: LLMPolicy
    question: Question
    framework: Framework
    seed: int
    rollout: int

    async def act(self, turns: list[Turn]) -> PolicyOutput:
        messages = self.framework.build_messages(self.question.text, self.question.as_of, turns, self.policy.window)
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
