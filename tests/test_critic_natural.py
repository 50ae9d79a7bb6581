"""The critic measured on errors nobody injected: the natural labelled set, built and reported here."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from cli.main import main
from critic.calibration import load_labelled
from critic.labelling import label_turn
from critic.report import labelled_report
from critic.scoring import judge_turns
from schemas.config import JudgeConfig
from schemas.critic import FAILURE_KINDS
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from tests.data.build_critic_natural import build
from tests.llm_replay import POLICY_EPISODES
from tests.trajectory_fixtures import QUESTIONS

# Every failure kind the critic can give (schemas.critic.FAILURE_KINDS) occurs in the set's uninjected
# rollouts. The real model (few-shot react and tagged policies write calls that parse; function_calling
# never does) gives malformed_call, not_sensible (pages it made up: "The University of Cambridge"),
# tool_error, repeated_call, empty_result, unsupported_claim, unmotivated_action ("The answer is 1943." and
# a page opened; "I will search for him." and a page opened), unsound_reasoning (a new answer each turn with
# no result in between) and wrong_answer; the offline searchers give the rest.
REAL_MODEL_KINDS = ("malformed_call", "not_sensible", "tool_error", "repeated_call", "empty_result",
                    "unsupported_claim", "unmotivated_action", "unsound_reasoning", "wrong_answer")


@pytest.fixture(scope="module")
def natural(tmp_path_factory):
    folder = tmp_path_factory.mktemp("natural")
    path = folder / "critic_natural.jsonl"
    build(path, folder / "work")
    return path


def test_the_natural_set_is_large_has_every_kind_and_no_injected_turn(natural):
    rows = load_labelled(natural)
    assert len(rows) >= 150
    kinds = Counter(k for row in rows for k in row.expected_kinds)
    # `ungrounded` is measured on a reviewer's labels of the sample's rollouts (tests/test_critic_reviewed.py)
    assert set(kinds) == set(FAILURE_KINDS) - {"ungrounded"}, set(FAILURE_KINDS) - set(kinds)
    assert sum(all(r.expected_pass.values()) for r in rows) >= 100
    assert not any(t.injected_error for row in rows for t in row.trajectory.turns)
    assert {row.trajectory.policy for row in rows} == {"llm", "scripted", "naive"}
    real = [row for row in rows if row.trajectory.policy == "llm"]  # the recorded model's episodes, replayed
    assert len(real) >= 50 and {row.trajectory.model for row in real} == {"gemma-3-270m"}
    assert {(row.trajectory.framework, row.trajectory.rollout) for row in real} == {
        (framework, rollout) for framework in ("react", "function_calling", "tagged")
        for rollout in range(POLICY_EPISODES["rollouts"])}
    assert set(REAL_MODEL_KINDS) <= {k for row in real for k in row.expected_kinds}
    parsed = {row.trajectory.framework for row in real
              if row.trajectory.turns[row.turn_index].tool_call is not None}
    assert parsed == {"react", "tagged"}  # the few-shot policies' calls parse
    scripted = [row for row in rows if row.trajectory.policy == "scripted"]
    assert sum(all(r.expected_pass.values()) for r in scripted) < len(scripted)  # it errs without injection too


def test_the_critic_reaches_085_per_criterion_on_the_natural_set(natural, tmp_path):
    report = labelled_report(natural, JudgeConfig())
    (tmp_path / "critic_natural_report.txt").write_text(report.format())
    print(report.format())
    for name, counts in {"verdict": report.verdict, **report.criteria}.items():
        assert counts.support > 0, name
        assert counts.precision >= 0.85 and counts.recall >= 0.85, (name, counts)


def test_critic_report_covers_both_sets(natural, tmp_path, capsys):
    out = tmp_path / "report.json"
    hand = "tests/data/critic_labelled.jsonl"
    assert main(["critic-report", "--labelled", hand, "--labelled", str(natural), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("critic calibration:") == 2 and str(natural) in printed and hand in printed
    reports = json.loads(out.read_text())
    assert [r["turns"] for r in reports][1] == len(load_labelled(natural))


MICHELLE_PAGE = ("Michelle Obama - page 1 of 1.\n\nBirth date: 17 January 1964\nBirth place: Chicago, Illinois, U.S.\n"
                 "Spouse: Barack Obama (m. 1992)\nAlma mater: Princeton University, Harvard Law School")
BARACK_PAGE = "Barack Obama - page 1 of 1.\n\nBirth place: Honolulu, Hawaii, U.S.\nSpouse: Michelle Obama (m. 1992)"
NO_PAGE = "Error: no page titled '{}'. Use search to find the exact title."
READ_MICHELLE = ("I will open Michelle Obama.", "open_page", {"title": "Michelle Obama"}, MICHELLE_PAGE)


def both_verdicts(*steps: tuple) -> tuple[list[str], list[str]]:
    """(reviewer rules' kinds, offline critic's kinds) of the last of `steps` (reasoning, tool, arguments,
    observation) on the snapshot's first question; an observation starting "Error:" is a tool error."""
    question = QUESTIONS[0]
    turns = [Turn(index=i, reasoning=reasoning, tool_call=ToolCall(call_id=f"c{i}", name=name, arguments=arguments),
                  observation=observation, tool_error=observation.startswith("Error:"),
                  final_answer=arguments.get("text") if name == "answer" else None)
             for i, (reasoning, name, arguments, observation) in enumerate(steps)]
    trajectory = Trajectory(trajectory_id="t", question_id=question.question_id, question=question.text,
                            answer=question.answer, as_of=question.as_of, framework="tagged", policy="test",
                            engine="test", seed=0, stop_reason="max_turns", turns=turns,
                            outcome=Outcome(exact_match=False, f1=0.0, correct=False))
    critic = judge_turns(trajectory, question, JudgeConfig())[-1].failure_kinds
    return label_turn(question, trajectory, len(turns) - 1)[1], critic


