"""Advantage estimators on plain tensors, shared by the rl/ trainer and the verl `turn_grpo` estimator.

Shapes: B rollouts, T assistant turns (padded), L tokens. `groups[b]` identifies the question rollout b
answers (GRPO normalises within the rollouts of one question). `turn_valid[b, t]` marks real turns that
take part; padding and, under the `mask` policy, turns the critic failed are not valid. The default,
`turn_rloo`, is the one whose expected gradient is the true one when the policy decides when to stop. Normalisation uses
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


def _outcome_at_last_turn(rewards: torch.Tensor, turns: torch.Tensor, outcome_rewards: torch.Tensor) -> torch.Tensor:
    """`rewards` [B, T] with each row's outcome reward added at its last turn where `turns` is set (in place;
    a row without such a turn gets none)."""
    last = (turns.float() * torch.arange(1, turns.shape[1] + 1, device=turns.device)).argmax(dim=1)
    has_turn = turns.any(dim=1)
    rows = torch.arange(rewards.shape[0], device=rewards.device)
    rewards[rows[has_turn], last[has_turn]] += outcome_rewards.float()[has_turn]
    return rewards


def discounted_turn_returns(outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor, turn_valid: torch.Tensor,
                            gamma: float = 1.0) -> torch.Tensor:
    """G[b, t] = r[b, t] + gamma * G[b, t+1] over valid turns, the outcome reward added at the last valid turn.

    Invalid turns contribute no reward and are skipped by the recursion (the return passes through them).
    """
    rewards = _outcome_at_last_turn(turn_rewards.float() * turn_valid.float(), turn_valid, outcome_rewards)
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


def turn_reward_to_go(outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor, turn_valid: torch.Tensor,
                      turn_real: torch.Tensor, turn_coef: float = 1.0, gamma: float = 1.0) -> torch.Tensor:
    """G[b, t] = turn_coef * r[b, t] + gamma * G[b, t+1] on every real turn, the outcome added at the last real
    turn; turns that are not valid (masked failed turns) add no reward but pass the return through -> [B, T]."""
    real = turn_real.bool()
    rewards = _outcome_at_last_turn(turn_coef * turn_rewards.float() * turn_valid.float() * real.float(), real,
                                    outcome_rewards)
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        running = torch.where(real[:, t], rewards[:, t] + gamma * running, torch.zeros_like(running))
        returns[:, t] = running
    return returns


def turn_rloo(outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor, turn_valid: torch.Tensor,
              turn_real: torch.Tensor, groups: torch.Tensor, turn_coef: float = 1.0, gamma: float = 1.0,
              scale: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """Reward-to-go minus a leave-one-out baseline per turn index -> [B, T] (the default estimator).

    A[b, t] = G[b, t] - mean of G[b', t] over the other rollouts b' of b's group that reached turn t (0 when
    none did). Turn t's action is credited with every reward it leads to, the rewards of the turns a "take
    another turn" decision buys included, and the baseline depends on neither rollout b's own actions nor its
    length, so the policy gradient stays unbiased when the policy decides when to stop (verl RFC #7244: a
    per-turn-index baseline that counts the rollout's own turns, or turn rewards credited to their own turn
    only, put a hidden bonus or penalty on every extra turn; tests/test_rl_stop_bias.py computes both exactly).
    `scale` divides by the population std of the group's whole-episode returns, one constant per group as in
    GRPO (1 when it is 0).
    """
    real = turn_real.bool()
    returns = turn_reward_to_go(outcome_rewards, turn_rewards, turn_valid, real, turn_coef, gamma)
    same_group = groups[:, None] == groups[None, :]
    others = (same_group & ~torch.eye(len(groups), dtype=torch.bool, device=groups.device)).float()
    alive_sum = others @ (returns * real.float())
    alive_count = others @ real.float()
    baseline = torch.where(alive_count > 0, alive_sum / alive_count.clamp(min=1.0), torch.zeros_like(alive_sum))
    advantages = (returns - baseline) * turn_valid.float() * real.float()
    if scale:
        totals = returns[:, 0]
        for group in torch.unique(groups):
            rows = groups == group
            std = totals[rows].std(unbiased=False)
            advantages[rows] = advantages[rows] / (std if std > eps else 1.0)
    return advantages


def turn_advantages(estimator: Estimator, outcome_rewards: torch.Tensor, turn_rewards: torch.Tensor,
                    turn_valid: torch.Tensor, turn_passed: torch.Tensor, groups: torch.Tensor, *,
                    failed_turns: FailedTurns = "mask", failed_turn_reward: float = -1.0, turn_coef: float = 1.0,
                    gamma: float = 1.0, scale: bool = True) -> torch.Tensor:
    """One advantage per (rollout, turn) for the named estimator, after the failed-turn policy -> [B, T].

    `turn_valid` marks the real turns (padding is not); the failed-turn policy narrows it to the turns that
    train."""
    rewards, valid = apply_failed_turns(turn_rewards, turn_valid, turn_passed, failed_turns, failed_turn_reward)
    estimators: dict[str, Callable[[], torch.Tensor]] = {
        "turn_rloo": lambda: turn_rloo(outcome_rewards, rewards, valid, turn_valid, groups, turn_coef, gamma, scale),
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
