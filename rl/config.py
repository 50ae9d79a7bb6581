"""RL run configuration (importable without torch): one pydantic model, with named presets (`tiny-cpu` for the CPU check, `gpu` for a real model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.config import Share

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
    vocab_size: int = Field(1024, ge=1)
    hidden_size: int = Field(64, ge=1)
    intermediate_size: int = Field(128, ge=1)
    num_hidden_layers: int = Field(2, ge=1)
    num_attention_heads: int = Field(4, ge=1)
    num_key_value_heads: int = Field(2, ge=1)
    max_position_embeddings: int = Field(8192, ge=1)


class RLConfig(BaseModel):
    """Every numeric field has its range here: a config outside them is refused before any work starts."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = Field(None, description="pretrained model folder; None trains a tiny random LLaMA")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)
    modes: list[Mode] = ["offline", "online"]
    split: str | None = Field("train", description="dataset split to train on (file prefix); None reads every "
                                                  "split (the test split is held out by default)")
    pass_band: list[Share] | None = Field(None, min_length=2, max_length=2,
                                          description="online prompts: the `questions` config's questions whose "
                                          "pass rate lies in [LO, HI] instead of the `rl` config")
    seed: int = Field(0, ge=0)
    max_len: int = Field(2048, ge=1, description="tokens per trajectory at most")
    logprob_chunk: int = Field(512, ge=1)
    bf16: bool = Field(False, description="bf16 autocast (fp32 master weights) and a bf16 reference model")
    gradient_checkpointing: bool = False
    prefix_check_samples: int = Field(32, ge=0, description="trajectories whose every prefix is re-encoded; the rest "
                                                      "check the whole conversation")
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    grad_clip: float = Field(1.0, gt=0, description="largest gradient norm")
    batch_size: int = Field(4, ge=1)
    max_trajectories: int | None = Field(None, ge=1, description="trajectories trained on at most; None: all")
    # advantages
    estimator: Estimator = DEFAULT_ESTIMATOR
    turn_coef: float = Field(1.0, ge=0)
    gamma: Share = 1.0
    failed_turns: FailedTurns = "mask"
    failed_turn_reward: float = Field(-1.0, ge=-10.0, le=0.0, description="a penalty: at most 0")
    scale_by_std: bool = True
    # offline: cloning the synthesized trajectories
    offline_steps: int = Field(4, ge=0)
    offline_objective: OfflineObjective = "awr"
    awr_beta: float = Field(1.0, gt=0, description="AWR temperature: weights are exp(advantage / beta)")
    awr_max_weight: float = Field(20.0, gt=0)
    # online: rollouts in the search environment, critic-scored, PPO-clip
    online_steps: int = Field(2, ge=0)
    prompts_per_step: int = Field(2, ge=1)
    group_size: int = Field(2, ge=1, description="rollouts per prompt (GRPO's group)")
    max_turns: int = Field(4, ge=1)
    max_new_tokens: int = Field(48, ge=1)
    temperature: float = Field(1.0, gt=0.0, le=2.0, description="sampling temperature of online rollouts")
    ppo_epochs: int = Field(1, ge=1)
    clip_eps: Share = 0.2
    kl_coef: float = Field(0.01, ge=0)
    index_dir: str | None = Field(None, description="search index folder; default: the prompt's environment, "
                                                    "else <shards>/../index")

    @field_validator("pass_band")
    @classmethod
    def _band_in_order(cls, band: list[float] | None) -> list[float] | None:
        if band is not None and band[0] > band[1]:
            raise ValueError(f"pass_band needs LO <= HI, got {band}")
        return band


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