@pytest.mark.parametrize(("steps", "kind", "expected"), [
    # not sensible: a query without content, an echo of our instructions, a made-up title
    ([("Let me search.", "search", {"query": "the of what"}, "No results for 'the of what'.")], "not_sensible", True),
    ([("", "search", {"query": "You are a research agent that answers questions"}, "No results.")], "not_sensible", True),
    ([("", "search", {"query": QUESTIONS[0].text}, "No results.")], "not_sensible", False),  # a plain first search
    ([("The 44th president lived in Philadelphia.", "open_page", {"title": "Philadelphia"},
       NO_PAGE.format("Philadelphia"))], "not_sensible", True),
    ([READ_MICHELLE, ("I will open Barack Obama.", "open_page", {"title": "Barack Obamma"},
                      NO_PAGE.format("Barack Obamma"))], "tool_error", True),  # a slip of a name shown: an error
    ([("I will open the president's page.", "open_page", {"title": "U.S. President"}, NO_PAGE.format("U.S. President"))],
     "tool_error", True),  # the question names it
    ([("I will search for Michelle Obama.", "search", {"query": "Michelle Obama"}, "1. Michelle Obama\n   Spouse")],
     "not_sensible", False),
    # unmotivated: the plan names another tool, or the reasoning states the answer and plans nothing
    ([("I will search for him.", "open_page", {"title": "Michelle Obama"}, MICHELLE_PAGE)], "unmotivated_action", True),
    ([("The answer is 1943.", "open_page", {"title": "Michelle Obama"}, MICHELLE_PAGE)], "unmotivated_action", True),
    ([("The answer is the capital of the state where Michelle Obama was born.", "open_page",
       {"title": "Michelle Obama"}, MICHELLE_PAGE)], "unmotivated_action", False),  # a restated question
    ([("The answer is probably Chicago; let me open Michelle Obama to confirm.", "open_page",
       {"title": "Michelle Obama"}, MICHELLE_PAGE)], "unmotivated_action", False),
    ([("I will look up the director.", "search", {"query": "Zanzibar"}, "No results.")], "unmotivated_action", True),
    ([("I will now give the answer.", "open_page", {"title": "Zanzibar"}, "No results.")], "unmotivated_action", True),
    ([("I will search for Zanzibar.", "search", {"query": "Zanzibar"}, "No results.")], "unmotivated_action", False),
    # unsound: a row of a page read given another value, or a new answer with nothing new in between
    ([READ_MICHELLE, ("Michelle Obama was born in Princeton. I will search for Princeton.", "search",
                      {"query": "Princeton"}, "1. Princeton University\n   A university.")], "unsound_reasoning", True),
    ([READ_MICHELLE, ("The spouse of Michelle Obama is Harvard Law School. I will open it.", "open_page",
                      {"title": "Harvard Law School"}, "Harvard Law School - page 1 of 1.")], "unsound_reasoning", True),
    ([READ_MICHELLE, ("Michelle Obama was born on January 17, 1964, in Chicago. I will answer.", "answer",
                      {"text": "Chicago"}, "Final answer submitted: Chicago")], "unsound_reasoning", False),
    ([READ_MICHELLE, ("The birth place of Michelle Obama is Chicago. I will answer.", "answer", {"text": "Chicago"},
                      "Final answer submitted: Chicago")], "unsound_reasoning", False),
    ([("The answer is 1943.", "open_page", {"title": "Cambridge"}, NO_PAGE.format("Cambridge")),
      ("The answer is 1987.", "open_page", {"title": "Cambridge"}, NO_PAGE.format("Cambridge"))], "unsound_reasoning", True),
    ([("The answer is 1943.", "open_page", {"title": "Michelle Obama"}, MICHELLE_PAGE),
      ("The answer is Chicago.", "answer", {"text": "Chicago"}, "Final answer submitted: Chicago")],
     "unsound_reasoning", False),  # a result came in between
    ([("The answer is Chicago.", "answer", {"text": "Honolulu"}, "Final answer submitted: Honolulu")],
     "unsound_reasoning", True),
])
def test_reviewer_rules_and_critic_agree_on_the_new_kinds(steps, kind, expected):
    labelled, judged = both_verdicts(*steps)
    assert (kind in labelled, kind in judged) == (expected, expected), (labelled, judged)


def test_the_reviewer_rules_take_no_pronoun_for_a_name():
    labelled, _ = both_verdicts(("You may call one function per turn.", "search", {"query": "x y"}, "No results."))
    assert "unsupported_claim" not in labelled
