"""Advantage estimators on plain tensors, shared by the rl/ trainer and the verl `turn_grpo` estimator.

Shapes: B rollouts, T assistant turns (padded), L tokens. `groups[b]` identifies the question rollout b
answers (GRPO normalises within the rollouts of one question). `turn_valid[b, t]` marks real turns that
take part; padding and, under the `mask` policy, turns the critic failed are not valid. Normalisation uses
the population standard deviation, so a group of one rollout gets advantage 0 instead of NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl.config import Estimator, FailedTurns


def group_normalize(values: torch.Tensor, groups: torch.Tensor, valid: torch.Tensor | None = None,
                    scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """(value - group mean) / (group std + eps) over the valid entries of each group's rows; 0 elsewhere.

    `values` is [B] or [B, T]; with [B, T], all valid turns of a group's rollouts are pooled.
    """
    values = values.float()
    valid = torch.ones_like(values, dtype=torch.bool) if valid is None else valid.bool()
    out = torch.zeros_like(values)
    for group in torch.unique(groups):
        rows = groups == group
        in_group = valid & (rows if values.dim() == 1 else rows[:, None])
        if not in_group.any():
            continue
        pool = values[in_group]
        centred = pool - pool.mean()
        out[in_group] = centred / (pool.std(unbiased=False) + eps) if scale else centred
    return out


def apply_failed_turns(turn_rewards: torch.Tensor, turn_valid: torch.Tensor, turn_passed: torch.Tensor,
                       policy: FailedTurns, penalty: float = -1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards and validity after the failed-turn policy.

    `mask`: failed turns stay in context but leave the loss and the turn statistics (ToolMind's choice);
    `penalty`: failed turns keep their tokens in the loss with reward `penalty`.
    """
    passed = turn_passed.bool()
    if policy == "mask":
        return turn_rewards.float(), turn_valid.bool() & passed
    if policy == "penalty":
        penalised = torch.where(passed, turn_rewards.float(), torch.full_like(turn_rewards, penalty, dtype=torch.float))
        return penalised, turn_valid.bool()
    raise ValueError(f"unknown failed-turn policy {policy!r}; use 'mask' or 'penalty'")


def outcome_grpo(outcome_rewards: torch.Tensor, groups: torch.Tensor, scale: bool = True) -> torch.Tensor:
    """GRPO: each rollout's outcome reward normalised within its question's group -> [B]."""
    return group_normalize(outcome_rewards, groups, scale=scale)


def mt_grpo(outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor, turn_valid: torch.Tensor,
            groups: torch.Tensor, turn_coef: float = 1.0, scale: bool = True) -> torch.Tensor:
    """MT-GRPO: A[b, t] = A_outcome[b] + turn_coef * group-normalised turn reward, on valid turns -> [B, T]."""
    outcome = outcome_grpo(outcome_rewards, groups, scale)[:, None]
    turn = group_normalize(turn_rewards, groups, turn_valid, scale)
    return (outcome + turn_coef * turn) * turn_valid.float()


def discounted_turn_returns(outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor, turn_valid: torch.Tensor,
                            gamma: float = 1.0) -> torch.Tensor:
    """G[b, t] = r[b, t] + gamma * G[b, t+1] over valid turns, the outcome reward added at the last valid turn.

    Invalid turns contribute no reward and are skipped by the recursion (the return passes through them).
    """
    rewards = turn_rewards.float() * turn_valid.float()
    valid_positions = turn_valid.float() * torch.arange(1, turn_valid.shape[1] + 1, device=turn_valid.device)
    last = valid_positions.argmax(dim=1)
    has_turn = turn_valid.any(dim=1)
    rows = torch.arange(rewards.shape[0], device=rewards.device)
    rewards[rows[has_turn], last[has_turn]] += outcome_rewards.float()[has_turn]
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        valid = turn_valid[:, t].bool()
        running = torch.where(valid, rewards[:, t] + gamma * running, running)
        returns[:, t] = torch.where(valid, running, torch.zeros_like(running))
    return returns


def turn_return_grpo(outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor, turn_valid: torch.Tensor,
                     groups: torch.Tensor, gamma: float = 1.0, scale: bool = True) -> torch.Tensor:
    """Discounted turn returns, normalised over all valid turns of each group -> [B, T]."""
    returns = discounted_turn_returns(outcome_rewards, turn_rewards, turn_valid, gamma)
    return group_normalize(returns, groups, turn_valid, scale) * turn_valid.float()


def turn_advantages(estimator: Estimator, outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor,
                    turn_valid: torch.Tensor, turn_passed: torch.Tensor, groups: torch.Tensor, *,
                    failed_turns: FailedTurns = "mask", failed_turn_reward: float = -1.0, turn_coef: float = 1.0,
                    gamma: float = 1.0, scale: bool = True) -> torch.Tensor:
    """One advantage per (rollout, turn) for the named estimator, after the failed-turn policy -> [B, T]."""
    rewards, valid = apply_failed_turns(turn_rewards, turn_valid, turn_passed, failed_turns, failed_turn_reward)
    estimators: dict[str, Callable[[], torch.Tensor]] = {
        "outcome_grpo": lambda: outcome_grpo(outcome_rewards, groups, scale)[:, None] * valid.float(),
        "mt_grpo": lambda: mt_grpo(outcome_rewards, rewards, valid, groups, turn_coef, scale),
        "turn_return": lambda: turn_return_grpo(outcome_rewards, rewards, valid, groups, gamma, scale),
    }
    if estimator not in estimators:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {sorted(estimators)}")
    return estimators[estimator]()


def token_advantages(turn_adv: torch.Tensor, turn_ids: torch.Tensor) -> torch.Tensor:
    """Spread [B, T] turn advantages onto [B, L] tokens by turn id; tokens outside a turn (-1) get 0."""
    if turn_adv.shape[1] == 0:
        return torch.zeros(turn_ids.shape, dtype=turn_adv.dtype, device=turn_adv.device)
    gathered = torch.gather(turn_adv, 1, turn_ids.clamp(min=0).long())
    return torch.where(turn_ids >= 0, gathered, torch.zeros_like(gathered))
