"""The offline critic against a reviewer who did not write its rules: per-turn verdicts on the sample's rollouts
(tests/data/README_critic_reviewed.md says who labelled them and how)."""

import json
from pathlib import Path

from cli.main import main
from critic.report import REVIEWED_CRITERIA, reviewed_agreement
from schemas.config import JudgeConfig

REVIEWED = Path(__file__).parent / "data" / "critic_reviewed.jsonl"
# Agreement measured when the set was made (6 December 2026), kept as floors: a rule change that loses
# agreement with the reviewer fails here. Information gain is low by design: the critic counts gain on the
# gold path (hindsight), the reviewer counted a rejected candidate's page as information.
FLOORS = {"tool_accuracy": 0.95, "information_gain": 0.6, "logical_soundness": 0.8, "grounded": 0.95}


def test_the_reviewed_set_has_sixty_turns_with_a_verdict_per_criterion():
    rows = [json.loads(line) for line in REVIEWED.read_text().splitlines()]
    labels = [label for row in rows for label in row["labels"]]
    assert len(labels) >= 60
    assert all(set(REVIEWED_CRITERIA) | {"dead_end", "turn", "note"} == set(label) for label in labels)
    for criterion in (*REVIEWED_CRITERIA, "dead_end"):  # each verdict occurs both ways
        assert {label[criterion] for label in labels} == {True, False}, criterion


def test_the_critic_agrees_with_the_reviewer_and_trains_on_no_dead_end(capsys):
    report = reviewed_agreement(REVIEWED, JudgeConfig())
    print(report.format())
    for criterion, floor in FLOORS.items():
        assert report.agreement(criterion) >= floor, (criterion, report.counts[criterion])
    assert report.loss_turns > 0 and report.loss_on_dead_ends == 0
    assert main(["critic-report", "--reviewed", str(REVIEWED)]) == 0
    assert "grounded" in capsys.readouterr().out
