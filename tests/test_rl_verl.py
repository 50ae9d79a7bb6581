"""verl export: the token reward layout and `turn_grpo`, the parquet/config structure, and (where verl is
installed) the plugin's registration contract."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
import yaml

torch = pytest.importorskip("torch")

from rl.advantages import token_advantages, turn_advantages  # noqa: E402
from rl.export_verl import AGENT_NAME, export_verl  # noqa: E402
from rl.verl_layout import (  # noqa: E402
    place_turn_rewards,
    read_turn_rewards,
    turn_end_positions,
    turn_grpo,
    turn_ids_from_mask,
)
from tests.rl_fixtures import make_dataset  # noqa: E402

# two rollouts of one question: turns are the runs of 1s; the last position is the closing newline
MASK = torch.tensor([[1, 1, 0, 0, 1, 1, 1, 0, 0],
                     [1, 0, 0, 1, 1, 0, 1, 0, 0]])
TURN_REWARDS = [[1.0, 0.5], [0.0, 1.0, -1.0]]
OUTCOMES = [1.0, 0.0]


def test_turn_ids_and_ends_from_the_response_mask():
    assert turn_ids_from_mask(MASK).tolist() == [[0, 0, -1, -1, 1, 1, 1, -1, -1], [0, -1, -1, 1, 1, -1, 2, -1, -1]]
    assert turn_end_positions(MASK) == [[1, 6], [0, 4, 6]]


def test_turn_rewards_round_trip_through_the_token_tensor():
    rewards = place_turn_rewards(MASK, TURN_REWARDS, OUTCOMES, outcome_positions=[8, 8])
    assert rewards[0].tolist() == [0, 1.0, 0, 0, 0, 0, 0.5, 0, 1.0]
    outcome, turn_rewards, valid, _ = read_turn_rewards(rewards, MASK)
    assert outcome.tolist() == OUTCOMES
    assert turn_rewards.tolist() == [[1.0, 0.5, 0.0], [0.0, 1.0, -1.0]]
    assert valid.tolist() == [[True, True, False], [True, True, True]]
    with pytest.raises(ValueError):
        place_turn_rewards(MASK, [[1.0], [0.0, 1.0, -1.0]], OUTCOMES, [8, 8])
    with pytest.raises(ValueError):
        place_turn_rewards(MASK, TURN_REWARDS, OUTCOMES, [6, 8])


def test_turn_grpo_is_the_rl_estimator_on_the_decoded_turns():
    rewards = place_turn_rewards(MASK, TURN_REWARDS, OUTCOMES, [8, 8])
    advantages, returns = turn_grpo(rewards, MASK, index=["uid-a", "uid-a"], estimator="mt_grpo", turn_coef=0.5)
    valid = torch.tensor([[True, True, False], [True, True, True]])
    expected_turns = turn_advantages("mt_grpo", torch.tensor(OUTCOMES), torch.tensor([[1.0, 0.5, 0.0], [0.0, 1.0, -1.0]]),
                                     valid, valid, torch.tensor([0, 0]), turn_coef=0.5)
    expected = token_advantages(expected_turns, turn_ids_from_mask(MASK)) * MASK
    assert torch.allclose(advantages, expected)
    assert torch.equal(advantages, returns)
    assert (advantages[MASK == 0] == 0).all()
    # by hand: outcome advantages +1 / -1; turn 0 of rollout 0 gets 1 + .5 * (1 - .3) / std
    pool = torch.tensor([1.0, 0.5, 0.0, 1.0, -1.0])
    by_hand = 1 + 0.5 * (1.0 - pool.mean()) / (pool.std(unbiased=False) + 1e-6)
    assert advantages[0, 0].item() == pytest.approx(by_hand.item(), rel=1e-5)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from synth.environment import build_index
    from tests.trajectory_fixtures import make_graph

    root = tmp_path_factory.mktemp("verl")
    index = build_index(make_graph(root / "graph"), root / "index")
    shards = make_dataset(root / "dataset", environment=index.key)
    manifest = export_verl(shards, root / "verl", model="/models/nanbeige", index_dir=root / "index", n_gpus=2)
    return root, manifest


def test_export_writes_verl_rows(exported):
    root, manifest = exported
    table = pq.read_table(root / "verl" / "data" / "train.parquet")
    assert set(table.column_names) == {"prompt", "data_source", "ability", "reward_model", "extra_info", "agent_name"}
    rows = table.to_pylist()
    assert manifest.counts == {"rows:train": 2, "questions": 2}
    first = rows[0]
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert "<tools>" in first["prompt"][0]["content"]
    assert first["reward_model"] == {"style": "rule", "ground_truth": "Chicago"}
    assert first["agent_name"] == AGENT_NAME and first["data_source"] == "hopsmith"
    extra = first["extra_info"]
    assert extra["index"] == 0 and extra["need_tools_kwargs"] is True
    assert set(extra["tools_kwargs"]) == {"search", "open_page", "find_in_page", "answer"}
    assert extra["tools_kwargs"]["search"]["create_kwargs"]["index_dir"] == str((root / "index").resolve())
    assert extra["aliases"] == ["Chicago, Illinois"] and extra["as_of"] == "2026-06-01"
    assert [r["extra_info"]["index"] for r in rows] == [0, 1]


def test_export_writes_configs_and_launch_script(exported):
    root, _ = exported
    out = root / "verl"
    loops = yaml.safe_load((out / "agent_loops.yaml").read_text())
    assert loops[0]["name"] == AGENT_NAME and loops[0]["_target_"] == "rl.verl_plugin.HopsmithTurnAgentLoop"
    assert loops[0]["questions_path"] == str(out / "questions.parquet") and (out / "questions.parquet").is_file()
    config = yaml.safe_load((out / "hopsmith_turn_grpo.yaml").read_text())
    assert config["defaults"] == ["ppo_trainer", "_self_"]
    assert config["algorithm"]["adv_estimator"] == "turn_grpo"
    assert config["reward"]["reward_manager"] == {"source": "importlib", "name": "TurnRewardManager",
                                                  "module": {"path": "pkg://rl.verl_plugin"}}
    assert "reward_manager" not in config and "reward_model" not in config  # verl 0.8 keys, ignored by 0.9
    rollout = config["actor_rollout_ref"]["rollout"]
    assert rollout["multi_turn"]["enable"] and rollout["agent"]["default_agent_loop"] == AGENT_NAME
    assert rollout["agent"]["agent_loop_config_path"] == str(out / "agent_loops.yaml")
    assert config["data"]["train_files"] == str(out / "data" / "train.parquet")
    assert config["actor_rollout_ref"]["model"]["path"] == "/models/nanbeige"
    assert config["trainer"]["n_gpus_per_node"] == 2
    tools = yaml.safe_load((out / "tool_config.yaml").read_text())["tools"]
    assert [t["tool_schema"]["function"]["name"] for t in tools] == ["search", "open_page", "find_in_page", "answer"]
    launch = out / "run_verl.sh"
    assert os.access(launch, os.X_OK)
    script = launch.read_text()
    assert "--config-name hopsmith_turn_grpo" in script and "verl.trainer.main_ppo" in script
    assert 'export VERL_USE_EXTERNAL_MODULES="rl.verl_plugin' in script
    assert 'HOPSMITH_TURN_ESTIMATOR="${HOPSMITH_TURN_ESTIMATOR:-turn_rloo}"' in script


def test_export_without_an_index_is_a_clear_error(tmp_path):
    from ground.errors import UserError

    shards = make_dataset(tmp_path / "dataset")
    with pytest.raises(UserError, match="search index"):
        export_verl(shards, tmp_path / "verl", index_dir=tmp_path / "missing")


def test_verl_plugin_registers_the_agent_loop_and_the_estimator(exported):
    pytest.importorskip("verl")
    import hydra.utils
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    import rl.verl_plugin as plugin

    root, _ = exported
    (loop,) = yaml.safe_load((root / "verl" / "agent_loops.yaml").read_text())
    assert hydra.utils.get_class(loop["_target_"]) is plugin.HopsmithTurnAgentLoop
    assert issubclass(plugin.HopsmithTurnAgentLoop, AgentLoopBase)
    estimator = get_adv_estimator_fn("turn_grpo")
    rewards = place_turn_rewards(MASK, TURN_REWARDS, OUTCOMES, [8, 8])
    advantages, _ = estimator(token_level_rewards=rewards, response_mask=MASK, index=["a", "a"], config=None)
    assert torch.allclose(advantages, turn_grpo(rewards, MASK, ["a", "a"])[0])
    assert issubclass(plugin.TurnRewardManager, plugin.RewardManagerBase)
