"""`hopsmith eval`: every question gets a result, and the summary's figures are recomputed here from the
result records by a separate reading of their definitions."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from cli.main import main
from ground.io import read_records
from schemas.questions import Question
from synth.environment import SearchEnvironment
from synth.evaluation import (
    EvalSettings,
    evaluate,
    evidence_docids,
    read_results,
    shows_answer,
    summarize,
    with_distractors,
)
from synth.matching import normalize_answer
from tests.llm_replay import POLICY_EPISODES, Replay, load, policy_role
from tests.servers import OpenAIServer, Reply
from tests.trajectory_fixtures import make_snapshot

SAMPLE_QUESTIONS = 6


def recomputed(results) -> dict:
    """The summary's figures from the records, computed without `synth.evaluation`."""
    rollouts = [r for q in results for r in q.rollouts]
    correct_share = [sum(r.correct for r in q.rollouts) / len(q.rollouts) for q in results]
    by_hops = defaultdict(list)
    for q, share in zip(results, correct_share, strict=True):
        by_hops[str(q.hops)].append(share)
    recalls = [len(set(r.retrieved_docids) & set(q.evidence_docids)) / len(set(q.evidence_docids))
               for q in results if q.evidence_docids for r in q.rollouts]
    seen = [r for r in rollouts if r.turns_to_answer_seen is not None]
    return {
        "pass@1": sum(correct_share) / len(results),
        "pass@k": sum(1 for q in results if any(r.correct for r in q.rollouts)) / len(results),
        "by_hops": {h: sum(v) / len(v) for h, v in by_hops.items()},
        "evidence_recall": sum(recalls) / len(recalls) if recalls else None,
        "unfinished": sum(1 for r in rollouts if r.status != "completed") / len(rollouts),
        "answered_before_search": sum(1 for r in rollouts if r.answered_before_search) / len(rollouts),
        "turns_to_answer_seen": sum(r.turns_to_answer_seen for r in seen) / len(seen) if seen else None,
        "searches": sum(r.tool_call_counts.get("search", 0) for r in rollouts) / len(rollouts),
    }


def check_summary(results, summary) -> None:
    expected = recomputed(results)
    for key in ("pass@1", "pass@k", "evidence_recall", "unfinished", "answered_before_search", "turns_to_answer_seen"):
        assert summary[key] == pytest.approx(expected[key]), key
    assert {h: v["pass@1"] for h, v in summary["by_hops"].items()} == pytest.approx(expected["by_hops"])
    assert summary["tool_calls_per_rollout"].get("search", 0) == pytest.approx(expected["searches"])


@pytest.fixture(scope="module")
def sample(small_dataset_run):
    questions = sorted(read_records(Question, small_dataset_run / "questions" / "questions"), key=lambda q: q.question_id)
    return questions[:SAMPLE_QUESTIONS], SearchEnvironment.load(small_dataset_run / "index")


@pytest.mark.parametrize("policy", ["offline", "naive"])
def test_eval_of_the_sample_has_a_result_for_every_question_and_a_summary_the_records_reproduce(sample, policy):
    questions, env = sample
    results = evaluate(questions, env, EvalSettings(policy=policy, rollouts=2, max_turns=24))
    assert [r.query_id for r in results] == [q.question_id for q in questions]
    by_id = {q.question_id: q for q in questions}
    for result in results:
        question = by_id[result.query_id]
        assert len(result.rollouts) == 2 and result.evidence_docids and result.gold_docids
        pages = {str(p.page_id) for p in env.pages}
        assert set(result.evidence_docids) <= pages and set(result.gold_docids) <= pages
        for rollout in result.rollouts:
            assert rollout.result[0].output == (rollout.final_answer or "")
            golds = {normalize_answer(g) for g in (question.answer, *question.aliases)}
            if rollout.final_answer and normalize_answer(rollout.final_answer) in golds:
                assert rollout.correct  # an exact answer is always graded correct
            if rollout.correct:  # a right answer was shown to the agent before it was given
                assert rollout.turns_to_answer_seen is not None and rollout.turns_to_answer_seen < rollout.turns
    check_summary(results, summarize(results))
    if policy == "naive":  # one search, one page, then the answer: the title of a retrieved page
        titles = {str(p.page_id): p.title for p in env.pages}
        for result in results:
            for rollout in result.rollouts:
                assert rollout.tool_call_counts.get("search") == 1 and rollout.turns <= 3
                if rollout.final_answer != "unknown":
                    assert rollout.final_answer in {titles[d] for d in rollout.retrieved_docids}


def test_shows_answer_matches_whole_words_only():
    assert shows_answer("Born in Chicago, Illinois.", ["Chicago"])
    assert not shows_answer("Born in Chicagoland.", ["Chicago"])
    assert not shows_answer(None, ["Chicago"])


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return make_snapshot(tmp_path_factory.mktemp("eval"))


