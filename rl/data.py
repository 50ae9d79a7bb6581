"""Read the `rl` and `trajectories` shards and turn judged trajectories into token-level training examples.

Readers are separate from logic: `read_config_shards` only reads, `build_examples` only renders and
accounts. Every trajectory is either kept or counted as skipped with a reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
from pydantic import BaseModel

from ground.errors import UserError
from ground.io import parquet_file, read_manifest, read_records, shard_files
from ground.storage import StorePath, as_path
from pipeline.renders import nanbeige_messages, render_rl
from rl.chat import PrefixPropertyError, check_full_encoding, check_prefix_property, render_tokens
from schemas.base import arrow_schema, from_table
from schemas.critic import CRITERIA, JudgedTrajectory, TurnJudgement
from schemas.dataset import PASS_RATE_FIELDS, QuestionRow, RLPrompt
from schemas.questions import Question

M = TypeVar("M", bound=BaseModel)


def split_of(path: Path | StorePath) -> str:
    """`train-00000-of-00001.parquet` -> `train` (the Hub layout's split prefix)."""
    return path.name.split("-", 1)[0]


def config_files(dataset_dir: str | Path | StorePath, config: str, split: str | None = None) -> list[Path | StorePath]:
    """The shards of one dataset config (`data/<config>/<split>-*.parquet`); all splits when `split` is None."""
    folder = as_path(dataset_dir) / "data" / config
    files = [f for f in shard_files(folder) if split is None or split_of(f) == split]
    if not files:
        raise UserError(f"no {config!r} shards{f' for split {split!r}' if split else ''} in {folder}; "
                        "run `make dataset` first or pass --shards DIR")
    return files


def read_config_shards(model: type[M], dataset_dir: str | Path | StorePath, config: str,
                       split: str | None = None) -> Iterator[M]:
    """Records of one dataset config; all splits when `split` is None."""
    for file in config_files(dataset_dir, config, split):
        yield from read_records(model, file)


def read_questions(dataset_dir: str | Path | StorePath) -> Iterator[Question]:
    """The `questions` config's questions, from datasets written before its rows carried their pass rate
    (`Question` shards) and after (`QuestionRow`), each as the bare question the critic judges against."""
    for file in shard_files(as_path(dataset_dir) / "data" / "questions"):
        model = QuestionRow if "pass_rate" in parquet_file(file).schema_arrow.names else Question
        for row in read_records(model, file):
            yield row if model is Question else Question(**{name: getattr(row, name) for name in Question.model_fields})


def read_trajectories(dataset_dir: str | Path | StorePath, split: str | None = None,
                      limit: int | None = None) -> list[JudgedTrajectory]:
    """The judged trajectories, the first `limit` of them when given (reading stops there)."""
    return list(islice(read_config_shards(JudgedTrajectory, dataset_dir, "trajectories", split), limit))


def read_prompt_shard(file: Path | StorePath) -> list[RLPrompt]:
    """An `rl` shard's prompts; a shard written before the rows carried their pass rate reads with it None."""
    schema = arrow_schema(RLPrompt)
    table = parquet_file(file).read()
    for name in PASS_RATE_FIELDS:
        if name not in table.column_names:
            table = table.append_column(schema.field(name), pa.nulls(table.num_rows, schema.field(name).type))
    return from_table(RLPrompt, table.select(schema.names).cast(schema))


def band_prompts(dataset_dir: str | Path | StorePath, pass_band: Sequence[float],
                 split: str | None = None) -> dict[str, list[RLPrompt]]:
    """Split -> RL prompts of every question in the `questions` config whose recorded pass rate lies in
    [LO, HI], rendered and selected as the dataset stage renders and selects its `rl` config
    (`pipeline.dataset.is_rl_prompt`, `render_rl`), so another band needs no rebuild: the `questions`
    config keeps every question with its rate, the `rl` config only the dataset's own band."""
    from pipeline.dataset import is_rl_prompt  # lazily: it brings Beam, which `hopsmith rl` needs only here

    low, high = pass_band
    if not 0.0 <= low <= high <= 1.0:
        raise UserError(f"a pass band needs 0 <= LO <= HI <= 1, got {low:g} {high:g}")
    files = config_files(dataset_dir, "questions", split)
    if any(PASS_RATE_FIELDS[0] not in parquet_file(f).schema_arrow.names for f in files):
        raise UserError(f"the 'questions' shards in {as_path(dataset_dir)} carry no pass rate (written before "
                        "the rate column): --pass-band needs a dataset built by `hopsmith dataset` with difficulty")
    rows = [(split_of(f), row) for f in files for row in read_records(QuestionRow, f)]
    if all(row.pass_rate is None for _, row in rows):
        raise UserError(f"the dataset in {as_path(dataset_dir)} measured no pass rates (`--no-difficulty`), so "
                        "--pass-band has nothing to select by; rebuild it with difficulty on")
    manifest = read_manifest(dataset_dir)
    if manifest is None or "index" not in manifest.upstream:
        raise UserError(f"no dataset manifest naming its search index in {as_path(dataset_dir)}: --pass-band "
                        "renders the prompts with the index they were written against")
    by_split: dict[str, list[RLPrompt]] = {}
    for name, row in rows:
        if is_rl_prompt(row, pass_band):
            by_split.setdefault(name, []).append(render_rl(row, manifest.upstream["index"]))
    return by_split


def prompts_by_split(dataset_dir: str | Path | StorePath, split: str | None = None,
                     pass_band: Sequence[float] | None = None) -> dict[str, list[RLPrompt]]:
    """Split -> RL prompts: the `rl` config's, or with `pass_band` those of the questions in that band."""
    if pass_band is not None:
        return band_prompts(dataset_dir, pass_band, split)
    by_split: dict[str, list[RLPrompt]] = {}
    for file in config_files(dataset_dir, "rl", split):
        by_split.setdefault(split_of(file), []).extend(read_prompt_shard(file))
    return by_split


def read_prompts(dataset_dir: str | Path | StorePath, split: str | None = None,
                 pass_band: Sequence[float] | None = None) -> list[RLPrompt]:
    """The RL prompts of one split (all when None), from the `rl` config or, given a band, the `questions` config."""
    return [p for prompts in prompts_by_split(dataset_dir, split, pass_band).values() for p in prompts]


def trajectory_messages(judged: JudgedTrajectory) -> list[dict[str, str]]:
    """The `nanbeige` render with every turn, malformed ones too, as plain messages: assistant message k is
    trajectory turn k (RL penalises the malformed turns the SFT configs leave out)."""
    return [{"role": m.role, "content": m.content} for m in nanbeige_messages(judged, keep_malformed=True)]


@dataclass
class Example:
    """One trajectory ready for training: tokens, masks, per-turn signals and its question group.

    `criteria_passed[c][k]` says whether turn k passed critic criterion c.
    """

    trajectory_id: str
    question_id: str
    framework: str
    input_ids: list[int]
    loss_mask: list[int]
    turn_ids: list[int]
    turn_rewards: list[float]
    turn_passed: list[bool]
    outcome_reward: float
    criteria_passed: dict[str, list[bool]] = field(default_factory=dict)
    truncated: bool = False


def ordered_judgements(record: JudgedTrajectory) -> list[TurnJudgement] | None:
    """The judgement of each turn in turn order; None when a turn was not judged."""
    by_turn = {j.turn_index: j for j in record.judgements}
    judgements = [by_turn.get(turn.index) for turn in record.trajectory.turns]
    return None if any(j is None for j in judgements) else judgements


def make_example(record: JudgedTrajectory, judgements: list[TurnJudgement], input_ids: list[int],
                 loss_mask: list[int], turn_ids: list[int], truncated: bool = False) -> Example:
    """Tokens plus the critic's signals: a turn passes when its verdict holds and the critic kept it in the loss."""
    return Example(
        trajectory_id=record.trajectory.trajectory_id,
        question_id=record.trajectory.question_id,
        framework=record.trajectory.framework,
        input_ids=input_ids, loss_mask=loss_mask, turn_ids=turn_ids,
        turn_rewards=[j.reward for j in judgements],
        turn_passed=[j.verdict for j in judgements],
        outcome_reward=record.outcome_reward,
        criteria_passed={c: [getattr(j, c).passed for j in judgements] for c in CRITERIA},
        truncated=truncated,
    )


def build_examples(judged: list[JudgedTrajectory], tokenizer, max_len: int,
                   prefix_check_samples: int = 32) -> tuple[list[Example], Counter]:
    """Render judged trajectories into examples; counts `kept`, `truncated` and `skipped:<reason>`.

    The first `prefix_check_samples` trajectories get the per-prefix check (quadratic in length); every
    trajectory gets the whole-conversation check.
    """
    counts: Counter = Counter()
    examples = []
    for record in judged:
        judgements = ordered_judgements(record)
        if not judgements:
            counts["skipped:no_turns" if judgements == [] else "skipped:missing_judgement"] += 1
            continue
        messages = trajectory_messages(record)
        if sum(m["role"] == "assistant" for m in messages) != len(judgements):
            counts["skipped:render_turn_mismatch"] += 1
            continue
        rendered = render_tokens(tokenizer, messages)
        check = check_prefix_property if counts["prefix_checked"] < prefix_check_samples else check_full_encoding
        try:
            check(tokenizer, messages, rendered)
        except PrefixPropertyError:
            counts["skipped:prefix_property"] += 1
            continue
        counts["prefix_checked"] += check is check_prefix_property
        truncated = len(rendered) > max_len
        counts["truncated"] += int(truncated)
        counts["kept"] += 1
        examples.append(make_example(record, judgements, rendered.input_ids[:max_len], rendered.loss_mask[:max_len],
                                     rendered.turn_ids[:max_len], truncated))
    return examples, counts
