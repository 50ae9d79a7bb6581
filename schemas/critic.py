"""Stage 4 records: per-turn judgements and the training signals derived from them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from schemas.base import Record
from schemas.trajectory import Trajectory

CRITERIA = ("tool_accuracy", "information_gain", "logical_soundness")


class CriterionScore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: float
    passed: bool
    rationale: str = ""


class TurnJudgement(Record):
    """The critic's verdict on one assistant turn, with the reward and loss mask it implies."""

    trajectory_id: str
    turn_index: int
    tool_accuracy: CriterionScore
    information_gain: CriterionScore
    logical_soundness: CriterionScore
    failed_checks: list[str] = []
    verdict: bool
    reward: float
    loss_mask: int
    engine: str
    model: str | None = None


class JudgedTrajectory(Record):
    """A trajectory with one judgement per assistant turn and its outcome reward: the `trajectories` config."""

    trajectory: Trajectory
    judgements: list[TurnJudgement]
    outcome_reward: float
