"""Advantage estimators and policy losses on hand-computed tensors."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from rl.advantages import (  # noqa: E402
    apply_failed_turns,
    discounted_turn_returns,
    group_normalize,
    mt_grpo,
    outcome_grpo,
    token_advantages,
    turn_advantages,
    turn_return_grpo,
)
from rl.objectives import cloning_loss, cloning_weights, kl_k3, ppo_clip_loss  # noqa: E402


def close(actual, expected, tol=1e-4):
    assert torch.allclose(torch.as_tensor(actual, dtype=torch.float), torch.tensor(expected, dtype=torch.float), atol=tol), actual


def test_outcome_grpo_normalises_within_each_question_group():
    # group 0: rewards 1, 0 -> mean .5, std .5 -> +1, -1; group 1: equal rewards -> 0 (no NaN)
    advantages = outcome_grpo(torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 1, 1]))
    close(advantages, [1.0, -1.0, 0.0, 0.0])
    close(outcome_grpo(torch.tensor([3.0]), torch.tensor([7])), [0.0])
    close(outcome_grpo(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), scale=False), [0.5, -0.5])


# one question, two rollouts of three turns
OUTCOME = torch.tensor([1.0, 0.0])
TURN_REWARDS = torch.tensor([[1.0, 1.0, 1.0], [0.6, 0.0, 0.0]])
VALID = torch.ones(2, 3, dtype=torch.bool)
PASSED = torch.tensor([[True, True, True], [True, False, False]])
GROUPS = torch.tensor([0, 0])


def test_mt_grpo_adds_the_pooled_group_normalised_turn_reward():
    # pooled turn rewards [1,1,1,.6,0,0]: mean .6, std sqrt(.2) = .44721
    # normalised: row 0 -> .89443; row 1 -> [0, -1.34164, -1.34164]; outcome advantages [1, -1]
    advantages = mt_grpo(OUTCOME, TURN_REWARDS, VALID, GROUPS, turn_coef=0.5)
    close(advantages, [[1.44721, 1.44721, 1.44721], [-1.0, -1.67082, -1.67082]])


def test_failed_turns_masked_leave_the_statistics_and_get_zero_advantage():
    # valid pool [1,1,1,.6]: mean .9, std .17321 -> row 0: .57735, row 1 turn 0: -1.73205
    advantages = turn_advantages("mt_grpo", OUTCOME, TURN_REWARDS, VALID, PASSED, GROUPS, failed_turns="mask",
                                 turn_coef=1.0)
    close(advantages, [[1.57735, 1.57735, 1.57735], [-2.73205, 0.0, 0.0]])


def test_failed_turns_penalised_keep_their_tokens_with_the_penalty_reward():
    rewards, valid = apply_failed_turns(TURN_REWARDS, VALID, PASSED, "penalty", penalty=-1.0)
    close(rewards, [[1.0, 1.0, 1.0], [0.6, -1.0, -1.0]])
    assert valid.all()
    # pooled [1,1,1,.6,-1,-1]: mean 1.6/6 = .26667; squared deviations 3*.53778 + .11111 + 2*1.60444 = 4.93333,
    # std sqrt(4.93333/6) = .90676 -> normalised .80873, .36761, -1.39693
    advantages = turn_advantages("mt_grpo", OUTCOME, TURN_REWARDS, VALID, PASSED, GROUPS, failed_turns="penalty")
    close(advantages, [[1.80873, 1.80873, 1.80873], [-1 + 0.36761, -1 - 1.39693, -1 - 1.39693]])
    with pytest.raises(ValueError):
        apply_failed_turns(TURN_REWARDS, VALID, PASSED, "drop")


def test_outcome_estimator_broadcasts_the_episode_advantage_to_valid_turns():
    advantages = turn_advantages("outcome_grpo", OUTCOME, TURN_REWARDS, VALID, PASSED, GROUPS)
    close(advantages, [[1.0, 1.0, 1.0], [-1.0, 0.0, 0.0]])
    with pytest.raises(ValueError):
        turn_advantages("gae", OUTCOME, TURN_REWARDS, VALID, PASSED, GROUPS)


def test_discounted_turn_returns_by_hand():
    # rewards [.5, 0, 1] + outcome 2 at the last turn, gamma .5: G2 = 3, G1 = 1.5, G0 = 1.25
    returns = discounted_turn_returns(torch.tensor([2.0]), torch.tensor([[0.5, 0.0, 1.0]]),
                                      torch.ones(1, 3, dtype=torch.bool), gamma=0.5)
    close(returns, [[1.25, 1.5, 3.0]])
    # an invalid middle turn is skipped: G0 = .5 + .5 * 3 = 2; a row without turns gets nothing
    returns = discounted_turn_returns(torch.tensor([2.0, 5.0]), torch.tensor([[0.5, 9.0, 1.0], [1.0, 1.0, 1.0]]),
                                      torch.tensor([[True, False, True], [False, False, False]]), gamma=0.5)
    close(returns, [[2.0, 0.0, 3.0], [0.0, 0.0, 0.0]])


def test_turn_return_grpo_normalises_returns_over_the_group():
    outcome = torch.tensor([1.0, 0.0])
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    valid = torch.ones(2, 3, dtype=torch.bool)
    # returns: row 0 [2, 1, 1], row 1 [0, 0, 0]; pool mean 4/6, std sqrt(((4/3)^2 + 2(1/3)^2 + 3(2/3)^2)/6)
    mean = 4 / 6
    std = math.sqrt(((2 - mean) ** 2 + 2 * (1 - mean) ** 2 + 3 * mean**2) / 6)
    expected = [[(2 - mean) / std, (1 - mean) / std, (1 - mean) / std], [-mean / std] * 3]
    close(turn_return_grpo(outcome, rewards, valid, torch.tensor([0, 0])), expected)


def test_group_normalize_pools_only_valid_entries_of_the_group():
    values = torch.tensor([[1.0, 3.0], [5.0, 100.0], [7.0, 7.0]])
    valid = torch.tensor([[True, True], [True, False], [True, True]])
    out = group_normalize(values, torch.tensor([0, 0, 1]), valid, scale=False)
    close(out, [[-2.0, 0.0], [2.0, 0.0], [0.0, 0.0]])


def test_token_advantages_follow_turn_ids():
    out = token_advantages(torch.tensor([[1.0, 2.0]]), torch.tensor([[-1, 0, 0, -1, 1, 1, -1]]))
    close(out, [[0.0, 1.0, 1.0, 0.0, 2.0, 2.0, 0.0]])


def test_cloning_weights_and_loss():
    advantages = torch.tensor([[0.0, 1.0, -1.0, 10.0]])
    close(cloning_weights(advantages, "awr", beta=1.0, max_weight=5.0), [[1.0, math.e, 1 / math.e, 5.0]])
    close(cloning_weights(advantages, "filtered"), [[0.0, 1.0, 0.0, 1.0]])
    logprobs = torch.tensor([[-1.0, -2.0, -3.0, -4.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    # filtered: -(0*-1 + 1*-2 + 1*-4) / 3 = 2
    close(cloning_loss(logprobs, advantages, mask, "filtered"), 2.0)


def test_ppo_clip_loss_by_hand():
    old = torch.zeros(1, 4)
    logprobs = torch.log(torch.tensor([[1.5, 1.5, 1.0, 0.5]]))
    advantages = torch.tensor([[1.0, -1.0, 2.0, -1.0]])
    mask = torch.ones(1, 4)
    # per token: -min(1.5, 1.2) = -1.2; -min(-1.5, -1.2) = 1.5; -2; -min(-.5, -.8) = .8 -> mean -0.225
    loss, stats = ppo_clip_loss(logprobs, old, advantages, mask, clip_eps=0.2)
    close(loss, -0.225)
    assert stats["clip_frac"] == pytest.approx(0.75)
    close(kl_k3(torch.log(torch.tensor([0.5])), torch.log(torch.tensor([1.0]))), [2 - math.log(2) - 1])
    loss_kl, stats = ppo_clip_loss(logprobs, old, advantages, mask, 0.2, ref_logprobs=logprobs, kl_coef=0.1)
    close(loss_kl, -0.225)
    assert stats["kl"] == pytest.approx(0.0)
