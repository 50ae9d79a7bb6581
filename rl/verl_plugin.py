"""hopsmith's verl plugin: the turn-reward agent loop, its reward manager, the `turn_grpo` estimator, the search tool.

Imported only inside a verl environment (it imports verl); `hopsmith rl export-verl` writes the YAML that
points verl here. Checked against verl 0.9.1 by `make verl-check` (its default v1 trainer). Besides verl it
imports hopsmith's run-time modules only: torch, pydantic, pyarrow, numpy, bm25s, mwparserfromhell and
openai (never Beam).

How data travels in verl 0.9 (`verl.trainer.ppo.v1`), and where each piece plugs in:
1. verl's agent-loop worker instantiates `HopsmithTurnAgentLoop` from `agent_loops.yaml` (with
   `data_config=`, `tools=` ...). The loop runs `rl.rollout.run_episode` (the rl/ trainer's own turn loop)
   with verl's inference servers as the sampler, executes each tool call in the stage 3 search index,
   judges every turn with the stage 4 critic, masks failed turns (policy `mask`) or keeps their penalty
   reward (`penalty`), and puts the turn rewards and the outcome into `extra_fields`.
2. The worker asks verl's reward loop for the rollout's one scalar `reward_score`; the reward loop calls
   `TurnRewardManager.run_single` (a per-sample `RewardManagerBase`, `reward.reward_manager` in the
   config), which returns the outcome from `tool_extra_fields`.
3. The worker turns the output into the trainer's fields with `output.as_dict()`: verl puts the scalar on
   the last response token of `rm_scores`; `TurnRewardOutput.as_dict` adds each turn's reward on the turn's
   last token (`rl.verl_layout`). The trainer copies `rm_scores` to `token_level_scores` and
   `token_level_rewards` and calls the estimator registered as `algorithm.adv_estimator`.
4. `turn_grpo` is registered when this module is imported; the launch script makes verl import it in
   every process through `VERL_USE_EXTERNAL_MODULES=rl.verl_plugin`, and passes the estimator's settings
   in `HOPSMITH_TURN_ESTIMATOR` / `HOPSMITH_TURN_COEF`.
"""

from __future__ import annotations

import os
import time
from functools import cache
from typing import Any, get_args
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

from critic.scoring import judge_trajectory
from ground.io import read_records
from rl.config import DEFAULT_ESTIMATOR, ESTIMATOR_ENV, TURN_COEF_ENV, Estimator
from rl.rollout import episode_trajectory, mask_failed_turns, prompt_ids, run_episode
from rl.verl_layout import place_turn_rewards, turn_grpo
from schemas.config import JudgeConfig
from schemas.dataset import RLPrompt
from schemas.questions import Question
from synth.search import SearchEnvironment


@cache
def search_environment(index_dir: str) -> SearchEnvironment:
    """One loaded index per process, shared by every agent loop and tool instance."""
    return SearchEnvironment.load(index_dir)


@cache
def questions_by_id(path: str | None) -> dict[str, Question]:
    return {q.question_id: q for q in read_records(Question, path)} if path else {}


class TurnRewardOutput(AgentLoopOutput):
    """An agent-loop output whose `rm_scores` carry every turn's reward besides verl's outcome scalar.

    verl's worker calls `as_dict` after the reward loop set `reward_score`; verl writes that scalar on the
    last response token (the closing newline, mask 0), and the turn rewards go on each turn's last token.
    """

    def as_dict(self) -> dict[str, Any]:
        output = super().as_dict()
        if "rm_scores" not in output:  # never drop the turn rewards silently
            raise ValueError("no reward_score from verl's reward loop workers: the turn rewards travel with it "
                             "(a colocated reward model computes rewards after the agent loop; disable it)")
        mask = output["response_mask"].unsqueeze(0)
        last = mask.shape[1] - 1
        output["rm_scores"] = place_turn_rewards(
            mask, [list(self.extra_fields["turn_rewards"])], [float(output["rm_scores"][last])], [last])[0]
        return output


