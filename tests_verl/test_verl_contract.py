"""hopsmith's verl export against the real verl 0.9.1, step by step up to where a GPU would be needed.

Every step goes through verl's own code: `RLHFDataset` on the exported parquet with the launch config's
`data.*` keys; the tools through `load_all_tools`; the agent loop built and run by verl's agent-loop worker
(`_run_agent_loop`: `hydra.utils.instantiate(..., data_config=...)`) against the search index, with verl's
reward loop worker calling the plugin's reward manager and the v1 worker's `_agent_loop_postprocess`
forming the fields it stores for the trainer; then, in a fresh process that only did what verl's trainer
does at start (import verl with the launch script's environment), the v1 trainer's `_compute_advantage`
on those fields with `algorithm.adv_estimator=turn_grpo`. Only the LLM server (a scripted policy) and the
TransferQueue store (a dict) stand in for GPU-side services.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
import torch
from omegaconf import OmegaConf

from tests_verl.conftest import compose_launch_config, compose_packaged_config, flat_keys

REPO = Path(__file__).resolve().parent.parent


def test_launch_overrides_compose_onto_verls_ppo_trainer_with_no_unknown_key(exported, trainer_config):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    ours = OmegaConf.to_container(compose_launch_config(exported))
    packaged = OmegaConf.to_container(compose_packaged_config())
    assert sorted(flat_keys(ours) - flat_keys(packaged)) == []
    written = OmegaConf.to_container(OmegaConf.load(exported / "hopsmith_turn_grpo.yaml"))
    overrides = flat_keys({k: v for k, v in written.items() if k not in ("hydra", "defaults")})
    assert len(overrides) >= 40 and overrides <= flat_keys(packaged)
    composed = OmegaConf.create(ours)
    for key in overrides:  # every override took effect
        assert OmegaConf.select(composed, key) == OmegaConf.select(OmegaConf.create(written), key), key
    assert trainer_config.algorithm.adv_estimator == "turn_grpo" and trainer_config.trainer.use_v1
    assert trainer_config.reward.reward_manager.name == "TurnRewardManager"
    validate_config(config=trainer_config, use_reference_policy=need_reference_policy(trainer_config),
                    use_critic=need_critic(trainer_config))


def test_rlhf_dataset_reads_the_export_with_the_launch_data_keys(exported, trainer_config, tiny_model):
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, get_dataset_class

    assert get_dataset_class(trainer_config.data) is RLHFDataset
    tokenizer = hf_tokenizer(str(tiny_model))
    dataset = RLHFDataset(data_files=trainer_config.data.train_files, tokenizer=tokenizer, config=trainer_config.data)
    rows = pq.read_table(trainer_config.data.train_files).num_rows
    assert rows > 30 and len(dataset) == rows  # no prompt is filtered as overlong
    item = dataset[0]
    assert [m["role"] for m in item["raw_prompt"]] == ["system", "user"]
    assert item["agent_name"] == "hopsmith_turn_agent" and item["data_source"] == "hopsmith"
    assert set(item["tools_kwargs"]) == {"search", "open_page", "find_in_page", "answer"}
    assert item["extra_info"]["question_id"] and item["reward_model"]["ground_truth"]


def test_tools_load_through_verls_tool_loader_and_search(trainer_config):
    from verl.tools.tool_registry import load_all_tools

    import rl.verl_plugin as plugin

    multi_turn = trainer_config.actor_rollout_ref.rollout.multi_turn
    tools = load_all_tools(tool_config_path=multi_turn.tool_config_path, function_tool_path=multi_turn.function_tool_path)
    assert [tool.name for tool in tools] == ["search", "open_page", "find_in_page", "answer"]
    assert all(isinstance(tool, plugin.HopsmithSearchTool) for tool in tools)
    search = tools[0]

    async def call():
        instance, _ = await search.create()
        return await search.execute(instance, {"query": "film director"})

    response, reward, metrics = asyncio.run(call())
    assert response.text.startswith("Results for 'film director':\n1. ") and metrics == {"tool_error": False}


class ScriptedServer:
    """The LLM server client: per request id, first a search call, then the final answer.

    The first episode answers the row's ground truth, every later one a wrong name, so a GRPO group has
    one right and one wrong rollout. The wrong name differs from the truth in token count: verl's
    `list_of_dict_to_tensordict` stacks equal-length response masks into a dense tensor, which its v1
    `_compute_advantage` (`response_to_nested`) refuses, so a group of equal-length rollouts is not what
    this check is about.
    """

    def __init__(self, tokenizer, question: str, answer: str):
        self.tokenizer, self.question, self.answer = tokenizer, question, answer
        self.calls: dict[str, int] = {}
        length = len(tokenizer.encode(answer, add_special_tokens=False))
        self.wrong = next(name for name in ("Nobody In Particular", "Nobody In Particular At All")
                          if len(tokenizer.encode(name, add_special_tokens=False)) != length)

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        step = self.calls.setdefault(request_id, 0)
        self.calls[request_id] += 1
        if step == 0:
            call = json.dumps({"name": "search", "arguments": {"query": self.question}})
            text = f"<think>\nSearch first.\n</think>\n\n<tool_call>\n{call}\n</tool_call>"
        else:
            answer = self.answer if len(self.calls) == 1 else self.wrong
            text = f"<think>\nI read the results.\n</think>\n\n\\boxed{{{answer}}}"
        ids = self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


class LocalRewardHandle:
    """verl's `RewardLoopWorker` called in process: `handle.compute_score.remote(data)` as on a Ray actor."""

    def __init__(self, worker):
        self.compute_score = SimpleNamespace(remote=worker.compute_score)


