"""`hopsmith eval` against stage 3: the offline searcher at k=4 on the shipped sample's small run
(tests/data/dataset_small.toml; the stage-3 test snapshot with --quick), timed through
`synth.evaluation.evaluate` (solve, grade, re-executed searches for the retrieved ids, records) and through
`run_trajectories` for the same rollouts (one framework, no injected errors). Target: eval within 2x the
stage's time (`eval_over_trajectories` <= 2), best of three runs each, measured in the same process."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ground.io import read_records
from pipeline.dataset import load_config, run_dataset
from schemas.questions import Question
from synth.environment import SearchEnvironment
from synth.evaluation import EvalSettings, evaluate
from synth.trajectories import run_trajectories
from tests.trajectory_fixtures import make_snapshot

SMALL_CONFIG = Path(__file__).resolve().parent.parent / "tests" / "data" / "dataset_small.toml"

ROLLOUTS = 4


def run(quick: bool = False) -> dict[str, float]:
    repeats = 1 if quick else 3
    settings = EvalSettings(policy="offline", rollouts=ROLLOUTS, max_turns=30)
    with tempfile.TemporaryDirectory() as tmp:
        if quick:
            root = make_snapshot(Path(tmp) / "snapshot")
        else:
            root = Path(tmp) / "sample"
            run_dataset(load_config(str(SMALL_CONFIG), {"out": str(root)}))
        questions = list(read_records(Question, root / "questions" / "questions"))
        stage_s, eval_s = [], []
        for repeat in range(repeats):
            started = time.perf_counter()
            run_trajectories(root / "questions", root / "index", Path(tmp) / f"trajectories-{repeat}",
                             settings.trajectory_config())
            stage_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            results = evaluate(questions, SearchEnvironment.load(root / "index"), settings)
            eval_s.append(time.perf_counter() - started)
    figures = {"input": "snapshot" if quick else "sample", "questions": len(results), "rollouts": ROLLOUTS, "trajectories_s": round(min(stage_s), 3),
               "eval_s": round(min(eval_s), 3), "eval_over_trajectories": round(min(eval_s) / min(stage_s), 3)}
    print(f"eval: {figures['eval_s']}s for {len(results)} questions x {ROLLOUTS} vs the trajectories stage "
          f"{figures['trajectories_s']}s: ratio {figures['eval_over_trajectories']} (target <= 2)")
    return figures
