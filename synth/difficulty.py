"""The difficulty stage of `hopsmith dataset`: every question's pass rate under the configured eval policy.

The trajectories stage's rollouts cannot give it: their offline policy injects errors (a premature wrong
answer, a detour whose results the searcher then reads), several frameworks mix, and LLM policies may
drive some of them, so their share of correct rollouts measures the training-data generator, not the
question. This stage runs `synth.evaluation.evaluate` (the `hopsmith eval` path: by default the honest
offline searcher without injected errors, k rollouts a question) over the run's own search index and
writes one `QuestionResult` a question. Questions go in deterministic work units (a hash of their ids),
each written as a resumable part; the shards are the parts in unit order, so a killed and an undisturbed
run write the same records. A unit whose LLM policy hit a transient failure is left unwritten, and the
stage ends with `StageIncomplete` for a rerun to finish.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import apache_beam
import pyarrow as pa
import pyarrow.compute as pc

from ground.io import WorkUnit, WorkUnits, plan_work_units, read_parts, read_records, write_table
from ground.stage import begin_stage
from ground.storage import as_path
from llm.client import LLMUnavailable, stage_report
from runtime.beam import pipeline_options
from schemas.config import BeamOptions, DifficultyConfig
from schemas.evaluation import QuestionResult
from schemas.manifest import Manifest
from schemas.questions import Question
from synth.environment import SearchEnvironment
from synth.evaluation import EvalSettings, evaluate, measured_by

STAGE = "difficulty"
TABLE = "results"


def eval_settings(config: DifficultyConfig) -> EvalSettings:
    return EvalSettings(policy=config.policy, framework=config.framework, rollouts=config.rollouts,
                        max_turns=config.max_turns, seed=config.seed, top_k=config.search_top_k, role=config.role)


BUCKETS = ("0", "(0, 0.25]", "(0.25, 0.5]", "(0.5, 0.75]", "(0.75, 1)", "1")


def difficulty_bucket(rate: float) -> str:
    """The card's pass-rate columns: never solved, the quarters between (upper bound kept), always solved."""
    if rate <= 0.0:
        return BUCKETS[0]
    if rate >= 1.0:
        return BUCKETS[-1]
    return BUCKETS[min(4, math.ceil(rate / 0.25))]


class _EvalUnits(apache_beam.DoFn):
    """Evaluates a unit's questions unless its part exists; the index loads once per worker."""

    def __init__(self, index_dir: str, out_dir: str, config: DifficultyConfig, cache_dir: str | None):
        self.index_dir, self.out_dir, self.config, self.cache_dir = index_dir, out_dir, config, cache_dir
        self.env: SearchEnvironment | None = None

    def setup(self):
        self.env = SearchEnvironment.load(self.index_dir)

    def process(self, unit: WorkUnit[Question]):
        parts = WorkUnits(self.out_dir, [TABLE])
        if parts.is_done(unit.unit_id):
            apache_beam.metrics.Metrics.counter(STAGE, "units_resumed").inc()
        else:
            try:
                results = evaluate(list(unit.items), self.env, eval_settings(self.config), self.cache_dir)
            except LLMUnavailable:  # left unwritten: the stage ends incomplete and a rerun retries the unit
                return
            parts.write(unit.unit_id, {TABLE: (QuestionResult, results)})
        yield unit.unit_id


class EvalUnits(apache_beam.PTransform):
    """PCollection[WorkUnit] -> PCollection[unit id], each unit's results written as a resumable part."""

    def __init__(self, index_dir: str | Path, out_dir: str | Path, config: DifficultyConfig,
                 cache_dir: str | Path | None):
        super().__init__()
        self.fn = _EvalUnits(str(index_dir), str(out_dir), config, str(cache_dir) if cache_dir else None)

    def expand(self, units):
        return units | "Reshuffle" >> apache_beam.Reshuffle() | "Evaluate" >> apache_beam.ParDo(self.fn)


def count_results(results: pa.Table) -> Counter:
    """The stage counts, read off the results' columns: questions, rollouts, correct rollouts, and questions by
    pass-rate bucket."""
    rollouts = pc.list_flatten(results["rollouts"])
    correct = pc.sum(pc.struct_field(rollouts, "correct").cast(pa.int64())).as_py() or 0
    counts: Counter = Counter({"questions": results.num_rows, "rollouts": len(rollouts), "correct_rollouts": correct})
    counts.update(f"pass_rate:{difficulty_bucket(rate)}" for rate in results["pass_rate"].to_pylist())
    return counts


def run_difficulty(
    questions_dir: str | Path,
    index_dir: str | Path,
    out_dir: str | Path,
    config: DifficultyConfig,
    cache_dir: str | Path | None = None,
    beam: BeamOptions | None = None,
    beam_args: Iterable[str] = (),
) -> Manifest:
    """Every question's eval results under `config`; resumable per unit; writes results/*.parquet."""
    questions_dir, index_dir = as_path(questions_dir), as_path(index_dir)
    run = begin_stage(STAGE, out_dir, config, upstream_dirs={"questions": questions_dir, "index": index_dir},
                      beside=True)
    if run.done:
        return run.finished
    work = run.work_dir
    questions = list(read_records(Question, questions_dir / "questions"))
    units = plan_work_units(questions, lambda q: q.question_id, config.questions_per_unit)
    with apache_beam.Pipeline(options=pipeline_options(beam, list(beam_args))) as pipeline:
        _ = (pipeline
             | "Units" >> apache_beam.Create(units, reshuffle=False)
             | "EvalUnits" >> EvalUnits(index_dir, work, config, cache_dir))
    parts = WorkUnits(work, [TABLE])
    stage_report(STAGE, work, sum(not parts.is_done(u.unit_id) for u in units), len(units))
    results = read_parts(QuestionResult, [parts.part_path(TABLE, unit.unit_id) for unit in units])
    name = f"{TABLE}/{TABLE}-00000-of-00001.parquet"
    write_table(results, work / name)
    counts = count_results(results)
    counts["questions_in"] = len(questions)
    return run.finish(dict(counts), {TABLE: [name]}, engines={"policy": measured_by(eval_settings(config))},
                      seed=config.seed)


class PassRate(NamedTuple):
    rate: float
    rollouts: int


def read_pass_rates(folder: str | Path) -> dict[str, PassRate]:
    """question id -> its pass rate and rollouts, from a finished difficulty folder."""
    return {r.query_id: PassRate(r.pass_rate, len(r.rollouts))
            for r in read_records(QuestionResult, as_path(folder) / TABLE)}
