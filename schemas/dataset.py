"""Stage 5 rows: what the published shards hold besides the canonical records."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.base import Record
from schemas.critic import JudgedTrajectory
from schemas.questions import Question

# the difficulty columns a `questions` row and an `rl` row share
PASS_RATE_FIELDS = ("pass_rate", "pass_rate_policy", "pass_rate_rollouts")


class QuestionRow(Question):
    """One row of the `questions` config: the question, and its pass rate under the eval policy the difficulty
    stage ran (`pass_rate_policy`, `policy:framework[:model]`), over `pass_rate_rollouts` rollouts; all three
    are None when the run measured no difficulty."""

    pass_rate: float | None = None
    pass_rate_policy: str | None = None
    pass_rate_rollouts: int | None = None


class PromptMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    content: str


class RLPrompt(Record):
    """One row of the `rl` config: what an RL trainer needs to roll out a question in the environment."""

    prompt_id: str
    question_id: str
    data_source: str = "hopsmith"
    prompt: list[PromptMessage]
    answer: str
    aliases: list[str] = []
    as_of: dt.date
    hops: int
    environment: str
    tools: list[dict[str, Any]] = []
    writer_engine: str | None = None  # which engine wrote the question, and the model its server reported
    writer_model: str | None = None
    # the question's pass rate as the `questions` config records it (None when the run measured no difficulty)
    pass_rate: float | None = None
    pass_rate_policy: str | None = None
    pass_rate_rollouts: int | None = None


class ConversationMessage(BaseModel):
    """A message of a text-only render (toolmind, nanbeige, turns): `loss` is 1 only on trained turns."""

    model_config = ConfigDict(extra="forbid")
    role: str
    content: str
    loss: int


class ProducedBy(BaseModel):
    """Which engines made a row, with the model each one's server reported (None for an offline engine):
    the policy that acted, and the judge that labelled its turns (an LLM judge when it labelled any;
    turns it could not judge fell back to the offline critic)."""

    model_config = ConfigDict(extra="forbid")
    policy_engine: str
    policy_model: str | None
    judge_engine: str | None
    judge_model: str | None


class ToolMindRow(BaseModel):
    """One row of the `toolmind` config, column for column as ToolMind-Web-QA `open-wiki-traj.jsonl`."""

    model_config = ConfigDict(extra="forbid")
    key: str
    id: str
    conversations: list[ConversationMessage]


class NanbeigeRow(Record):
    """One row of the `nanbeige` config: a trajectory in the Nanbeige4.1 (Qwen3 ChatML) tool template.

    `turn_rewards[k]` is the critic's reward for the k-th assistant message (= trajectory turn k).
    """

    trajectory_id: str
    question_id: str
    framework: str
    messages: list[ConversationMessage]
    turn_rewards: list[float]
    outcome_reward: float
    correct: bool
    produced_by: ProducedBy


class OpenAIFunction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: str


class OpenAIToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    type: str = "function"
    function: OpenAIFunction


class OpenAIMessage(BaseModel):
    """An OpenAI chat message; `reasoning_content` holds the turn's thinking, `loss` the critic's mask."""

    model_config = ConfigDict(extra="forbid")
    role: str
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[OpenAIToolCall] | None = None
    tool_call_id: str | None = None
    loss: int = 0


class OpenAIRow(Record):
    """One row of the `openai` config: messages with `tool_calls` and the `tools` they may call."""

    trajectory_id: str
    question_id: str
    framework: str
    messages: list[OpenAIMessage]
    tools: list[dict[str, Any]]
    outcome_reward: float
    correct: bool
    produced_by: ProducedBy


class TurnRow(Record):
    """One row of the `turns` config: the conversation prefix ending at one kept assistant turn.

    Only the last message carries `loss` 1, so each row trains exactly one critic-approved turn.
    """

    key: str
    trajectory_id: str
    question_id: str
    framework: str
    turn_index: int
    conversations: list[ConversationMessage]
    reward: float
    produced_by: ProducedBy


# The published configs and the record type of each one's rows (`pipeline.layout` writes them).
CONFIGS: dict[str, type[BaseModel]] = {
    "questions": QuestionRow,
    "trajectories": JudgedTrajectory,
    "toolmind": ToolMindRow,
    "nanbeige": NanbeigeRow,
    "openai": OpenAIRow,
    "turns": TurnRow,
    "rl": RLPrompt,
}
