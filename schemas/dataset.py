"""Stage 5 rows: what the published shards hold besides the canonical records."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.base import Record


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
