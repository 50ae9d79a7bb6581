"""How turn rewards travel through verl's token-level reward tensor, and the `turn_grpo` estimator on it.

verl hands an advantage estimator only `token_level_rewards` [B, L] and `response_mask` [B, L] (1 on
tokens the policy generated, 0 on tool responses and template tokens). The layout, written by the
hopsmith reward manager and read back here:

- each assistant turn is a maximal run of response_mask == 1 (turns the critic failed under the `mask`
  policy have their mask zeroed by the agent loop, so they are context only and not turns here);
- turn k's critic reward sits on turn k's last token;
- the outcome reward sits on a mask-0 token (the template's closing newline the agent loop appends after
  the final turn), so it never mixes with a turn reward.

The estimator then calls the same `rl.advantages.turn_advantages` the rl/ trainer uses. Torch only: the
layout is tested without verl.
"""

from __future__ import annotations

import numpy as np
import torch

from rl.advantages import token_advantages, turn_advantages
from rl.config import DEFAULT_ESTIMATOR, Estimator


def turn_ids_from_mask(response_mask: torch.Tensor) -> torch.Tensor:
    """Number the maximal runs of 1s in each row: 0, 1, ... on their tokens, -1 elsewhere -> [B, L]."""
    mask = response_mask.long()
    previous = torch.nn.functional.pad(mask[:, :-1], (1, 0))
    starts = (mask == 1) & (previous == 0)
    ids = torch.cumsum(starts.long(), dim=1) - 1
    return torch.where(mask == 1, ids, torch.full_like(ids, -1))


def turn_end_positions(response_mask: torch.Tensor) -> list[list[int]]:
    """Per row, the position of each turn's last token."""
    mask = response_mask.long()
    following = torch.nn.functional.pad(mask[:, 1:], (0, 1))
    ends = (mask == 1) & (following == 0)
    return [torch.nonzero(row).flatten().tolist() for row in ends]


def place_turn_rewards(response_mask: torch.Tensor, turn_rewards: list[list[float]], outcome_rewards: list[float],
                       outcome_positions: list[int]) -> torch.Tensor:
    """The reward tensor: turn k's reward on its last token, the outcome on its (mask-0) position -> [B, L]."""
    rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
    for row, ends in enumerate(turn_end_positions(response_mask)):
        if len(ends) != len(turn_rewards[row]):
            raise ValueError(f"row {row}: {len(ends)} turns in the response mask, {len(turn_rewards[row])} rewards")
        position = outcome_positions[row]
        if response_mask[row, position] != 0:
            raise ValueError(f"row {row}: the outcome position {position} is a generated token")
        for end, reward in zip(ends, turn_rewards[row], strict=True):
            rewards[row, end] = reward
        rewards[row, position] = outcome_rewards[row]
    return rewards


def read_turn_rewards(token_level_rewards: torch.Tensor, response_mask: torch.Tensor):
    """(outcome [B], turn rewards [B, T], turn valid [B, T], turn ids [B, L]) from the reward tensor."""
    ends = turn_end_positions(response_mask)
    width = max((len(e) for e in ends), default=0)
    turn_rewards = torch.zeros(len(ends), width, device=token_level_rewards.device)
    valid = torch.zeros(len(ends), width, dtype=torch.bool, device=token_level_rewards.device)
    for row, positions in enumerate(ends):
        if positions:
            turn_rewards[row, : len(positions)] = token_level_rewards[row, positions].float()
            valid[row, : len(positions)] = True
    outcome = (token_level_rewards.float() * (1 - response_mask.float())).sum(dim=1)
    return outcome, turn_rewards, valid, turn_ids_from_mask(response_mask)


def turn_grpo(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index, estimator: Estimator = DEFAULT_ESTIMATOR,
              turn_coef: float = 1.0, gamma: float = 1.0, scale: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """verl-shaped estimator: (advantages, returns), both [B, L], groups from verl's `uid` index array."""
    outcome, turn_rewards, valid, turn_ids = read_turn_rewards(token_level_rewards, response_mask)
    _, group_ids = np.unique(np.asarray(index, dtype=object).astype(str), return_inverse=True)
    groups = torch.as_tensor(group_ids, device=token_level_rewards.device)
    # failed turns were already handled by the agent loop (masked out, or carrying the penalty reward)
    advantages = turn_advantages(estimator, outcome, turn_rewards, valid, valid, groups, failed_turns="penalty",
                                 turn_coef=turn_coef, gamma=gamma, scale=scale)
    token_adv = token_advantages(advantages, turn_ids) * response_mask
    return token_adv, token_adv
