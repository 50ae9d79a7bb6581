"""The difficulty stage under its other eval policies: `naive` on the shipped sample's small run, and `llm`
end to end against the recorded real-model transcript (tests/data/llm_transcript.jsonl) served on 127.0.0.1.
Each run's rows name the policy (and model) that measured them, every rate is recounted here from the
rollouts, and a second run with the same seed writes the same records."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ground.io import read_manifest, read_records
from pipeline.dataset import build_dataset, load_config, stage_dirs
from schemas.config import DifficultyConfig
from schemas.evaluation import QuestionResult
from schemas.questions import Question
from synth.difficulty import read_pass_rates, run_difficulty
from synth.environment import SearchEnvironment
from synth.matching import normalize_answer
from tests.conftest import SMALL_CONFIG
from tests.dataset_fixtures import make_judged, write_upstream
from tests.llm_replay import MODEL, POLICY_EPISODES, Replay, load, policy_role
from tests.servers import OpenAIServer
from tests.trajectory_fixtures import make_snapshot

FRAMEWORK = "tagged"  # the recorded model searched, read and answered in this framework (tests/test_eval.py)


def rows(dataset: Path, config: str) -> list[dict]:
    return [row for path in sorted((dataset / "data" / config).glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def results_of(folder: Path) -> list[QuestionResult]:
    return list(read_records(QuestionResult, folder / "results"))


def check_rates(results: list[QuestionResult], questions: list[Question], rollouts: int) -> dict[str, float]:
    """Every question has its k rollouts, and its rate is the share of them graded correct, counted here."""
    assert sorted(r.query_id for r in results) == sorted(q.question_id for q in questions)
    by_id = {q.question_id: q for q in questions}
    rates = {}
    for result in results:
        assert [r.rollout for r in result.rollouts] == list(range(rollouts))
        correct = [r for r in result.rollouts if r.correct]
        rates[result.query_id] = len(correct) / rollouts
        assert result.pass_rate == rates[result.query_id]
        question = by_id[result.query_id]
        golds = {normalize_answer(g) for g in (question.answer, *question.aliases)}
        for rollout in result.rollouts:  # an exact answer is graded correct; no answer never is
            if rollout.final_answer and normalize_answer(rollout.final_answer) in golds:
                assert rollout.correct
            if not rollout.final_answer:
                assert not rollout.correct
    return rates


def check_dataset_rows(dataset: Path, rates: dict[str, float], policy: str, rollouts: int) -> None:
    """The `questions` and `rl` configs carry the stage's rate, the policy that measured it and k."""
    questions = rows(dataset, "questions")
    assert {q["question_id"]: q["pass_rate"] for q in questions} == rates
    assert {(q["pass_rate_policy"], q["pass_rate_rollouts"]) for q in questions} == {(policy, rollouts)}
    prompts = rows(dataset, "rl")  # every question: these runs select with the band [0, 1]
    assert {p["question_id"]: p["pass_rate"] for p in prompts} == rates
    assert {(p["pass_rate_policy"], p["pass_rate_rollouts"]) for p in prompts} == {(policy, rollouts)}
    assert f"`{policy}`" in (dataset / "README.md").read_text()


@pytest.fixture(scope="module")
def small_run(small_dataset_run):
    questions = list(read_records(Question, small_dataset_run / "questions" / "questions"))
    return small_dataset_run, questions


