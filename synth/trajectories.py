"""Stage 3: every question solved by every framework, `rollouts` times, in the local search environment.

Questions are grouped into work units (a fixed number of questions, named by a hash of their ids). A Beam
transform runs each unit: every (question, framework, rollout) episode of the unit concurrently on one
event loop, so LLM requests of many questions share each endpoint's concurrency bound, and writes the
unit's trajectories as one resumable part. A worker runs `units_in_flight` units side by side, so one
unit's longest episode does not leave the endpoint idle. A rerun skips finished units; the final shards
are the parts streamed in unit order, so an interrupted and an uninterrupted run write the same records.
A unit any of whose episodes hit a transient LLM failure (timeouts, an outage) is not written: the stage
then ends with `StageIncomplete` (non-zero exit, no manifest), and a rerun retries exactly those units.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import apache_beam
import pyarrow as pa
import pyarrow.compute as pc

from ground.errors import UserError
from ground.io import (
    WorkUnit,
    WorkUnits,
    parquet_file,
    plan_work_units,
    read_parts,
    read_records,
    write_table,
)
from ground.stage import begin_stage
from ground.storage import as_path
from llm.client import LLMClient, LLMUnavailable, RoleReport, run_async, save_report, stage_report
from runtime.beam import pipeline_options
from schemas.config import BeamOptions, TrajectoryConfig
from schemas.manifest import Manifest
from schemas.questions import Question
from schemas.trajectory import Trajectory
from synth.environment import SearchEnvironment
from synth.frameworks import ContextWindow, get_framework
from synth.policies import LLMPolicy, Policy, ScriptedPolicy, episode_seed, run_episode

log = logging.getLogger(__name__)
STAGE = "trajectories"
TABLE = "trajectories"
SHARD_RECORDS = 1000


def plan_units(questions: Iterable[Question], config: TrajectoryConfig) -> list[WorkUnit[Question]]:
    """Deterministic work units: questions sorted by id, `questions_per_unit` at a time."""
    ordered = sorted(questions, key=lambda q: q.question_id)
    if config.max_questions is not None:
        ordered = ordered[: config.max_questions]
    return plan_work_units(ordered, lambda q: q.question_id, config.questions_per_unit)


def policy_engines(config: TrajectoryConfig) -> dict[str, str]:
    """framework -> the engine that drives it: `offline` (scripted) or `openai:<model>`."""
    engines = {}
    for framework in config.frameworks:
        role = config.policies.get(framework)
        engines[framework] = "offline" if role is None or role.offline else f"openai:{role.model}"
    return engines


def make_policies(
    config: TrajectoryConfig, env: SearchEnvironment, cache_dir: str | Path | None
) -> tuple[dict[str, Policy], list[LLMClient]]:
    """framework -> policy. Frameworks on one endpoint share one client, hence its concurrency bound.

    Call inside the event loop that uses the clients, and close them (`aclose`) when done.
    """
    window = ContextWindow(config.keep_last_observations, config.keep_last_turns)
    clients: dict[str, LLMClient] = {}
    policies: dict[str, Policy] = {}
    for framework in config.frameworks:
        role = config.policies.get(framework)
        if role is None or role.offline:
            policies[framework] = ScriptedPolicy(env, config.error_rates, config.search_top_k)
            continue
        if role.few_shot and not get_framework(framework).text_protocol:
            raise UserError(f"few_shot is for text protocols; {framework} calls tools natively "
                            f"(set few_shot = false in [trajectories.policies.{framework}])")
        key = role.model_dump_json(exclude={"few_shot"})  # the policy's, not the client's
        if key not in clients:
            cache = as_path(cache_dir) / "policy" if cache_dir else None
            clients[key] = LLMClient(role, cache, name=f"policy-{role.model}")
        policies[framework] = LLMPolicy(clients[key], window, few_shot=role.few_shot)
    return policies, list(clients.values())


async def solve_questions(
    questions: Iterable[Question], env: SearchEnvironment, config: TrajectoryConfig, policies: dict[str, Policy]
) -> list[Trajectory]:
    """All episodes of these questions, concurrently; the result is in (question, framework, rollout) order."""
    episodes = [
        run_episode(
            question,
            get_framework(framework),
            policies[framework],
            env,
            max_turns=config.max_turns,
            max_parse_failures=config.max_parse_failures,
            seed=episode_seed(config.seed, question.question_id, framework, rollout),
            rollout=rollout,
        )
        for question in questions
        for framework in config.frameworks
        for rollout in range(config.rollouts)
    ]
    results = await asyncio.gather(*episodes, return_exceptions=True)  # the others finish (and are cached)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)


async def solve_units(
    units: list[WorkUnit[Question]], env: SearchEnvironment, config: TrajectoryConfig, cache_dir: str | Path | None, parts: WorkUnits
) -> RoleReport:
    """Several units on one event loop, each written as soon as its own episodes finish.

    Running units side by side keeps the endpoint busy while one unit waits for its longest episode. A
    unit with a transient LLM failure is left unwritten (counted in the report) for a rerun.
    """
    policies, clients = make_policies(config, env, cache_dir)
    report = RoleReport()

    async def solve(unit: WorkUnit[Question]) -> None:
        try:
            trajectories = await solve_questions(unit.items, env, config, policies)
        except LLMUnavailable as failure:
            report.note_unfinished(failure)
            return
        parts.write(unit.unit_id, {TABLE: (Trajectory, trajectories)})

    try:
        await asyncio.gather(*(solve(unit) for unit in units))
    finally:
        for client in clients:
            await client.aclose()
            report.add_client(client)
    return report


class _SolveUnits(apache_beam.DoFn):
    """Runs a batch of work units, skipping those whose part exists; the environment loads once per worker."""

    def __init__(self, index_dir: str, out_dir: str, config: TrajectoryConfig, cache_dir: str | None):
        self.index_dir, self.out_dir, self.config, self.cache_dir = index_dir, out_dir, config, cache_dir
        self.env: SearchEnvironment | None = None

    def setup(self):
        self.env = SearchEnvironment.load(self.index_dir)

    def process(self, batch: list[WorkUnit[Question]]):
        parts = WorkUnits(self.out_dir, [TABLE])
        pending = [unit for unit in batch if not parts.is_done(unit.unit_id)]
        apache_beam.metrics.Metrics.counter(STAGE, "units_resumed").inc(len(batch) - len(pending))
        if pending:
            report = run_async(lambda: solve_units(pending, self.env, self.config, self.cache_dir, parts))
            save_report(self.out_dir, report)
            apache_beam.metrics.Metrics.counter(STAGE, "units_solved").inc(len(pending) - report.unfinished_units)
        yield from (unit.unit_id for unit in batch)


class SolveUnits(apache_beam.PTransform):
    """PCollection[WorkUnit] -> PCollection[unit id], each unit's trajectories written as a resumable part.

    Units are spread over workers, and each worker runs `units_in_flight` of them at a time.
    """

    def __init__(self, index_dir: str | Path, out_dir: str | Path, config: TrajectoryConfig, cache_dir: str | Path | None):
        super().__init__()
        self.batch = config.units_in_flight
        self.fn = _SolveUnits(str(index_dir), str(out_dir), config, str(cache_dir) if cache_dir else None)

    def expand(self, units):
        return (
            units
            | "Reshuffle" >> apache_beam.Reshuffle()
            | "Batch" >> apache_beam.BatchElements(min_batch_size=self.batch, max_batch_size=self.batch)
            | "Solve" >> apache_beam.ParDo(self.fn)
        )


def merge_parts(units: list[WorkUnit[Question]], parts: WorkUnits, out_dir: Path) -> tuple[list[str], dict[str, int]]:
    """The units' parts, in plan order, as shards of SHARD_RECORDS trajectories, with counts: streamed a part
    at a time and moved as Arrow rows (no record is rebuilt and encoded again)."""
    files = [parts.part_path(TABLE, unit.unit_id) for unit in units]
    shard_count = max(1, -(-sum(parquet_file(f).metadata.num_rows for f in files) // SHARD_RECORDS))
    outputs: list[str] = []
    counts: Counter = Counter({"trajectories": 0, "correct": 0})
    buffer = read_parts(Trajectory, [])  # rows read and not yet written

    def flush(rows: pa.Table) -> None:
        path = out_dir / TABLE / f"{TABLE}-{len(outputs):05d}-of-{shard_count:05d}.parquet"
        write_table(rows, path)
        outputs.append(str(path.relative_to(out_dir)))

    for file in files:
        part = read_parts(Trajectory, [file])
        count_trajectories(counts, part)
        buffer = pa.concat_tables([buffer, part])
        while buffer.num_rows >= SHARD_RECORDS:
            flush(buffer.slice(0, SHARD_RECORDS))
            buffer = buffer.slice(SHARD_RECORDS)
    if buffer.num_rows or not outputs:
        flush(buffer)
    return outputs, dict(counts)


def count_trajectories(counts: Counter, trajectories: pa.Table) -> None:
    """Add a table of trajectories to the stage counts (per framework, stop reason, injected error kind, ...),
    read off its columns."""
    turns = pc.list_flatten(trajectories["turns"])

    def total(flags) -> int:
        return int(pc.sum(flags.cast(pa.int64())).as_py() or 0)

    counts["trajectories"] += trajectories.num_rows
    counts.update(f"framework:{name}" for name in trajectories["framework"].to_pylist())
    counts.update(f"stop:{reason}" for reason in trajectories["stop_reason"].to_pylist())
    counts["correct"] += total(pc.struct_field(trajectories["outcome"], "correct"))
    if trajectories.num_rows:
        counts["turns"] += len(turns)
    if len(turns):
        counts["tool_errors"] += total(pc.struct_field(turns, "tool_error"))
        counts["parse_errors"] += len(turns) - pc.struct_field(turns, "parse_error").null_count
    counts.update(f"injected:{kind}" for kind in pc.struct_field(turns, "injected_error").to_pylist() if kind)


def run_trajectories(
    questions_dir: str | Path,
    index_dir: str | Path,
    out_dir: str | Path,
    config: TrajectoryConfig,
    cache_dir: str | Path | None = None,
    beam: BeamOptions | None = None,
    beam_args: Iterable[str] = (),
) -> Manifest:
    """Solve every question with every framework and rollout; resumable; writes trajectories/*.parquet."""
    questions_dir, index_dir, out_dir = as_path(questions_dir), as_path(index_dir), as_path(out_dir)
    run = begin_stage(STAGE, out_dir, config, upstream_dirs={"questions": questions_dir, "index": index_dir},
                      beside=True)
    if run.done:
        return run.finished
    out_dir = run.work_dir  # beside the previous trajectories until `finish` moves them into place
    questions = list(read_records(Question, questions_dir / "questions"))
    units = plan_units(questions, config)
    options = pipeline_options(beam, list(beam_args))
    with apache_beam.Pipeline(options=options) as pipeline:
        _ = (
            pipeline
            | "Units" >> apache_beam.Create(units, reshuffle=False)
            | "SolveUnits" >> SolveUnits(index_dir, out_dir, config, cache_dir)
        )
    parts = WorkUnits(out_dir, [TABLE])
    unfinished = sum(not parts.is_done(unit.unit_id) for unit in units)
    report = stage_report(STAGE, out_dir, unfinished, len(units))
    outputs, counts = merge_parts(units, parts, out_dir)
    counts.update(report.flat_counts())
    counts["questions_in"] = len(questions)
    counts["questions_used"] = sum(len(unit.items) for unit in units)
    engines = {f"policy:{fw}": engine for fw, engine in policy_engines(config).items()}
    return run.finish(counts, {TABLE: outputs}, engines=engines, seed=config.seed)
