"""Run configuration: one pydantic model per stage, composed into the `hopsmith dataset` config file.

Every LLM-backed role has an offline engine: a role with no `base_url` runs offline. API keys are never
part of a config; a role names the environment variable that holds its key.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LLMRole(_Config):
    """An OpenAI-compatible endpoint for one role (question writer, a policy, the judge)."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.7
    max_tokens: int = 2048
    max_concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_s: float = 1.0
    extra_body: dict = Field(default_factory=dict)

    @property
    def offline(self) -> bool:
        return self.base_url is None


class BeamOptions(_Config):
    """Apache Beam pipeline options passed through to the runner."""

    runner: str = "DirectRunner"
    direct_num_workers: int = 1
    direct_running_mode: Literal["in_memory", "multi_threading", "multi_processing"] = "in_memory"
    extra_args: list[str] = []


class ExtractConfig(_Config):
    dump: str | None = None
    index: str | None = None
    api_url: str | None = None
    api_titles: list[str] = []
    api_recent_days: int | None = None
    as_of: AwareDatetime | None = None
    window_days: int = 182
    max_page_bytes: int = 1_000_000
    page_timeout_s: float = 5.0


class WalkConfig(_Config):
    hops: list[int] = [2, 3, 4]
    walks_per_start: int = 8
    max_paths: int | None = None
    hub_quantile: float = 0.98
    min_out_degree: int = 1
    require_recent_fact: bool = True
    allow_literal_answers: bool = True
    seed: int = 0
    exclude_relations: list[str] = Field(default_factory=lambda: ["links_to"], description="edges never walked")
    as_of: dt.date | None = None
    window_days: int | None = Field(default=None, description="recency window; default: the graph's manifest")
    step_retries: int = Field(default=4, ge=1, description="candidate edges tried per step before a walk dies")
    forbid_inverse_hop: bool = True
    forbid_repeated_relation: bool = True
    require_single_answer: bool = True
    max_literal_chars: int = 40
    starts_per_task: int = Field(default=256, ge=1, description="start nodes per Beam element")
    shards: int = Field(default=4, ge=1)

    @field_validator("hops")
    @classmethod
    def _hops_in_range(cls, hops: list[int]) -> list[int]:
        if not hops or any(h < 1 or h > 8 for h in hops):
            raise ValueError("hops must be a non-empty list of path lengths between 1 and 8")
        return sorted(set(hops))


class QuestionConfig(_Config):
    writer: LLMRole = Field(default_factory=LLMRole)
    shortcut: LLMRole | None = None
    shortcut_attempts: int = 4
    as_of: dt.date | None = None
    max_questions: int | None = None
    seed: int = 0
    leak_ngram: int = Field(default=8, ge=3, description="evidence n-gram length that counts as a leak")
    attributes_per_entity: int = Field(default=1, ge=0, description="attributes added to each obfuscated entity")
    paths_per_unit: int = Field(default=32, ge=1, description="paths per resumable work unit")
    shards: int = Field(default=4, ge=1)


class IndexConfig(_Config):
    """How the local search index is built from a snapshot's pages."""

    chunk_chars: int = Field(default=1500, ge=200, description="most characters of one open_page chunk")
    title_weight: float = Field(default=2.0, ge=0.0, description="weight of the title/alias field in ranking")
    shard_pages: int = Field(default=5000, ge=1, description="pages per parquet shard of the index")


class TrajectoryConfig(_Config):
    frameworks: list[Literal["react", "function_calling", "tagged"]] = ["react", "function_calling", "tagged"]
    policies: dict[str, LLMRole] = Field(default_factory=dict, description="framework -> LLM role; offline when absent")
    rollouts: int = 2
    max_turns: int = 60
    keep_last_observations: int = 5
    search_top_k: int = 5
    error_rates: dict[str, float] = Field(default_factory=dict, description="offline policy error kind -> rate")
    seed: int = 0


class JudgeConfig(_Config):
    judge: LLMRole = Field(default_factory=LLMRole)
    thresholds: dict[str, float] = Field(
        default_factory=lambda: {"tool_accuracy": 0.5, "information_gain": 0.2, "logical_soundness": 0.5}
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: {"tool_accuracy": 1.0, "information_gain": 1.0, "logical_soundness": 1.0}
    )
    failed_turns: Literal["mask", "penalty"] = "mask"
    failed_turn_reward: float = -1.0