def test_the_naive_policy_measures_the_rates_and_the_dataset_names_it(small_run, tmp_path):
    run, questions = small_run
    config = load_config(str(SMALL_CONFIG), {"out": str(tmp_path), "difficulty.policy": "naive",
                                             "difficulty.rollouts": 2, "difficulty.questions_per_unit": 3})
    manifest = run_difficulty(run / "questions", run / "index", tmp_path / "naive", config.difficulty)
    assert read_manifest(tmp_path / "naive").engines == {"policy": "naive:function_calling"}
    results = results_of(tmp_path / "naive")
    assert {(r.policy, r.framework, r.engine, r.model) for r in results} == {("naive", "function_calling", "offline", None)}
    rates = check_rates(results, questions, rollouts=2)
    assert manifest.counts["questions"] == manifest.counts["questions_in"] == len(questions)
    assert manifest.counts["rollouts"] == 2 * len(questions)
    assert manifest.counts["correct_rollouts"] == sum(2 * rate for rate in rates.values())
    titles = {str(p.page_id): p.title for p in SearchEnvironment.load(run / "index").pages}
    for result in results:  # the naive searcher's one search and its answer, a title it retrieved
        for rollout in result.rollouts:
            assert rollout.tool_call_counts.get("search") == 1
            if rollout.final_answer != "unknown":
                assert rollout.final_answer in {titles[d] for d in rollout.retrieved_docids}
    assert {qid: p.rate for qid, p in read_pass_rates(tmp_path / "naive").items()} == rates

    # the same seed, other work units: the same records
    again = config.difficulty.model_copy(update={"questions_per_unit": 16})
    run_difficulty(run / "questions", run / "index", tmp_path / "naive-again", again)
    assert [r.model_dump() for r in results_of(tmp_path / "naive-again")] == [r.model_dump() for r in results]

    # the dataset stage over the run's other stages, with this difficulty folder
    dirs = {**stage_dirs(run), "difficulty": tmp_path / "naive", "dataset": tmp_path / "dataset"}
    build_dataset(config, dirs)
    check_dataset_rows(tmp_path / "dataset", rates, "naive:function_calling", 2)


def llm_config(base_url: str) -> DifficultyConfig:
    """The recorded policy episodes' settings (tests/llm_replay.py), so every reply matches its request."""
    return DifficultyConfig(policy="llm", framework=FRAMEWORK, role=policy_role(base_url, FRAMEWORK),
                            rollouts=POLICY_EPISODES["rollouts"], max_turns=POLICY_EPISODES["max_turns"],
                            seed=POLICY_EPISODES["seed"], questions_per_unit=2)


def run_llm_difficulty(snapshot: Path, out: Path) -> tuple[DifficultyConfig, Replay]:
    replay = Replay(load())
    with OpenAIServer(replay) as server:
        config = llm_config(server.base_url)
        run_difficulty(snapshot / "questions", snapshot / "index", out, config, out.parent / f"{out.name}-cache")
    return config, replay


def test_the_llm_policy_measures_the_rates_against_the_recorded_model_end_to_end(tmp_path):
    snapshot = make_snapshot(tmp_path / "snapshot")
    questions = list(read_records(Question, snapshot / "questions" / "questions"))
    config, replay = run_llm_difficulty(snapshot, tmp_path / "llm")
    assert set(replay.matched) == {"request"}  # the stage sent exactly the recorded requests
    policy = f"llm:{FRAMEWORK}:{MODEL}"
    assert read_manifest(tmp_path / "llm").engines == {"policy": policy}
    results = results_of(tmp_path / "llm")
    served = {e["model"] for e in load() if e["role"] == f"policy:{FRAMEWORK}" and e.get("model")}
    for result in results:  # each record names the engine that acted and the model its server reported
        assert (result.policy, result.framework) == ("llm", FRAMEWORK)
        assert result.engine == f"openai:{MODEL}" and result.model in served
    rates = check_rates(results, questions, rollouts=config.rollouts)
    assert sum(r.searches for q in results for r in q.rollouts) > 0  # the model's calls ran in the index

    # the same seed again, from a fresh replay and an empty cache: the same records
    run_llm_difficulty(snapshot, tmp_path / "llm-again")
    assert [r.model_dump() for r in results_of(tmp_path / "llm-again")] == [r.model_dump() for r in results]

    # the dataset stage reads the rates and names the LLM policy (hand-made judged trajectories stand in)
    fixture = write_upstream(tmp_path / "fixture", questions, [make_judged(q) for q in questions])
    dirs = {**stage_dirs(tmp_path / "run"), "questions": snapshot / "questions", "index": snapshot / "index",
            "difficulty": tmp_path / "llm", "judge": fixture["judge"]}
    build_dataset(load_config(None, {"out": str(tmp_path / "run"), "rl_pass_band": [0.0, 1.0],
                                     "difficulty": config.model_dump()}), dirs)
    check_dataset_rows(dirs["dataset"], rates, policy, config.rollouts)
