"""hopsmith's verl plugin: the turn-reward agent loop, its reward manager, the `turn_grpo` estimator, the search tool.

Imported only inside a verl environment (it imports verl); `hopsmith rl export-verl` writes the YAML that
points verl here. Written against verl's agent-loop API (verl.experimental.agent_loop, verl 0.8-0.9).

Flow per rollout: the agent loop runs `rl.rollout.run_episode` (the rl/ trainer's own turn loop) with
verl's inference servers as the sampler, executes each tool call in the stage 3 `SearchEnvironment`,
judges every turn with the stage 4 critic,
masks failed turns (policy `mask`) or keeps their penalty reward (`penalty`), and returns the turn
rewards; the reward manager lays them on the tokens (`rl.verl_layout`); `turn_grpo` computes turn-level
advantages with the same functions as the rl/ trainer.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est
from verl.workers.reward_manager.abstract import AbstractRewardManager

from critic.scoring import judge_trajectory
from pipeline.io import read_records
from rl.rollout import episode_trajectory, mask_failed_turns, prompt_ids, run_episode
from rl.verl_layout import place_turn_rewards, turn_grpo
from schemas.config import JudgeConfig
from schemas.dataset import RLPrompt
from schemas.questions import Question
from synth.environment import SearchEnvironment


@cache
def search_environment(index_dir: str) -> SearchEnvironment:
    """One loaded index per process, shared by every agent loop and tool instance."""
    return SearchEnvironment.load(index_dir)


@cache
def questions_by_id(path: str | None) -> dict[str, Question]:
    return {q.question_id: q for q in read_records(Question, path)} if path else {}


class HopsmithTurnAgentLoop(AgentLoopBase):
    """Multi-turn search agent whose every turn is judged; returns per-turn rewards in `extra_fields`.

    Registered through `agent_loops.yaml` (which carries its settings), not with verl's `@register`: a
    decorator entry has no settings and would replace the YAML one when this module is first imported.
    """

    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, *,
                 index_dir: str, questions_path: str | None = None, max_turns: int = 60,
                 failed_turns: str = "mask", failed_turn_reward: float = -1.0, **kwargs):
        super().__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, **kwargs)
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
        return AgentLoopOutput(
            prompt_ids=episode.prompt_ids, response_ids=episode.response_ids, response_mask=response_mask,
            response_logprobs=episode.logprobs, num_turns=2 * len(episode.turns) + 1,
            metrics=AgentLoopMetrics(generate_sequences=time.perf_counter() - started),
            extra_fields={
                "turn_rewards": turn_rewards, "outcome_reward": judged.outcome_reward,
                "outcome_position": len(episode.response_ids) - 1,
                "turn_pass_rate": sum(passed) / max(len(passed), 1), "correct": trajectory.outcome.correct,
            },
        )


class TurnRewardManager(AbstractRewardManager):
    """Lays the agent loop's turn rewards on each turn's last token and the outcome on the closing token."""

    def __init__(self, tokenizer, num_examine, compute_score=None, reward_fn_key: str = "data_source", **kwargs):
        self.tokenizer = tokenizer

    def __call__(self, data, return_dict: bool = False):
        batch = data.non_tensor_batch
        rewards = place_turn_rewards(
            data.batch["response_mask"].cpu(), [list(r) for r in batch["turn_rewards"]],
            [float(r) for r in batch["outcome_reward"]], [int(p) for p in batch["outcome_position"]],
        ).to(data.batch["response_mask"].device)
        if not return_dict:
            return rewards
        extra = {key: list(batch[key]) for key in ("outcome_reward", "turn_pass_rate", "correct")}
        return {"reward_tensor": rewards, "reward_extra_info": extra}


def compute_turn_grpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index=None,
                                config=None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator `turn_grpo`: rl.advantages on the turn rewards read back from the token tensor.

    Settings come from `algorithm.turn_grpo.{estimator, turn_coef}` of the trainer config.
    """
    settings = (config.get("turn_grpo") if hasattr(config, "get") else None) or {}
    return turn_grpo(
        token_level_rewards, response_mask, index,
        estimator=settings.get("estimator", "mt_grpo"),
        turn_coef=float(settings.get("turn_coef", 1.0)),
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