class HopsmithTurnAgentLoop(AgentLoopBase):
    """Multi-turn search agent whose every turn is judged; returns per-turn rewards in `extra_fields`.

    Registered through `agent_loops.yaml` (which carries its settings), not with verl's `@register`: a
    decorator entry has no settings and would replace the YAML one when this module is first imported.
    """

    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config, *,
                 index_dir: str, questions_path: str | None = None, max_turns: int = 60,
                 failed_turns: str = "mask", failed_turn_reward: float = -1.0, **kwargs):
        super().__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, data_config, **kwargs)
        rollout = self.config.actor_rollout_ref.rollout
        self.response_length = rollout.response_length
        self.max_observation_chars = rollout.multi_turn.max_tool_response_length
        self.environment = search_environment(index_dir)
        self.questions = questions_by_id(questions_path)
        self.max_turns = max_turns
        self.judge_config = JudgeConfig(failed_turns=failed_turns, failed_turn_reward=failed_turn_reward)

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        messages = [{"role": m["role"], "content": m["content"]} for m in kwargs["raw_prompt"]]
        extra_info = kwargs.get("extra_info") or {}
        request_id = uuid4().hex

        async def sample(context: list[int]) -> tuple[list[int], list[float] | None]:
            output = await self.server_manager.generate(request_id=request_id, prompt_ids=context,
                                                        sampling_params=sampling_params)
            return list(output.token_ids), output.log_probs

        started = time.perf_counter()
        episode = await run_episode(sample, self.tokenizer, self.environment.execute, prompt_ids(self.tokenizer, messages),
                                    max_turns=self.max_turns, max_response_tokens=self.response_length,
                                    max_observation_chars=self.max_observation_chars)
        prompt = RLPrompt(prompt_id=str(extra_info.get("prompt_id", request_id)),
                          question_id=str(extra_info.get("question_id", "")), prompt=messages,
                          answer=kwargs["reward_model"]["ground_truth"], aliases=list(extra_info.get("aliases", [])),
                          as_of=extra_info["as_of"], hops=int(extra_info.get("hops", 0)),
                          environment=self.environment.environment_id)
        trajectory = episode_trajectory(episode, messages, prompt, trajectory_id=request_id, policy="verl",
                                        engine="verl-rollout", seed=0, rollout_index=0,
                                        environment=self.environment.environment_id)
        judged = judge_trajectory(trajectory, self.questions.get(prompt.question_id), self.judge_config)
        response_mask, turn_rewards = mask_failed_turns(episode, judged, self.judge_config.failed_turns)
        passed = [j.verdict for j in judged.judgements]
        return TurnRewardOutput(
            prompt_ids=episode.prompt_ids, response_ids=episode.response_ids, response_mask=response_mask,
            response_logprobs=episode.logprobs, num_turns=2 * len(episode.turns) + 1,
            metrics=AgentLoopMetrics(generate_sequences=time.perf_counter() - started),
            extra_fields={
                "turn_rewards": turn_rewards, "outcome_reward": judged.outcome_reward,
                "turn_pass_rate": sum(passed) / max(len(passed), 1), "correct": trajectory.outcome.correct,
            },
        )


class TurnRewardManager(RewardManagerBase):
    """verl 0.9's per-sample reward manager: the rollout's scalar is the critic's outcome reward.

    The agent loop already judged the episode; its fields reach here as `tool_extra_fields`. The turn
    rewards travel in `TurnRewardOutput.as_dict`, not here: verl's reward path carries one scalar.
    """

    def __init__(self, config, tokenizer, compute_score=None, **kwargs):
        super().__init__(config, tokenizer, compute_score)

    async def run_single(self, data) -> dict:
        fields = data.non_tensor_batch["tool_extra_fields"][-1]
        return {"reward_score": float(fields["outcome_reward"]),
                "reward_extra_info": {key: fields[key] for key in ("turn_pass_rate", "correct")}}


def turn_grpo_settings() -> tuple[str, float]:
    """(estimator, turn_coef) from the launch script's environment: verl's `algorithm` config is a closed
    dataclass, so an extra `algorithm.turn_grpo` key would be an unknown key there."""
    estimator = os.environ.get(ESTIMATOR_ENV, DEFAULT_ESTIMATOR)
    if estimator not in get_args(Estimator):
        raise ValueError(f"{ESTIMATOR_ENV}={estimator!r}: expected one of {', '.join(get_args(Estimator))}")
    return estimator, float(os.environ.get(TURN_COEF_ENV, "1.0"))


def compute_turn_grpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index=None,
                                config=None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator `turn_grpo`: rl.advantages on the turn rewards read back from the token tensor.

    `gamma` and `norm_adv_by_std_in_grpo` come from verl's `algorithm` config; the rest from
    `turn_grpo_settings`.
    """
    estimator, turn_coef = turn_grpo_settings()
    return turn_grpo(
        token_level_rewards, response_mask, index, estimator=estimator, turn_coef=turn_coef,
        gamma=float(config.gamma) if config is not None else 1.0,
        scale=bool(config.norm_adv_by_std_in_grpo) if config is not None else True,
    )


if "turn_grpo" not in ADV_ESTIMATOR_REGISTRY:
    register_adv_est("turn_grpo")(compute_turn_grpo_advantage)


class HopsmithSearchTool(BaseTool):
    """One stage 3 tool (search, open_page or find_in_page) for verl's stock `tool_agent` loop."""

    def __init__(self, config: dict, tool_schema):
        super().__init__(config, tool_schema)
        self.environment = search_environment(config["index_dir"])

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        text, error = self.environment.execute(self.name, parameters)
        return ToolResponse(text=text), 0.0, {"tool_error": error}
