"""Stage 3 records: the canonical multi-turn trajectory every agent framework is normalised into."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from schemas.base import Record

Framework = Literal["react", "function_calling", "tagged"]
StopReason = Literal["answered", "max_turns", "parse_failures", "error"]


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    call_id: str
    name: str
    arguments: dict[str, Any]


class Turn(BaseModel):
    """One assistant turn: what the model said, the call it made, and what the environment answered.

    `raw_output` is the model's text verbatim in its framework's protocol; `tool_call` is the parsed call
    (None when the output could not be parsed, then `parse_error` says why). The final `answer` call sets
    `final_answer`. `injected_error` names the error kind an offline policy injected on purpose.
    """

    model_config = ConfigDict(extra="forbid")
    index: int
    reasoning: str = ""
    raw_output: str = ""
    tool_call: ToolCall | None = None
    observation: str | None = None
    tool_error: bool = False
    parse_error: str | None = None
    final_answer: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    injected_error: str | None = None
    prompt_chars: int = 0


class Outcome(BaseModel):
    model_config = ConfigDict(extra="forbid")
    exact_match: bool
    f1: float
    correct: bool
    judge: str = "exact_match"


class Trajectory(Record):
    trajectory_id: str
    question_id: str
    question: str
    answer: str
    aliases: list[str] = []
    as_of: dt.date
    framework: Framework
    policy: str
    model: str | None = None
    engine: str
    seed: int
    rollout: int = 0
    system_prompt: str = ""
    turns: list[Turn]
    final_answer: str | None = None
    stop_reason: StopReason
    outcome: Outcome
    environment: str = ""
    error: str | None = None
