"""Stage 4 records: per-turn judgements and the training signals derived from them."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from schemas.base import Record
from schemas.trajectory import Trajectory

CRITERIA = ("tool_accuracy", "information_gain", "logical_soundness")

# Why a turn failed, each kind belonging to one criterion (the root cause, not its echoes: a repeated call
# also adds no information, but its kind is `repeated_call`).
FailureKind = Literal[
    "malformed_call",
    "tool_error",
    "repeated_call",
    "empty_result",
    "not_sensible",
    "off_path_detour",
    "redundant_turn",
    "unsupported_claim",
    "unmotivated_action",
    "wrong_answer",
    "unsound_reasoning",
    "ungrounded",
]
FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)
KIND_CRITERION: dict[str, str] = {
    **dict.fromkeys(("malformed_call", "tool_error", "repeated_call", "empty_result", "not_sensible"), "tool_accuracy"),
    **dict.fromkeys(("off_path_detour", "redundant_turn"), "information_gain"),
    **dict.fromkeys(("unsupported_claim", "unmotivated_action", "wrong_answer", "unsound_reasoning", "ungrounded"),
                    "logical_soundness"),
}


class CriterionScore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float
    passed: bool
    rationale: str = ""


class TurnJudgement(Record):
    """The critic's verdict on one assistant turn, with the reward and loss mask it implies.

    `critical`: the turn moved the run toward the answer (`critic.critical`, reasons in `critical_reasons`);
    `loss_mask` follows the judge's loss policy, `reward` stays graded either way.
    """

    trajectory_id: str
    turn_index: int
    tool_accuracy: CriterionScore
    information_gain: CriterionScore
    logical_soundness: CriterionScore
    failed_checks: list[str] = []
    failure_kinds: list[FailureKind] = []
    verdict: bool
    reward: float
    loss_mask: int
    critical: bool = False
    critical_reasons: list[str] = []
    engine: str
    model: str | None = None


class JudgedTrajectory(Record):
    """A trajectory with one judgement per assistant turn and its outcome reward: the `trajectories` config."""

    trajectory: Trajectory
    judgements: list[TurnJudgement]
    outcome_reward: float
