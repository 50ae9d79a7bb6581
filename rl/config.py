"""RL run configuration (importable without torch): one pydantic model, with named presets (`tiny-cpu` for the CPU check, `gpu` for a real model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["offline", "online"]
Estimator = Literal["turn_rloo", "outcome_grpo", "mt_grpo", "turn_return"]
# unbiased when the policy decides when to stop (rl.advantages.turn_rloo; tests/test_rl_stop_bias.py)
DEFAULT_ESTIMATOR: Estimator = "turn_rloo"
# the verl estimator `turn_grpo` reads its settings from these (set by `export-verl`'s launch script)
ESTIMATOR_ENV = "HOPSMITH_TURN_ESTIMATOR"
TURN_COEF_ENV = "HOPSMITH_TURN_COEF"
FailedTurns = Literal["mask", "penalty"]
OfflineObjective = Literal["awr", "filtered"]


class TinyModelConfig(BaseModel):
    """A random-initialised LLaMA and the size of the tokenizer trained for it, when no `model` is given."""

    model_config = ConfigDict(extra="forbid")
    vocab_size: int = 1024
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 8192


class RLConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(None, description="pretrained model folder; None trains a tiny random LLaMA")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    modes: list[Mode] = ["offline", "online"]
    split: str | None = Field("train", description="dataset split to train on (file prefix); None reads every "
                                                  "split (the test split is held out by default)")
    seed: int = 0
    max_len: int = 2048
    logprob_chunk: int = 512
    bf16: bool = Field(False, description="bf16 autocast (fp32 master weights) and a bf16 reference model")
    gradient_checkpointing: bool = False
    prefix_check_samples: int = Field(32, description="trajectories whose every prefix is re-encoded; the rest "
                                                      "check the whole conversation")
    lr: float = 1e-3
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    batch_size: int = 4
    max_trajectories: int | None = None
    # advantages
    estimator: Estimator = DEFAULT_ESTIMATOR
    turn_coef: float = 1.0
    gamma: float = 1.0
    failed_turns: FailedTurns = "mask"
    failed_turn_reward: float = -1.0
    scale_by_std: bool = True
    # offline: cloning the synthesized trajectories
    offline_steps: int = 4
    offline_objective: OfflineObjective = "awr"
    awr_beta: float = 1.0
    awr_max_weight: float = 20.0
    # online: rollouts in the search environment, critic-scored, PPO-clip
    online_steps: int = 2
    prompts_per_step: int = 2
    group_size: int = 2
    max_turns: int = 4
    max_new_tokens: int = 48
    temperature: float = 1.0
    ppo_epochs: int = 1
    clip_eps: float = 0.2
    kl_coef: float = 0.01
    index_dir: str | None = Field(None, description="search index folder; default: the prompt's environment, "
                                                    "else <shards>/../index")


PRESETS: dict[str, dict] = {
    # A random tiny policy fails every turn it writes; with `penalty` those turns still train (reward -1),
    # so the CPU check exercises the PPO/KL path. Real runs mask failed turns (ToolMind's better choice).
    "tiny-cpu": {"failed_turns": "penalty"},
    "gpu": {"bf16": True, "gradient_checkpointing": True, "lr": 1e-6, "max_len": 32768, "logprob_chunk": 2048, "batch_size": 8,
            "offline_steps": 200, "online_steps": 100, "prompts_per_step": 8, "group_size": 8, "max_turns": 60,
            "max_new_tokens": 4096, "temperature": 0.7, "ppo_epochs": 2, "kl_coef": 0.001},
}


def preset_config(name: str, **overrides) -> RLConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return RLConfig(**{**PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}})
