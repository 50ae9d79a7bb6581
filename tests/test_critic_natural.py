"""The critic measured on errors nobody injected: the natural labelled set, built and reported here."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from critic.calibration import load_labelled
from critic.labelling import label_turn
from critic.report import labelled_report
from pipeline.cli import main
from schemas.config import JudgeConfig
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from tests.data.build_critic_natural import build
from tests.trajectory_fixtures import QUESTIONS

# Kinds the offline critic can give that the set's uninjected rollouts produce. The real model (few-shot
# react and tagged policies write calls that parse; function_calling never does) gives malformed_call,
# unsupported_claim, tool_error (pages it made up), repeated_call, empty_result and wrong_answer; the
# offline searchers give the rest. Absent: unmotivated_action (the model's calls that do not follow from
# their reasoning, "Thought: The answer is 1943." then open_page, plan no step, so rule 8 leaves them to
# unsupported_claim; the offline searchers' calls follow their reasoning; rule 8 is tested below), and the
# LLM judge's own not_sensible and unsound_reasoning.
NATURAL_KINDS = ("malformed_call", "tool_error", "repeated_call", "empty_result", "off_path_detour",
                 "redundant_turn", "unsupported_claim", "wrong_answer")
REAL_MODEL_KINDS = ("malformed_call", "unsupported_claim", "tool_error", "repeated_call", "empty_result",
                    "wrong_answer")


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
    assert all(kinds[k] >= 1 for k in NATURAL_KINDS), kinds
    assert sum(all(r.expected_pass.values()) for r in rows) >= 100
    assert not any(t.injected_error for row in rows for t in row.trajectory.turns)
    assert {row.trajectory.policy for row in rows} == {"llm", "scripted", "naive"}
    real = [row for row in rows if row.trajectory.policy == "llm"]  # the recorded model's episodes, replayed
    assert len(real) >= 50 and {row.trajectory.model for row in real} == {"gemma-3-270m"}
    assert {(row.trajectory.framework, row.trajectory.rollout) for row in real} == {
        (framework, rollout) for framework in ("react", "function_calling", "tagged") for rollout in (0, 1)}
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


def test_the_reviewer_rules_label_an_unmotivated_call_and_take_no_pronoun_for_a_name():
    question = QUESTIONS[0]

    def labelled(reasoning: str, name: str, arguments: dict) -> list[str]:
        call = ToolCall(call_id="c0", name=name, arguments=arguments)
        turn = Turn(index=0, reasoning=reasoning, tool_call=call, observation="No results for that.")
        trajectory = Trajectory(trajectory_id="t", question_id=question.question_id, question=question.text,
                                answer=question.answer, as_of=question.as_of, framework="tagged", policy="test",
                                engine="test", seed=0, stop_reason="max_turns", turns=[turn],
                                outcome=Outcome(exact_match=False, f1=0.0, correct=False))
        return label_turn(question, trajectory, 0)[1]

    assert "unmotivated_action" in labelled("I will look up the director.", "search", {"query": "Zanzibar"})
    assert "unmotivated_action" in labelled("I will now give the answer.", "open_page", {"title": "Zanzibar"})
    assert "unmotivated_action" not in labelled("I will search for Zanzibar.", "search", {"query": "Zanzibar"})
    assert "unsupported_claim" not in labelled("You may call one function per turn.", "search", {"query": "x y"})
