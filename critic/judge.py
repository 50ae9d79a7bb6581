"""Stage 4 (`hopsmith judge`): every turn of every trajectory judged, as a resumable Beam transform.

Trajectories are grouped into work units (`batch_size` trajectories sorted by id, named by a hash of their
ids). A Beam DoFn judges one unit: the offline critic on every turn and, when the judge role has an
endpoint, the LLM judge on every turn of the unit concurrently (bounded by the role's concurrency). Each
unit writes its JudgedTrajectory rows and its SkippedRecords as resumable parts; the final shards are the
parts concatenated in unit order, so an interrupted and an uninterrupted run write the same records.
A judge reply that stays unusable leaves that one turn to the offline critic (counted as
`llm:judge:fallbacks`, the turn's engine says so). A transient failure (timeouts, an outage) leaves the
unit unfinished: the stage ends with `StageIncomplete` and a rerun retries it.
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

from critic.llm_judge import assess_trajectory
from critic.scoring import OFFLINE_ENGINE, judge_trajectory
from ground.io import (
    WorkUnit,
    WorkUnits,
    parquet_file,
    plan_work_units,
    read_column,
    read_parts,
    read_records,
    read_table,
    shard_files,
    write_shards,
    write_table,
)
from ground.stage import begin_stage
from ground.storage import as_path, remove_tree
from llm.client import LLMClient, LLMUnavailable, RoleReport, run_async, save_report, stage_report
from runtime.beam import pipeline_options
from schemas.config import BeamOptions, JudgeConfig
from schemas.critic import CRITERIA, JudgedTrajectory
from schemas.manifest import Manifest
from schemas.questions import Question
from schemas.trajectory import Trajectory
from schemas.wiki import SkippedRecord

log = logging.getLogger(__name__)
STAGE = "judge"
TABLES = ("judged", "skipped")
SHARD_RECORDS = 1000


def plan_units(trajectory_ids: Iterable[str], batch_size: int) -> list[WorkUnit[str]]:
    return plan_work_units(trajectory_ids, lambda trajectory_id: trajectory_id, batch_size)


def judge_engine(config: JudgeConfig) -> str:
    return OFFLINE_ENGINE if config.judge.offline else f"{OFFLINE_ENGINE}+openai:{config.judge.model}"


async def judge_batch(
    trajectories: Iterable[Trajectory],
    questions: dict[str, Question],
    config: JudgeConfig,
    cache_dir: str | Path | None,
    aliases: dict[str, list[str]] | None = None,
    report: RoleReport | None = None,
) -> tuple[list[JudgedTrajectory], list[SkippedRecord]]:
    """Judge trajectories (LLM requests of all of them in flight together).

    Raises `LLMUnavailable` (after every other request finished, so their replies are cached) when the
    endpoint timed out or was down; `report` receives the judge's request counts either way.
    """
    trajectories = list(trajectories)
    assessments: list = [None] * len(trajectories)
    model = config.judge.model
    if not config.judge.offline:
        client = LLMClient(config.judge, as_path(cache_dir) / "judge" if cache_dir else None, name="judge")
        try:
            assessments = await asyncio.gather(
                *(assess_trajectory(client, t, config) for t in trajectories), return_exceptions=True
            )
        finally:
            await client.aclose()
            if report is not None:
                report.add_client(client)
        model = client.served_model
        for failure in assessments:
            if isinstance(failure, BaseException):
                raise failure
    judged = []
    for trajectory, assessment in zip(trajectories, assessments, strict=True):
        record = judge_trajectory(trajectory, questions.get(trajectory.question_id), config, assessment,
                                  judge_engine(config), model, aliases)
        for position, judgement in enumerate(record.judgements):
            if assessment is not None and assessment[position] is None:  # this turn fell back to the critic
                judgement.engine, judgement.model = OFFLINE_ENGINE, None
        judged.append(record)
    return judged, []


def load_questions(questions_dir: str | Path) -> dict[str, Question]:
    return {q.question_id: q for q in read_records(Question, as_path(questions_dir) / "questions")}


def load_aliases(index_dir: str | Path | None) -> dict[str, list[str]]:
    """Page title -> redirect titles from the search index (only those two columns are read)."""
    if index_dir is None:
        return {}
    aliases: dict[str, list[str]] = {}
    for shard in shard_files(as_path(index_dir) / "pages"):
        table = parquet_file(shard).read(columns=["title", "aliases"])
        for title, names in zip(table["title"].to_pylist(), table["aliases"].to_pylist(), strict=True):
            if names:
                aliases[title] = names
    return aliases


INPUTS = "inputs"  # each unit's trajectories, written before the pipeline, read by the worker that judges it


def write_unit_inputs(out_dir: str | Path, trajectories: pa.Table, units: list[WorkUnit[str]]) -> None:
    """Each unfinished unit's trajectories as a part of its own, so the pipeline carries unit ids only: Beam
    pickles and bz2-compresses whatever `Create` holds (5 of the sample's 18 judge seconds). The rows are
    taken from the input table as they are, not rebuilt as records and encoded again."""
    parts, inputs = WorkUnits(out_dir, TABLES), WorkUnits(out_dir, (INPUTS,))
    rows: dict[str, list[int]] = {}
    for row, trajectory_id in enumerate(trajectories["trajectory_id"].to_pylist()):
        rows.setdefault(trajectory_id, []).append(row)
    next_row = {trajectory_id: iter(found) for trajectory_id, found in rows.items()}  # a repeated id: each row once
    for unit in units:
        taken = [next(next_row[trajectory_id]) for trajectory_id in unit.items]
        if not parts.is_done(unit.unit_id):
            write_table(trajectories.take(taken), inputs.part_path(INPUTS, unit.unit_id))


class _JudgeUnit(apache_beam.DoFn):
    """Judges one work unit (by id, its trajectories read from its input part) unless its parts exist;
    questions and aliases are loaded once per worker."""

    def __init__(self, questions_dir: str, index_dir: str | None, out_dir: str, config: JudgeConfig,
                 cache_dir: str | None):
        self.questions_dir, self.index_dir, self.out_dir = questions_dir, index_dir, out_dir
        self.config, self.cache_dir = config, cache_dir
        self.questions: dict[str, Question] = {}
        self.aliases: dict[str, list[str]] = {}

    def setup(self):
        self.questions = load_questions(self.questions_dir)
        self.aliases = load_aliases(self.index_dir)

    def process(self, unit_id: str):
        parts = WorkUnits(self.out_dir, TABLES)
        if parts.is_done(unit_id):
            apache_beam.metrics.Metrics.counter(STAGE, "units_resumed").inc()
            yield unit_id
            return
        items = list(read_records(Trajectory, WorkUnits(self.out_dir, (INPUTS,)).part_path(INPUTS, unit_id)))
        report = RoleReport()
        try:
            judged, skipped = run_async(lambda: judge_batch(items, self.questions, self.config, self.cache_dir,
                                                            self.aliases, report))
        except LLMUnavailable as failure:
            report.note_unfinished(failure)
        else:
            parts.write(unit_id, {"judged": (JudgedTrajectory, judged), "skipped": (SkippedRecord, skipped)})
            apache_beam.metrics.Metrics.counter(STAGE, "units_judged").inc()
        save_report(self.out_dir, report)
        yield unit_id


class JudgeUnits(apache_beam.PTransform):
    """PCollection[unit id] -> PCollection[unit id], each unit's judgements written as resumable parts (its
    trajectories read from the input part `write_unit_inputs` wrote)."""

    def __init__(self, questions_dir: str | Path, index_dir: str | Path | None, out_dir: str | Path,
                 config: JudgeConfig, cache_dir: str | Path | None):
        super().__init__()
        self.fn = _JudgeUnit(str(questions_dir), str(index_dir) if index_dir else None, str(out_dir), config,
                             str(cache_dir) if cache_dir else None)

    def expand(self, units):
        return units | "Reshuffle" >> apache_beam.Reshuffle() | "Judge" >> apache_beam.ParDo(self.fn)


def judged_counts(judged: pa.Table, skipped: pa.Table) -> dict[str, int]:
    """The stage's counts from the columns of its `judged` and `skipped` tables (no record is rebuilt): every
    turn's verdict, loss mask and critical flag, the criteria it failed and its failure kinds."""
    turns = pc.list_flatten(judged["judgements"])

    def total(values) -> int:
        return int(pc.sum(values).as_py() or 0)

    def column(*names: str):
        return pc.struct_field(turns, list(names))

    verdict, loss_mask = column("verdict"), column("loss_mask")
    counts = Counter({
        "judged": judged.num_rows,
        "turns": len(turns),
        "turns_passed": total(verdict.cast(pa.int64())),
        "turns_masked": total(pc.and_(pc.invert(verdict), pc.equal(loss_mask, 0)).cast(pa.int64())),  # failed, out of the loss
        "turns_critical": total(column("critical").cast(pa.int64())),
        "turns_loss1": total(loss_mask),
    })
    counts.update(f"skipped:{reason}" for reason in skipped["reason"].to_pylist())
    for criterion in CRITERIA:
        if failed := total(pc.invert(column(criterion, "passed")).cast(pa.int64())):
            counts[f"failed:{criterion}"] = failed
    counts.update(f"kind:{kind}" for kind in pc.list_flatten(column("failure_kinds")).to_pylist())
    return dict(counts)


