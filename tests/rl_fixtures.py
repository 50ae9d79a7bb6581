"""A small stage 5 dataset folder for RL tests: judged trajectories, rl prompts and questions, as shards.

Two rollouts per question: one that searches, reads and answers right (every turn passes the critic),
one that repeats a search (a failed turn) and answers wrong. Built from the schemas with the shared
writer, so the RL reader meets exactly what `make dataset` writes.
"""

from __future__ import annotations

from pathlib import Path

from ground.io import write_records
from pipeline.renders import render_rl
from rl.config import RLConfig, TinyModelConfig, preset_config
from schemas.critic import CriterionScore, JudgedTrajectory, TurnJudgement
from schemas.dataset import RLPrompt
from schemas.questions import Question
from schemas.trajectory import ToolCall, Trajectory, Turn
from synth.matching import match_answer
from tests.trajectory_fixtures import QUESTIONS

# (reasoning, tool, arguments, observation, passed, reward) per turn; the last step is the answer.
GOOD = {
    "q-spouse-birthplace": [
        ("The 44th president is Barack Obama; I need his spouse.", "search", {"query": "Barack Obama spouse"},
         "Results for 'Barack Obama spouse':\n1. Barack Obama\n   He married Michelle Obama in 1992.", True, 1.0),
        ("His spouse is Michelle Obama. Where was she born?", "open_page", {"title": "Michelle Obama"},
         "Michelle Obama - page 1 of 1.\n\nShe grew up on the South Side of Chicago.", True, 1.0),
        ("She was born in Chicago.", "answer", {"text": "Chicago"}, None, True, 1.0),
    ],
    "q-capital": [
        ("Michelle Obama was born in Chicago, which is in Illinois.", "open_page", {"title": "Illinois"},
         "Illinois - page 1 of 1.\n\nIllinois is a state in the Midwestern United States. Capital: Springfield.",
         True, 1.0),
        ("The capital of Illinois is Springfield.", "answer", {"text": "Springfield, Illinois"}, None, True, 1.0),
    ],
}
BAD = {
    "q-spouse-birthplace": [
        ("Search the president.", "search", {"query": "44th president"},
         "Results for '44th president':\n1. Barack Obama\n   the 44th president of the United States.", True, 0.6),
        ("Search again.", "search", {"query": "44th president"},
         "Results for '44th president':\n1. Barack Obama\n   the 44th president of the United States.", False, 0.0),
        ("He was born in Honolulu, so the answer is Honolulu.", "answer", {"text": "Honolulu"}, None, False, 0.0),
    ],
    "q-capital": [
        ("Illinois is large.", "search", {"query": "largest city"}, "No results for 'largest city'. Try other keywords.",
         False, 0.0),
        ("I guess Chicago.", "answer", {"text": "Chicago"}, None, False, 0.0),
    ],
}


def _score(passed: bool) -> CriterionScore:
    return CriterionScore(score=1.0 if passed else 0.0, passed=passed, rationale="fixture")


def judged_trajectory(question: Question, rollout: int, steps: list[tuple]) -> JudgedTrajectory:
    turns, judgements = [], []
    trajectory_id = f"{question.question_id}-r{rollout}"
    for index, (reasoning, tool, arguments, observation, passed, reward) in enumerate(steps):
        call = ToolCall(call_id=f"call_{index}", name=tool, arguments=arguments)
        answer = arguments["text"] if tool == "answer" else None
        turns.append(Turn(index=index, reasoning=reasoning, raw_output=reasoning, tool_call=call,
                          observation=observation, final_answer=answer))
        judgements.append(TurnJudgement(
            trajectory_id=trajectory_id, turn_index=index, tool_accuracy=_score(True),
            information_gain=_score(passed), logical_soundness=_score(passed), verdict=passed, reward=reward,
            loss_mask=int(passed), engine="fixture"))
    final = turns[-1].final_answer
    outcome = match_answer(final, question.answer, question.aliases)
    trajectory = Trajectory(
        trajectory_id=trajectory_id, question_id=question.question_id, question=question.text,
        answer=question.answer, aliases=question.aliases, as_of=question.as_of, framework="function_calling",
        policy="fixture", engine="fixture", seed=0, rollout=rollout, turns=turns, final_answer=final,
        stop_reason="answered", outcome=outcome)
    return JudgedTrajectory(trajectory=trajectory, judgements=judgements,
                            outcome_reward=1.0 if outcome.correct else 0.0)


def fixture_trajectories() -> list[JudgedTrajectory]:
    by_id = {q.question_id: q for q in QUESTIONS}
    return [judged_trajectory(by_id[qid], rollout, steps)
            for qid in GOOD for rollout, steps in enumerate((GOOD[qid], BAD[qid]))]


def make_dataset(root: Path, environment: str = "fixture-index") -> Path:
    """Write `root/data/{trajectories,rl,questions}/train-00000-of-00001.parquet` like stage 5 does."""
    shard = "train-00000-of-00001.parquet"
    questions = [q for q in QUESTIONS if q.question_id in GOOD]
    write_records(JudgedTrajectory, fixture_trajectories(), root / "data" / "trajectories" / shard)
    write_records(RLPrompt, [render_rl(q, environment) for q in questions], root / "data" / "rl" / shard)
    write_records(Question, questions, root / "data" / "questions" / shard)
    return root


TINY = TinyModelConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048)


def fast_config(**overrides) -> RLConfig:
    """Both RL modes in seconds on a CPU: the tiny model, two offline steps, one online step."""
    # `penalty`: the random policy's failed turns still train (with the penalty reward), so KL is measured
    return preset_config("tiny-cpu", tiny=TINY.model_dump(), offline_steps=2, online_steps=1, prompts_per_step=2,
                         group_size=2, max_turns=2, max_new_tokens=16, max_len=1024, failed_turns="penalty",
                         **overrides)
