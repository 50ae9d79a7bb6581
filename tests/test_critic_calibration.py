"""The offline critic against the hand-labelled set written for the shipped sample, and `critic-report`."""

import bz2
import json
from collections import Counter
from pathlib import Path

import pytest

from cli.main import main
from critic.calibration import load_labelled
from critic.report import labelled_report
from critic.scoring import judge_turns
from schemas.config import JudgeConfig

LABELLED = Path(__file__).parent / "data" / "critic_labelled.jsonl"
SAMPLE_INDEX = Path(__file__).parent.parent / "data/sample/enwiki-sample-pages-articles-multistream-index.txt.bz2"
OFFLINE_KINDS = ("malformed_call", "tool_error", "repeated_call", "empty_result", "off_path_detour", "redundant_turn",
                 "unsupported_claim", "unmotivated_action", "wrong_answer")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    report = labelled_report(LABELLED, JudgeConfig())
    out = tmp_path_factory.mktemp("critic") / "critic_report.txt"
    out.write_text(report.format())
    print(report.format())
    return report


def test_the_labelled_set_has_good_turns_and_every_failure_kind():
    rows = load_labelled(LABELLED)
    assert len(rows) >= 60
    kinds = Counter(k for r in rows for k in r.expected_kinds)
    assert all(kinds[k] >= 3 for k in OFFLINE_KINDS), kinds
    good = [r for r in rows if all(r.expected_pass.values())]
    assert len(good) >= 25
    for row in rows:
        judged_turn = row.trajectory.turns[row.turn_index]
        assert row.turn_index == len(row.trajectory.turns) - 1 and judged_turn.index == row.turn_index
        assert row.question is not None and row.question.question_id == row.trajectory.question_id


def test_the_labelled_trajectories_are_about_pages_of_the_sample():
    with bz2.open(SAMPLE_INDEX, "rt", encoding="utf-8") as index:
        sample_titles = {line.rstrip("\n").split(":", 2)[2] for line in index if line.strip()}
    path_entities = {n for r in load_labelled(LABELLED) for h in r.question.path.hops for n in (h.head, h.tail) if n}
    missing = path_entities - sample_titles
    assert len(missing) <= len(path_entities) // 3, missing


def test_offline_critic_reaches_08_precision_and_recall_for_each_failure_kind(report):
    for kind in OFFLINE_KINDS:
        counts = report.kinds[kind]
        assert counts.support >= 3
        assert counts.precision >= 0.8 and counts.recall >= 0.8, (kind, counts)
    # This set was labelled before the grounding rule: its labellers passed hedged guesses and pages opened by a
    # name nothing showed ("Perhaps Fran Walsh was born in Wellington"), which `ungrounded` fails by design.
    grounding_only = _failed_only_as_ungrounded()
    assert len(grounding_only) <= 4, grounding_only
    for criterion, counts in report.criteria.items():
        false_positives = counts.false_positive - (len(grounding_only) if criterion == "logical_soundness" else 0)
        precision = counts.true_positive / max(1, counts.true_positive + false_positives)
        assert precision >= 0.8 and counts.recall >= 0.8, (criterion, counts)


def _failed_only_as_ungrounded() -> list[str]:
    """Turns the labellers passed on soundness that the critic fails only for naming what nothing showed."""
    found = []
    for row in load_labelled(LABELLED):
        judgement = judge_turns(row.trajectory, row.question, JudgeConfig())[row.turn_index]
        if row.expected_pass["logical_soundness"] and judgement.failure_kinds == ["ungrounded"]:
            found.append(row.trajectory.turns[row.turn_index].reasoning)
    return found


def test_the_report_prints_precision_and_recall_per_criterion_and_kind(report):
    text = report.format()
    for name in (*OFFLINE_KINDS, "tool_accuracy", "information_gain", "logical_soundness", "verdict"):
        assert name in text
    assert "precision" in text and "recall" in text
    assert report.to_dict()["failure_kinds"]["repeated_call"]["support"] == report.kinds["repeated_call"].support


def test_critic_report_command(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["critic-report", "--labelled", str(LABELLED), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "critic calibration: " in printed and "wrong_answer" in printed
    data = json.loads(out.read_text())
    assert data["turns"] == len(load_labelled(LABELLED))
    assert main(["critic-report", "--labelled", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["critic-report", "--labelled", str(LABELLED), "--threshold", "speed=0.3"]) == 2


def test_a_stricter_threshold_flags_more_turns():
    strict = labelled_report(LABELLED, JudgeConfig(thresholds={
        "tool_accuracy": 0.5, "information_gain": 0.9, "logical_soundness": 0.5}))
    assert strict.criteria["information_gain"].false_positive > 0


def test_every_error_the_offline_policy_injects_maps_to_a_failure_kind():
    from critic.calibration import INJECTED_KINDS
    from schemas.critic import FAILURE_KINDS
    from synth.policies.error_injection import ERROR_KINDS

    assert set(INJECTED_KINDS) == set(ERROR_KINDS)
    assert set(INJECTED_KINDS.values()) <= set(FAILURE_KINDS)


def test_the_labelled_file_is_what_its_authoring_script_writes():
    from tests.data.build_critic_labelled import rows

    written = [json.loads(line) for line in LABELLED.read_text().splitlines() if line.strip()]
    assert written == [json.loads(json.dumps(row, sort_keys=True)) for row in rows()]