def test_the_eval_command_writes_results_a_summary_and_browsecomp_plus_run_files(snapshot, tmp_path):
    out = tmp_path / "eval"
    assert main(["eval", "--questions", str(snapshot / "questions"), "--index", str(snapshot / "index"),
                 "--out", str(out), "--policy", "offline", "-k", "2"]) == 0
    results = read_results(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == len(results) == 4 and summary["settings"]["policy"] == "offline"
    check_summary(results, summary)
    for result in results:  # the fields BrowseComp-Plus's evaluator reads, with their types
        run = json.loads((out / "runs" / f"run_{result.query_id}.json").read_text())
        assert run["query_id"] == result.query_id and isinstance(run["status"], str)
        assert all(isinstance(d, str) for d in run["retrieved_docids"])
        assert all(isinstance(n, int) for n in run["tool_call_counts"].values())
        assert run["result"][-1]["type"] == "output_text"
        assert run["result"][-1]["output"] == (result.rollouts[0].final_answer or "")
    assert main(["eval", "--questions", str(snapshot / "questions"), "--index", str(snapshot / "index"),
                 "--out", str(out), "--policy", "llm"]) == 2  # no endpoint: a clear error
    assert main(["eval", "--questions", str(snapshot / "questions"), "--index", str(snapshot / "index"),
                 "--out", str(out), "--max-questions", "1", "-k", "1"]) == 0
    assert [p.name for p in (out / "runs").iterdir()] == [f"run_{results[0].query_id}.json"]  # none left over


def test_eval_runs_the_llm_policy_on_the_recorded_real_model_transcript(snapshot):
    """The stage-3 replay's episodes, driven through eval: the same prompts, so the recorded replies match."""
    framework = "tagged"  # the recorded model searched, read and answered (before searching, too) here
    replay = Replay(load())
    questions = list(read_records(Question, snapshot / "questions" / "questions"))
    with OpenAIServer(replay) as server:
        settings = EvalSettings(policy="llm", framework=framework, rollouts=POLICY_EPISODES["rollouts"],
                                max_turns=POLICY_EPISODES["max_turns"], seed=POLICY_EPISODES["seed"],
                                role=policy_role(server.base_url, framework))
        results = evaluate(questions, SearchEnvironment.load(snapshot / "index"), settings)
    assert len(results) == len(questions)
    assert all(len(r.rollouts) == POLICY_EPISODES["rollouts"] and r.engine.startswith("openai") for r in results)
    assert set(replay.matched) == {"request"}  # every reply matched its recorded request exactly
    summary = summarize(results)
    check_summary(results, summary)
    assert summary["tool_calls_per_rollout"]["search"] > 0 and summary["answered_before_search"] > 0


def test_unknown_policy_is_refused(snapshot):
    with pytest.raises(ValueError, match="unknown eval policy"):
        evaluate([], SearchEnvironment.load(Path(snapshot) / "index"), EvalSettings(policy="oracle"))


def test_the_pass_band_keeps_exactly_the_questions_whose_rate_is_in_it(snapshot, tmp_path):
    out = tmp_path / "band"
    assert main(["eval", "--questions", str(snapshot / "questions"), "--index", str(snapshot / "index"),
                 "--out", str(out), "--policy", "offline", "-k", "3", "--pass-band", "0.3", "1.0"]) == 0
    results = read_results(out)
    selected = (out / "pass_band.txt").read_text().split()
    assert selected == [r.query_id for r in results if 0.3 <= sum(x.correct for x in r.rollouts) / 3 <= 1.0]
    assert json.loads((out / "summary.json").read_text())["pass_band"]["selected"] == len(selected)
    assert main(["eval", "--questions", str(snapshot / "questions"), "--index", str(snapshot / "index"),
                 "--out", str(out), "--pass-band", "0.9", "0.1"]) == 2


def test_the_distractor_knob_keeps_the_path_pages_and_adds_the_ratio_of_others(snapshot, tmp_path):
    env = SearchEnvironment.load(snapshot / "index")
    questions = list(read_records(Question, snapshot / "questions" / "questions"))
    path = {d for q in questions for d in evidence_docids(q, env)}
    gold_only = with_distractors(env, questions, 0.0)
    assert {str(p.page_id) for p in gold_only.pages} == path
    doubled = with_distractors(env, questions, 1.0)
    assert path < {str(p.page_id) for p in doubled.pages} and len(doubled.pages) == min(2 * len(path), len(env.pages))
    assert [h.title for h in gold_only.search("Michelle Obama")][0] == "Michelle Obama"
    out = tmp_path / "sweep"
    assert main(["eval", "--questions", str(snapshot / "questions"), "--index", str(snapshot / "index"),
                 "--out", str(out), "--policy", "naive", "-k", "1", "--distractors", "0", "1"]) == 0
    sweep = json.loads((out / "distractors.json").read_text())
    assert set(sweep) == {"full index", "0", "1"} and sweep["0"]["pages"] == len(path)
    for ratio in ("0", "1"):
        results = read_results(out / f"distractors-{ratio}")
        assert len(results) == len(questions)
        assert sweep[ratio]["pass@1"] == pytest.approx(recomputed(results)["pass@1"])


def test_an_llm_answer_judge_is_optional_and_its_agreement_with_the_matcher_is_reported(snapshot, tmp_path):
    prompts = []

    def judge(body):  # says yes to everything, except that it hedges once
        prompts.append(body["messages"][-1]["content"])
        return Reply(content="Hard to say." if len(prompts) == 1 else "Same entity.\ncorrect: yes")

    out = tmp_path / "judged"
    with OpenAIServer(judge) as server:
        assert main(["eval", "--questions", str(snapshot / "questions"), "--index", str(snapshot / "index"),
                     "--out", str(out), "--policy", "naive", "-k", "1", "--judge-base-url", server.base_url,
                     "--judge-model", "m", "--judge-api-key-env", "HOPSMITH_TEST_KEY"]) == 0
    rollouts = [r for q in read_results(out) for r in q.rollouts]
    answered = [r for r in rollouts if r.final_answer]
    assert len(prompts) == len(answered) and all("Correct answer:" in p for p in prompts)
    verdicts = [r for r in answered if r.judge_correct is not None]
    assert len(verdicts) == len(answered) - 1 and all(r.judge_correct for r in verdicts)
    figures = json.loads((out / "summary.json").read_text())["judge"]
    assert figures["unparsed"] == 1 and figures["judged"] == len(verdicts)
    assert figures["agreement_with_matcher"] == pytest.approx(sum(r.correct for r in verdicts) / len(verdicts))