def run_judge(
    trajectories_dir: str | Path,
    questions_dir: str | Path,
    index_dir: str | Path | None,
    out_dir: str | Path,
    config: JudgeConfig,
    cache_dir: str | Path | None = None,
    beam: BeamOptions | None = None,
    beam_args: Iterable[str] = (),
) -> Manifest:
    """Judge every turn of every trajectory; resumable; writes judged/*.parquet and skipped/*.parquet.

    The index is an upstream of the judgement (the observations came from it; its redirect titles widen
    evidence matching), so a rebuilt index re-judges; without one (`None`) no aliases are used.
    """
    trajectories_dir, questions_dir, out_dir = as_path(trajectories_dir), as_path(questions_dir), as_path(out_dir)
    upstream = {"trajectories": trajectories_dir, "questions": questions_dir}
    if index_dir is not None:
        upstream["index"] = as_path(index_dir)
    run = begin_stage(STAGE, out_dir, config, upstream_dirs=upstream, beside=True)
    if run.done:
        return run.finished
    out_dir = run.work_dir  # beside the previous judgements until `finish` moves them into place
    trajectories = read_table(Trajectory, trajectories_dir / "trajectories")
    units = plan_units(trajectories["trajectory_id"].to_pylist(), config.batch_size)
    write_unit_inputs(out_dir, trajectories, units)
    with apache_beam.Pipeline(options=pipeline_options(beam, list(beam_args))) as pipeline:
        _ = (
            pipeline
            | "Units" >> apache_beam.Create([u.unit_id for u in units], reshuffle=False)
            | "JudgeUnits" >> JudgeUnits(questions_dir, index_dir, out_dir, config, cache_dir)
        )
    remove_tree(WorkUnits(out_dir, (INPUTS,)).table_folder(INPUTS))
    parts = WorkUnits(out_dir, TABLES)
    report = stage_report(STAGE, out_dir, sum(not parts.is_done(u.unit_id) for u in units), len(units))
    judged = read_parts(JudgedTrajectory, [parts.part_path("judged", u.unit_id) for u in units])
    skipped = read_parts(SkippedRecord, [parts.part_path("skipped", u.unit_id) for u in units])
    outputs = {table: write_shards(rows, out_dir, table, SHARD_RECORDS)
               for table, rows in (("judged", judged), ("skipped", skipped))}
    counts = judged_counts(judged, skipped)
    counts.update(report.flat_counts())
    known = set(read_column(questions_dir / "questions", "question_id"))
    counts["trajectories_in"] = trajectories.num_rows
    judged_questions = pc.struct_field(judged["trajectory"], "question_id").to_pylist()
    counts["judged_without_gold_path"] = sum(question_id not in known for question_id in judged_questions)
    return run.finish(counts, outputs, engines={"judge": judge_engine(config)})
