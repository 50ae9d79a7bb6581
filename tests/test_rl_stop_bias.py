"""verl RFC #7244 on a toy episodic task where the policy decides when to stop: the expected policy gradient
of each turn-level estimator, computed exactly, against the true gradient of the expected return.

The task: at turn t < T-1 the policy stops (answers) with probability sigmoid(theta[t]), else it takes
another turn; at turn T-1 it must stop. An episode that stops at turn k earns turn reward r_c on each of its
k "another turn" turns, r_s on its stopping turn, and outcome O[k]. The objective is
J = E[O[k] + turn_coef * (k * r_c + r_s)]. For a group of G rollouts, an estimator's gradient is
(1/G) sum_b sum_t A[b, t] grad log pi(a[b, t]); its expectation is summed over every one of the T^G groups
with its probability (no sampling), so an unbiased estimator matches grad J to float precision.
Normalisation by the std is off (`scale=False`): GRPO's std scaling is a separate, known bias.
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from rl.advantages import turn_advantages  # noqa: E402
from rl.config import DEFAULT_ESTIMATOR, RLConfig  # noqa: E402

TURNS, GROUP = 3, 3


def action_logprobs(theta: torch.Tensor, stop: int) -> torch.Tensor:
    """log pi of each turn's action in an episode that stops at turn `stop` -> [stop + 1]."""
    stop_prob = torch.sigmoid(theta)
    logprobs = [torch.log(1 - stop_prob[t]) for t in range(stop)]
    logprobs.append(torch.log(stop_prob[stop]) if stop < TURNS - 1 else torch.zeros(()))  # the last turn is forced
    return torch.stack(logprobs)


def episode_tensors(stops: tuple[int, ...], r_c: float, r_s: float, outcome: list[float]):
    """outcome [G], turn rewards [G, T] and turn validity [G, T] of a group whose rollout b stops at stops[b]."""
    turn = torch.arange(TURNS)[None, :]
    stop = torch.tensor(stops)[:, None]
    rewards = torch.where(turn < stop, r_c, torch.where(turn == stop, r_s, 0.0)).float()
    return torch.tensor([outcome[k] for k in stops]), rewards, turn <= stop


def true_gradient(theta0: list[float], r_c: float, r_s: float, outcome: list[float], turn_coef: float) -> torch.Tensor:
    theta = torch.tensor(theta0, requires_grad=True)
    probs = torch.stack([action_logprobs(theta, k).sum().exp() for k in range(TURNS)])
    returns = torch.tensor([outcome[k] + turn_coef * (k * r_c + r_s) for k in range(TURNS)])
    (gradient,) = torch.autograd.grad((probs * returns).sum(), theta)
    return gradient


def expected_estimator_gradient(estimator: str, theta0: list[float], r_c: float, r_s: float, outcome: list[float],
                                turn_coef: float) -> torch.Tensor:
    theta = torch.tensor(theta0, requires_grad=True)
    probs = torch.stack([action_logprobs(theta, k).sum().exp() for k in range(TURNS)]).detach()
    surrogate = torch.zeros(())
    for stops in itertools.product(range(TURNS), repeat=GROUP):
        weight = probs[list(stops)].prod()
        outcomes, rewards, valid = episode_tensors(stops, r_c, r_s, outcome)
        advantages = turn_advantages(estimator, outcomes, rewards, valid, valid, torch.zeros(GROUP, dtype=torch.long),
                                     turn_coef=turn_coef, scale=False)
        for row, stop in enumerate(stops):
            surrogate = surrogate + weight * (advantages[row, : stop + 1] * action_logprobs(theta, stop)).sum() / GROUP
    (gradient,) = torch.autograd.grad(surrogate, theta)
    return gradient


# (stop logits, r_c, r_s, outcome per stopping turn, turn_coef)
TASKS = {
    "extra_turns_rewarded_like_the_answer": ([0.0, 0.3, 0.0], 1.0, 1.0, [0.0, 1.0, 0.2], 1.0),
    "searching_pays_answering_late_is_fine": ([0.0, 0.3, 0.0], 0.5, 0.0, [0.0, 1.0, 1.0], 1.0),
    "penalised_turns_half_weight": ([-0.5, 0.8, 0.0], -0.3, 1.0, [0.2, 1.0, 0.4], 0.5),
}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_the_default_estimator_is_unbiased_on_the_stop_decision(task):
    theta, r_c, r_s, outcome, coef = TASKS[task]
    assert DEFAULT_ESTIMATOR == RLConfig().estimator == "turn_rloo"
    expected = expected_estimator_gradient(DEFAULT_ESTIMATOR, theta, r_c, r_s, outcome, coef)
    assert torch.allclose(expected, true_gradient(theta, r_c, r_s, outcome, coef), atol=1e-5)


def test_per_turn_normalised_turn_rewards_carry_the_rfc_bias():
    """mt_grpo (the former default) normalises turn rewards over the group's turns and credits each to its own
    turn: when every turn earns the same reward its turn term vanishes, so the reward an extra turn earns never
    reaches the decision to take it, and on this task the stop decision at turn 1 gets the wrong sign."""
    theta, r_c, r_s, outcome, coef = TASKS["extra_turns_rewarded_like_the_answer"]
    truth = true_gradient(theta, r_c, r_s, outcome, coef)
    biased = expected_estimator_gradient("mt_grpo", theta, r_c, r_s, outcome, coef)
    assert truth[1] < 0 < biased[1]  # the truth says take another turn more often, mt_grpo says stop more often
    assert torch.allclose(biased, expected_estimator_gradient("outcome_grpo", theta, r_c, r_s, outcome, coef))


@pytest.mark.parametrize("estimator", ["mt_grpo", "turn_return"])
def test_pooled_baselines_are_not_proportional_to_the_true_gradient(estimator):
    """A baseline pooled over the group's turns counts the rollout's own turns (its length is its own
    action): on some task the expected gradient is not a positive multiple of the true one."""
    def proportional(theta, r_c, r_s, outcome, coef) -> bool:
        ratio = expected_estimator_gradient(estimator, theta, r_c, r_s, outcome, coef)[:2] / \
            true_gradient(theta, r_c, r_s, outcome, coef)[:2]
        return bool(ratio[0] > 0 and torch.allclose(ratio, ratio[0].expand(2), rtol=0.05))

    assert not all(proportional(*task) for task in TASKS.values())
