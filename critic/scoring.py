"""The critic's core: judge every turn of one trajectory on the three criteria and derive its signals.

A plain function (no Beam, no I/O) so tests and the calibration report call exactly what the stage runs.
Turns are judged in order against `Knowledge`, which holds the question and the observations before the
turn; a turn naming what none of them showed (`critic.grounding`) fails logical soundness as
`ungrounded`. With LLM assessments (one per turn) the judge refines two criteria: it decides tool accuracy when
every programmatic check passed, and it can only lower logical soundness (the minimum of offline and LLM
scores), so a fooled judge cannot pass a turn the offline checks failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from critic.checks import call_identities, run_checks
from critic.critical import CriticalTracker
from critic.evidence import Knowledge
from critic.gain import information_gain
from critic.grounding import ungrounded_names
from critic.llm_judge import TurnAssessment
from critic.signals import loss_mask, outcome_reward, turn_reward
from critic.soundness import logical_soundness
from schemas.config import JudgeConfig
from schemas.critic import CRITERIA, CriterionScore, JudgedTrajectory, TurnJudgement
from schemas.questions import Question
from schemas.trajectory import ToolCall, Trajectory, Turn

OFFLINE_ENGINE = "offline"
DETOUR_RELEVANCE = 0.5
UNGROUNDED_CAP = 0.0


def _tool_accuracy(turn: Turn, earlier: list[Turn], config: JudgeConfig, assessment: TurnAssessment | None,
                   knowledge: Knowledge, call_identity: Callable[[ToolCall], str]):
    checks = run_checks(turn, earlier, config.repeat_window, knowledge.normalized, call_identity)
    failed = [c for c in checks if not c.passed]
    if failed:
        return min(c.cap for c in failed), "; ".join(c.detail for c in failed), [c.kind for c in failed], failed
    rationale = f"passed checks: {', '.join(c.name for c in checks)}"
    if assessment is None:
        return 1.0, rationale, [], []
    score = assessment.sensible_next_step
    kinds = ["not_sensible"] if score < config.thresholds["tool_accuracy"] else []
    return score, f"{rationale}; judge: {assessment.sensible_rationale}"[:400], kinds, []


def _gain_kind(relevance: float) -> str:
    """A low-gain turn about something else is a detour; one about the question that adds nothing is redundant."""
    return "off_path_detour" if relevance < DETOUR_RELEVANCE else "redundant_turn"


def judge_turns(
    trajectory: Trajectory,
    question: Question | None,
    config: JudgeConfig,
    assessments: Sequence[TurnAssessment] | None = None,
    engine: str = OFFLINE_ENGINE,
    model: str | None = None,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> list[TurnJudgement]:
    """One judgement per turn; `aliases` (title -> other names, from the index) widens evidence matching."""
    thresholds = config.thresholds
    knowledge = Knowledge.start(trajectory.question, question, aliases)
    tracker = CriticalTracker.start(trajectory)
    call_identity = call_identities(trajectory.turns)
    judgements = []
    for position, turn in enumerate(trajectory.turns):
        assessment = assessments[position] if assessments else None
        tool_score, tool_why, tool_kinds, failed_checks = _tool_accuracy(
            turn, trajectory.turns[:position], config, assessment, knowledge, call_identity
        )
        gain = information_gain(turn, knowledge)
        sound = logical_soundness(turn, trajectory, question, knowledge)
        sound_score, sound_why, sound_kinds = sound.score, sound.rationale, list(sound.kinds)
        ungrounded = ungrounded_names(turn, knowledge)
        if ungrounded:  # it names what nothing showed: never sound, whatever else holds
            sound_score = min(sound_score, UNGROUNDED_CAP)
            sound_why = f"names what no earlier observation showed: {', '.join(ungrounded[:3])}; {sound_why}"[:400]
            sound_kinds = ["ungrounded", *sound_kinds]
        if assessment is not None:
            sound_why = f"{sound_why}; judge: {assessment.soundness_rationale}"[:400]
            if assessment.logical_soundness < sound_score:
                sound_score = assessment.logical_soundness
                if sound_score < thresholds["logical_soundness"] and not sound_kinds:
                    sound_kinds = ["unsound_reasoning"]
        scores = {"tool_accuracy": tool_score, "information_gain": gain.score, "logical_soundness": sound_score}
        passed = {c: scores[c] >= thresholds[c] for c in CRITERIA}
        kinds = [k for k in tool_kinds if k] if not passed["tool_accuracy"] else []
        if not passed["information_gain"] and passed["tool_accuracy"]:
            kinds.append(_gain_kind(gain.relevance))
        if not passed["logical_soundness"]:
            kinds += sound_kinds
        verdict = all(passed.values())
        critical = tracker.reasons(turn, verdict, knowledge)
        judgements.append(
            TurnJudgement(
                trajectory_id=trajectory.trajectory_id,
                turn_index=turn.index,
                tool_accuracy=CriterionScore(score=tool_score, passed=passed["tool_accuracy"], rationale=tool_why),
                information_gain=CriterionScore(score=gain.score, passed=passed["information_gain"], rationale=gain.rationale),
                logical_soundness=CriterionScore(score=sound_score, passed=passed["logical_soundness"], rationale=sound_why),
                failed_checks=[c.name for c in failed_checks] + [c for c in CRITERIA if not passed[c]],
                failure_kinds=list(dict.fromkeys(kinds)),
                verdict=verdict,
                reward=turn_reward(scores, verdict, config),
                loss_mask=loss_mask(verdict, bool(critical), config),
                critical=bool(critical),
                critical_reasons=critical,
                engine=engine,
                model=model,
            )
        )
        knowledge.add(turn)
    return judgements


def judge_trajectory(
    trajectory: Trajectory,
    question: Question | None,
    config: JudgeConfig,
    assessments: Sequence[TurnAssessment] | None = None,
    engine: str = OFFLINE_ENGINE,
    model: str | None = None,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> JudgedTrajectory:
    """The trajectory with one judgement per turn and its outcome reward."""
    return JudgedTrajectory(
        trajectory=trajectory,
        judgements=judge_turns(trajectory, question, config, assessments, engine, model, aliases),
        outcome_reward=outcome_reward(trajectory, config),
    )