@pytest.fixture(scope="module")
def episodes(trainer_config, exported, tmp_path_factory):
    """Two sessions of one prompt through verl's v1 agent-loop worker; returns what it stores for the trainer."""
    from tensordict import TensorDict
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.utils.dataset.rl_dataset import RLHFDataset

    stored: dict[str, dict] = {}

    async def kv_batch_put(keys, fields, tags, partition_id):
        assert isinstance(fields, TensorDict)
        for index, key in enumerate(keys):
            stored[key] = {name: fields[name][index] for name in ("responses", "response_mask", "rm_scores")}
            stored[key]["extra_fields"] = fields["extra_fields"][index]
            stored[key]["raw_prompt"] = fields["raw_prompt"][index]
            stored[key]["uid"] = fields["uid"][index]

    reward_worker = RewardLoopWorker(trainer_config)
    worker_class = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__  # the class under its Ray actor wrapper
    worker = worker_class.__new__(worker_class)
    dataset = RLHFDataset(data_files=trainer_config.data.train_files, tokenizer=reward_worker.input_tokenizer,
                          config=trainer_config.data)
    row = dataset[0]
    server = ScriptedServer(reward_worker.input_tokenizer, row["raw_prompt"][-1]["content"],
                            row["reward_model"]["ground_truth"])
    # the TQ worker's own constructor, minus `tq.init()` (the TransferQueue service runs beside a GPU trainer)
    AgentLoopWorker.__init__(worker, trainer_config, server, reward_loop_worker_handles=[LocalRewardHandle(reward_worker)])
    prompt = {key: value for key, value in row.items() if not isinstance(value, torch.Tensor)}
    prompt.update(uid="uid0", global_steps=1)
    trajectory = {"step": 1, "sample_index": 0, "rollout_n": 0, "validate": False}
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    original = agent_loop_tq.tq.async_kv_batch_put
    agent_loop_tq.tq.async_kv_batch_put = kv_batch_put
    try:
        for session in range(2):
            asyncio.run(worker._run_agent_loop(sampling, trajectory=trajectory, trace=False, session_id=session,
                                               **prompt))
    finally:
        agent_loop_tq.tq.async_kv_batch_put = original
    return stored, row, worker


def test_agent_loop_runs_an_episode_as_verls_worker_builds_it(episodes):
    import rl.verl_plugin as plugin

    stored, row, worker = episodes
    assert set(stored) == {"uid0_0_0", "uid0_1_0"}
    good, bad = stored["uid0_0_0"], stored["uid0_1_0"]
    assert good["extra_fields"]["correct"] is True and bad["extra_fields"]["correct"] is False
    text = worker.tokenizer.decode(good["responses"].tolist())
    assert "<tool_response>\nResults for " in text and "\\boxed{" in text
    assert list(good["raw_prompt"]) == list(row["raw_prompt"])
    mask = good["response_mask"]
    assert mask[0] == 1 and mask[-1] == 0 and 0 in mask.tolist()
    assert plugin.search_environment.cache_info().currsize == 1  # one index per process, shared


def test_turn_rewards_travel_in_rm_scores(episodes):
    from rl.verl_layout import turn_end_positions

    stored, _, _ = episodes
    for fields in stored.values():
        extra, scores, mask = fields["extra_fields"], fields["rm_scores"], fields["response_mask"]
        ends = turn_end_positions(mask.unsqueeze(0))[0]
        assert len(ends) == len(extra["turn_rewards"]) >= 1
        assert scores[ends].tolist() == pytest.approx(extra["turn_rewards"])
        # the reward loop's scalar (the plugin reward manager: the critic's outcome) on the last token
        assert scores[-1].item() == pytest.approx(extra["outcome_reward"])
        assert extra["reward_extra_info"]["correct"] == extra["correct"]
        assert torch.count_nonzero(scores) <= len(ends) + 1


