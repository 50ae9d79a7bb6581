"""Stage 5 benchmark: building the Hub folder (7 configs, card, plots) against storing the canonical record alone.

Input: generated judged trajectories of `turns` turns each (the test fixture's turn kinds repeated).
Baseline, measured in the same run: writing just those JudgedTrajectory rows as parquet. Reported: the
dataset stage's trajectories and turns per second, and its time as a multiple of the baseline (it writes
six more renders of every trajectory, so a small multiple is expected).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ground.io import write_records
from pipeline.dataset import build_dataset
from schemas.config import DatasetConfig
from schemas.critic import JudgedTrajectory
from tests.dataset_fixtures import make_judged, make_question, write_upstream


def long_judged(question_index: int, framework: str, turns: int) -> JudgedTrajectory:
    """A judged trajectory of about `turns` turns: the fixture's call turns repeated, then its answer."""
    judged = make_judged(make_question(question_index, hops=2 + question_index % 3), framework)
    body, final = judged.trajectory.turns[:-1], judged.trajectory.turns[-1]
    repeated = [body[i % len(body)].model_copy(update={"index": i}) for i in range(turns - 1)]
    repeated.append(final.model_copy(update={"index": turns - 1}))
    by_index = {j.turn_index: j for j in judged.judgements}
    judgements = [by_index[min(t.index % len(body), len(body) - 1)].model_copy(update={"turn_index": t.index})
                  for t in repeated]
    judgements[-1] = by_index[final.index].model_copy(update={"turn_index": turns - 1})
    trajectory = judged.trajectory.model_copy(update={"turns": repeated})
    return JudgedTrajectory(trajectory=trajectory, judgements=judgements, outcome_reward=judged.outcome_reward)


def run(quick: bool = False) -> dict[str, float]:
    questions_count, turns = (20, 30) if quick else (200, 60)
    questions = [make_question(i, hops=2 + i % 3) for i in range(questions_count)]
    judged = [long_judged(i, f, turns) for i in range(questions_count) for f in ("react", "function_calling", "tagged")]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        started = time.perf_counter()
        write_records(JudgedTrajectory, judged, out / "baseline.parquet")
        baseline_s = time.perf_counter() - started
        dirs = write_upstream(out / "run", questions, judged)
        started = time.perf_counter()
        build_dataset(DatasetConfig(out=str(out / "run")), dirs)
        build_s = time.perf_counter() - started
        output_mb = sum(p.stat().st_size for p in (out / "run/dataset").rglob("*") if p.is_file()) / 1e6
    result = {
        "trajectories": len(judged),
        "turns_per_trajectory": turns,
        "baseline_s": round(baseline_s, 3),
        "build_s": round(build_s, 3),
        "trajectories_per_s": round(len(judged) / build_s, 1),
        "turns_per_s": round(len(judged) * turns / build_s, 1),
        "build_over_baseline": round(build_s / baseline_s, 2),
        "output_mb": round(output_mb, 2),
    }
    print(f"   dataset stage: {result['trajectories_per_s']} trajectories/s ({result['turns_per_s']} turns/s), "
          f"{result['build_over_baseline']}x the time of storing the canonical records alone; "
          f"{result['output_mb']} MB written")
    return result
