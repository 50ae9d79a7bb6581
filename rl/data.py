"""Read the `rl` and `trajectories` shards and turn judged trajectories into token-level training examples.

Readers are separate from logic: `read_config_shards` only reads, `build_examples` only renders and
accounts. Every trajectory is either kept or counted as skipped with a reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from pipeline.errors import UserError
from pipeline.io import read_records, shard_files
from pipeline.renders import nanbeige_messages
from rl.chat import PrefixPropertyError, check_prefix_property, render_tokens
from schemas.critic import JudgedTrajectory
from schemas.dataset import RLPrompt

M = TypeVar("M", bound=BaseModel)


def read_config_shards(model: type[M], dataset_dir: str | Path, config: str, split: str | None = None) -> Iterator[M]:
    """Records of one dataset config (`data/<config>/<split>-*.parquet`); all splits when `split` is None."""
    folder = Path(dataset_dir) / "data" / config
    files = [f for f in shard_files(folder) if split is None or f.name.startswith(f"{split}-")]
    if not files:
        raise UserError(f"no {config!r} shards{f' for split {split!r}' if split else ''} in {folder}; "
                        "run `make dataset` first or pass --shards DIR")
    for file in files:
        yield from read_records(model, file)


def read_trajectories(dataset_dir: str | Path, split: str | None = None) -> list[JudgedTrajectory]:
    return list(read_config_shards(JudgedTrajectory, dataset_dir, "trajectories", split))


def read_prompts(dataset_dir: str | Path, split: str | None = None) -> list[RLPrompt]:
    return list(read_config_shards(RLPrompt, dataset_dir, "rl", split))


def trajectory_messages(judged: JudgedTrajectory) -> list[dict[str, str]]:
    """The published `nanbeige` render as plain messages: assistant message k is trajectory turn k."""
    return [{"role": m.role, "content": m.content} for m in nanbeige_messages(judged)]


@dataclass
class Example:
    """One trajectory ready for training: tokens, masks, per-turn signals and its question group."""

    trajectory_id: str
    question_id: str
    framework: str
    input_ids: list[int]
    loss_mask: list[int]
    turn_ids: list[int]
    turn_rewards: list[float]
    turn_passed: list[bool]
    outcome_reward: float
    truncated: bool = False


def build_examples(judged: list[JudgedTrajectory], tokenizer, max_len: int,
                   check_prefix: bool = True) -> tuple[list[Example], Counter]:
    """Render judged trajectories into examples; counts `kept`, `truncated` and `skipped:<reason>`."""
    counts: Counter = Counter()
    examples = []
    for record in judged:
        by_turn = {j.turn_index: j for j in record.judgements}
        judgements = [by_turn.get(turn.index) for turn in record.trajectory.turns]
        if not judgements or any(j is None for j in judgements):
            counts["skipped:missing_judgement" if judgements else "skipped:no_turns"] += 1
            continue
        messages = trajectory_messages(record)
        if sum(m["role"] == "assistant" for m in messages) != len(judgements):
            counts["skipped:render_turn_mismatch"] += 1
            continue
        rendered = render_tokens(tokenizer, messages)
        if check_prefix:
            try:
                check_prefix_property(tokenizer, messages, rendered)
            except PrefixPropertyError:
                counts["skipped:prefix_property"] += 1
                continue
        truncated = len(rendered) > max_len
        counts["truncated"] += int(truncated)
        counts["kept"] += 1
        examples.append(Example(
            trajectory_id=record.trajectory.trajectory_id,
            question_id=record.trajectory.question_id,
            framework=record.trajectory.framework,
            input_ids=rendered.input_ids[:max_len],
            loss_mask=rendered.loss_mask[:max_len],
            turn_ids=rendered.turn_ids[:max_len],
            turn_rewards=[j.reward for j in judgements],
            turn_passed=[j.verdict and j.loss_mask == 1 for j in judgements],
            outcome_reward=record.outcome_reward,
            truncated=truncated,
        ))
    return examples, counts