ADVANTAGE_STEP = textwrap.dedent('''
    """What verl's v1 trainer does at start and at its advantage step; imports nothing of hopsmith itself."""
    import sys, torch
    import verl  # verl imports VERL_USE_EXTERNAL_MODULES here, as in every process it starts
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1 import trainer_base
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    stored, config_path, out = torch.load(sys.argv[1], weights_only=False), sys.argv[2], sys.argv[3]
    config = OmegaConf.load(config_path)
    keys = sorted(stored)
    # the rows as the agent-loop worker put them into TransferQueue (same helper, same uid field)
    fields = list_of_dict_to_tensordict([{"uid": stored[k]["uid"], "response_mask": stored[k]["response_mask"],
                                          "rm_scores": stored[k]["rm_scores"]} for k in keys])
    written = {}
    trainer_base.tq.kv_batch_get = lambda keys, partition_id, select_fields: fields.select(
        *[f for f in select_fields if f in fields.keys()])
    trainer_base.tq.kv_batch_put = lambda keys, partition_id, fields: written.update(fields=fields)
    trainer_cls = trainer_base.get_trainer_cls(config.trainer.v1.trainer_mode)  # as TaskRunnerV1 picks it
    trainer = trainer_cls.__new__(trainer_cls)
    trainer.config = config
    trainer._compute_advantage(trainer_base.KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train"), metrics={})
    advantages = written["fields"]["advantages"]
    torch.save({"advantages": [advantages[i] for i in range(len(keys))], "keys": keys,
                "plugin_imported": "rl.verl_plugin" in sys.modules}, out)
''')


def run_advantage_step(episodes, trainer_config, launch_env, tmp_path) -> dict:
    stored, _, _ = episodes
    tensors = {key: {"uid": f["uid"], "response_mask": f["response_mask"], "rm_scores": f["rm_scores"]}
               for key, f in stored.items()}
    torch.save(tensors, tmp_path / "stored.pt")
    OmegaConf.save(trainer_config, tmp_path / "config.yaml", resolve=True)
    (tmp_path / "step.py").write_text(ADVANTAGE_STEP)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **launch_env}
    result = subprocess.run([sys.executable, str(tmp_path / "step.py"), str(tmp_path / "stored.pt"),
                             str(tmp_path / "config.yaml"), str(tmp_path / "out.pt")],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(tmp_path / "out.pt", weights_only=False)


def test_turn_grpo_runs_in_a_trainer_process_from_the_launch_environment(episodes, trainer_config, launch_env,
                                                                         tmp_path):
    from rl.advantages import token_advantages, turn_advantages
    from rl.verl_layout import turn_end_positions, turn_ids_from_mask

    assert launch_env["VERL_USE_EXTERNAL_MODULES"].split(",")[0] == "rl.verl_plugin"
    assert os.environ.get("HOPSMITH_ROOT", str(REPO)) in launch_env["PYTHONPATH"].split(":")
    result = run_advantage_step(episodes, trainer_config, launch_env, tmp_path)
    assert result["plugin_imported"]
    stored, _, _ = episodes
    keys = result["keys"]
    masks = [stored[k]["response_mask"] for k in keys]
    width = max(len(m) for m in masks)
    mask = torch.stack([torch.nn.functional.pad(m, (0, width - len(m))) for m in masks])
    turns = [list(stored[k]["extra_fields"]["turn_rewards"]) for k in keys]
    depth = max(len(t) for t in turns)
    turn_rewards = torch.tensor([t + [0.0] * (depth - len(t)) for t in turns])
    valid = torch.tensor([[i < len(t) for i in range(depth)] for t in turns])
    outcome = torch.tensor([float(stored[k]["extra_fields"]["outcome_reward"]) for k in keys])
    estimator, coef = launch_env["HOPSMITH_TURN_ESTIMATOR"], float(launch_env["HOPSMITH_TURN_COEF"])
    expected_turns = turn_advantages(estimator, outcome, turn_rewards, valid, valid, torch.zeros(len(keys)).long(),
                                     failed_turns="penalty", turn_coef=coef)
    expected = token_advantages(expected_turns, turn_ids_from_mask(mask)) * mask
    for row, advantages in enumerate(result["advantages"]):
        assert torch.allclose(advantages.float(), expected[row, : len(masks[row])], atol=1e-5)
    # the two rollouts differ in outcome, so every trained token carries a non-zero advantage
    assert all((a[masks[i] == 1] != 0).all() for i, a in enumerate(result["advantages"]))
    assert turn_end_positions(mask)[0]


def test_launch_script_start_up_check_passes_in_the_verl_environment(exported, tmp_path):
    """`run_verl.sh` up to its `exec`: exports, then the verl version and plugin import check."""
    script = (exported / "run_verl.sh").read_text()
    (tmp_path / "start.sh").write_text(script[: script.index("exec python3")])
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/tmp")}
    if os.environ.get("HOPSMITH_ROOT"):
        env["HOPSMITH_ROOT"] = os.environ["HOPSMITH_ROOT"]
    result = subprocess.run(["bash", str(tmp_path / "start.sh")], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]


def test_turn_reward_output_lays_turn_rewards_and_never_drops_them():
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics

    from rl.verl_plugin import TurnRewardOutput

    def output(**fields):
        return TurnRewardOutput(prompt_ids=[1], response_ids=[5, 6, 7, 8, 9], response_mask=[1, 1, 0, 1, 0],
                                metrics=AgentLoopMetrics(), extra_fields={"turn_rewards": [0.5, -1.0]}, **fields)

    assert output(reward_score=1.0).as_dict()["rm_scores"].tolist() == [0.0, 0.5, 0.0, -1.0, 1.0]
    with pytest.raises(ValueError, match="no reward_score"):
        output().as_dict()
