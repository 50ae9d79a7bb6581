"""Training signals from judgements: per-turn reward, per-turn loss mask, trajectory outcome reward.

A passing turn earns the weighted mean of its three scores (in [0, 1]). A failing turn earns
`failed_turn_reward` (negative) and, in `mask` mode, loss mask 0: it stays in the context the model sees
but contributes no gradient (the paper's ablation: 0.60 vs 0.33 for dropping it). In `penalty` mode it
keeps mask 1 and the negative reward pushes its probability down. Under the `critical` loss policy (the
default) a passing turn trains only when it is critical (`critic.critical`): the others stay in context with
mask 0 and keep their graded reward for RL, which reads the verdict, not the mask.
"""

from __future__ import annotations

from schemas.config import JudgeConfig
from schemas.critic import CRITERIA
from schemas.trajectory import Trajectory


def turn_reward(scores: dict[str, float], verdict: bool, config: JudgeConfig) -> float:
    if not verdict:
        return config.failed_turn_reward
    total_weight = sum(config.weights.get(c, 0.0) for c in CRITERIA)
    if total_weight <= 0:
        return 1.0
    return round(sum(config.weights.get(c, 0.0) * scores[c] for c in CRITERIA) / total_weight, 4)


def loss_mask(verdict: bool, critical: bool, config: JudgeConfig) -> int:
    """1 when the turn trains: a failed turn only under `penalty`; a passing one under the `verdict` policy,
    or when it is critical under `critical`."""
    if not verdict:
        return 1 if config.failed_turns == "penalty" else 0
    return 1 if config.loss_policy == "verdict" or critical else 0


def outcome_reward(trajectory: Trajectory, config: JudgeConfig) -> float:
    return config.correct_outcome_reward if trajectory.outcome.correct else config.wrong_outcome_reward
