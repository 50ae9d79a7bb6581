"""Difficulty in the data: the `questions` config's pass rate is the eval policy's share of correct rollouts,
the card's histogram counts what the shards hold, and the `rl` config keeps exactly the questions whose rate
lies in the pass band. Each figure is recounted here from the records, without `synth.difficulty`."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq
import pytest

from cli.main import main
from ground.errors import UserError
from ground.io import read_manifest, read_records
from pipeline.dataset import build_dataset, load_config
from pipeline.validate import validate_dataset
from rl.data import read_prompts
from schemas.config import DatasetConfig
from schemas.evaluation import QuestionResult
from schemas.questions import Question
from synth import difficulty
from synth.environment import SearchEnvironment
from synth.evaluation import EvalSettings, evaluate
from tests.conftest import SMALL_CONFIG
from tests.dataset_fixtures import sample_records, write_upstream

EDGES = ["0", "(0, 0.25]", "(0.25, 0.5]", "(0.5, 0.75]", "(0.75, 1)", "1"]


def rows(dataset, config: str) -> list[dict]:
    return [row for path in sorted((dataset / "data" / config).glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def bucket(rate: float) -> str:
    """The card's columns, read off their labels: 0, quarters open below and closed above, then 1."""
    if rate == 0:
        return EDGES[0]
    if rate == 1:
        return EDGES[-1]
    return EDGES[min(4, int(-(-rate // 0.25)))]


def card_histogram(card: str) -> dict[str, list[int]]:
    """The difficulty table of a card: hop count (or `all`) -> questions per column, last the row's total."""
    lines = card[card.index("| hops | 0 |"):].splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == ["hops", *EDGES, "questions"]
    table = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[0]] = [int(c) for c in cells[1:]]
    return table


def test_the_rate_column_is_the_eval_policys_share_of_correct_rollouts(small_dataset_run):
    config = load_config(str(SMALL_CONFIG), {"out": str(small_dataset_run)})
    questions = rows(small_dataset_run / "dataset", "questions")
    results = {r.query_id: r for r in read_records(QuestionResult, small_dataset_run / "difficulty" / "results")}
    assert questions and {q["question_id"] for q in questions} == set(results)
    for row in questions:
        rollouts = results[row["question_id"]].rollouts
        assert row["pass_rate"] == sum(1 for r in rollouts if r.correct) / len(rollouts)
        assert row["pass_rate_rollouts"] == len(rollouts) == config.difficulty.rollouts
        assert row["pass_rate_policy"] == "offline:function_calling"
    # the rate is the honest offline searcher's: solving the questions again outside the stage gives it
    env = SearchEnvironment.load(small_dataset_run / "index")
    originals = list(read_records(Question, small_dataset_run / "questions" / "questions"))
    settings = EvalSettings(policy="offline", framework="function_calling", rollouts=config.difficulty.rollouts,
                            max_turns=config.difficulty.max_turns, seed=config.seed)
    again = {r.query_id: sum(x.correct for x in r.rollouts) / len(r.rollouts) for r in evaluate(originals, env, settings)}
    assert {q["question_id"]: q["pass_rate"] for q in questions} == again


def test_the_cards_histogram_counts_equal_a_recount_of_the_shards(small_dataset_run):
    dataset = small_dataset_run / "dataset"
    card = (dataset / "README.md").read_text()
    recount: dict[str, Counter] = {}
    for row in rows(dataset, "questions"):
        for key in (str(row["hops"]), "all"):
            recount.setdefault(key, Counter())[bucket(row["pass_rate"])] += 1
    expected = {key: [counts[e] for e in EDGES] + [sum(counts.values())] for key, counts in recount.items()}
    assert card_histogram(card) == expected
    assert "`offline:function_calling`" in card and "honest searcher with no injected errors" in card
    assert "pass rate is in [0, 1]" in card  # the small config's band, named


@pytest.fixture(scope="module")
def graded():
    """12 hand-made questions whose difficulty rollouts give every bucket and both ends: 0, 1/4, ..., 1."""
    questions, judged = sample_records()
    correct = {q.question_id: [i < q_index % 5 for i in range(4)] for q_index, q in enumerate(questions)}
    return questions, judged, correct


@pytest.mark.parametrize("band", [None, (0.25, 0.5), (0.0, 1.0), (1.0, 1.0)])
def test_the_pass_band_keeps_exactly_the_questions_whose_recorded_rate_is_in_it(graded, band, tmp_path):
    questions, judged, correct = graded
    dirs = write_upstream(tmp_path, questions, judged, correct)
    manifest = build_dataset(DatasetConfig(out=str(tmp_path), test_fraction=0.25, rl_pass_band=band), dirs)
    dataset = dirs["dataset"]
    recorded = {row["question_id"]: row["pass_rate"] for row in rows(dataset, "questions")}
    assert recorded == {qid: sum(flags) / 4 for qid, flags in correct.items()}
    inside = {qid for qid, rate in recorded.items() if (0 < rate < 1 if band is None else band[0] <= rate <= band[1])}
    assert {row["question_id"] for row in rows(dataset, "rl")} == inside
    # an rl row carries its question's rate, the policy that measured it and k
    assert {row["question_id"]: (row["pass_rate"], row["pass_rate_policy"], row["pass_rate_rollouts"])
            for row in rows(dataset, "rl")} == {qid: (recorded[qid], "offline:function_calling", 4) for qid in inside}
    # `hopsmith rl --pass-band` selects from the `questions` config and renders what the dataset stage renders
    selected = read_prompts(dataset, pass_band=band or (0.25, 0.75))
    expected = inside if band else {qid for qid, rate in recorded.items() if 0.25 <= rate <= 0.75}
    assert {p.question_id for p in selected} == expected
    as_built = {p.question_id: p.model_dump() for p in read_prompts(dataset)}
    assert all(p.model_dump() == as_built[p.question_id] for p in selected if p.question_id in as_built)
    assert manifest.counts.get("skipped:rl_outside_pass_band", 0) == len(questions) - len(inside)
    card = (dataset / "README.md").read_text()
    assert f"The `rl` config keeps the {len(inside)} questions" in card
    assert validate_dataset(dataset).errors == []  # the validator reads the rate columns as part of the schema


def test_the_difficulty_stage_resumes_its_finished_units_and_is_deterministic(small_dataset_run, tmp_path, monkeypatch):
    config = load_config(str(SMALL_CONFIG), {"out": str(small_dataset_run)}).difficulty.model_copy(
        update={"questions_per_unit": 5})
    out = tmp_path / "difficulty"
    real_write = difficulty.write_table
    questions, index = small_dataset_run / "questions", small_dataset_run / "index"

    def fail(*args, **kwargs):
        raise OSError("disk full")

    solved = []
    real = difficulty.evaluate
    monkeypatch.setattr(difficulty, "evaluate", lambda qs, *a, **k: solved.append(len(qs)) or real(qs, *a, **k))
    monkeypatch.setattr(difficulty, "write_table", fail)  # every unit is written, then the merge fails
    with pytest.raises(OSError, match="disk full"):
        difficulty.run_difficulty(questions, index, out, config)
    count = len(list(read_records(Question, questions / "questions")))
    units = sorted([5] * (count // 5) + ([count % 5] if count % 5 else []))
    assert sorted(solved) == units  # the questions in units of 5, each unit solved once
    monkeypatch.setattr(difficulty, "write_table", real_write)
    manifest = difficulty.run_difficulty(questions, index, out, config)
    assert sorted(solved) == units and manifest.counts["questions"] == manifest.counts["questions_in"] == count
    results = lambda folder: [r.model_dump() for r in read_records(QuestionResult, folder / "results")]  # noqa: E731
    # other units than the run's (5 questions, not 16), the same records in the same order
    assert results(out) == results(small_dataset_run / "difficulty")
    assert read_manifest(out).engines == {"policy": "offline:function_calling"}


def test_a_reversed_pass_band_is_refused_before_any_stage_runs(tmp_path):
    assert main(["dataset", "--out", str(tmp_path / "out"), "--pass-band", "0.9", "0.1"]) == 2
    assert not (tmp_path / "out").exists()


def test_without_difficulty_the_rate_is_absent_and_every_question_is_an_rl_prompt(graded, tmp_path):
    questions, judged, correct = graded
    dirs = write_upstream(tmp_path, questions, judged, correct)
    build_dataset(DatasetConfig(out=str(tmp_path), difficulty={"enabled": False}), dirs)
    dataset = dirs["dataset"]
    assert {(row["pass_rate"], row["pass_rate_policy"]) for row in rows(dataset, "questions")} == {(None, None)}
    assert len(rows(dataset, "rl")) == len(questions)
    assert {(row["pass_rate"], row["pass_rate_rollouts"]) for row in rows(dataset, "rl")} == {(None, None)}
    with pytest.raises(UserError, match="measured no pass rates"):  # nothing for `rl --pass-band` to select by
        read_prompts(dataset, pass_band=(0.0, 1.0))
    assert "## Difficulty" not in (dataset / "README.md").read_text()
