"""`hopsmith rl export-verl`: verl parquet from the `rl` shards, plus the configs and launch script for the plugin.

verl runs in its own environment (it pins an older transformers); this writes everything it needs and
imports nothing of verl. Output folder:

    data/<split>.parquet     verl rows: prompt, data_source, ability, reward_model, extra_info, agent_name
    questions.parquet        the questions (gold paths) the critic judges rollouts against
    agent_loops.yaml         registers `rl.verl_plugin.HopsmithTurnAgentLoop` with its environment settings
    tool_config.yaml         the search tools for verl's stock `tool_agent` loop
    hopsmith_turn_grpo.yaml  the trainer config (turn_grpo estimator, reward manager, multi-turn rollout)
    run_verl.sh              the launch script
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from ground.errors import UserError
from ground.io import (
    atomic_write_text,
    read_manifest,
    shard_files,
    write_records,
    write_table,
)
from ground.stage import begin_stage
from ground.storage import StorePath, as_path
from pipeline.renders import render_tools
from rl.config import DEFAULT_ESTIMATOR, ESTIMATOR_ENV, TURN_COEF_ENV
from rl.data import config_files, prompts_by_split, read_questions
from schemas.dataset import RLPrompt
from schemas.manifest import Manifest
from schemas.questions import Question

AGENT_NAME = "hopsmith_turn_agent"
ABILITY = "deep_search"
REPO_ROOT = Path(__file__).resolve().parent.parent


def verl_row(prompt: RLPrompt, index: int, index_dir: str) -> dict[str, Any]:
    """One verl row. `tools_kwargs` gives every tool the index folder it opens."""
    create = {"create_kwargs": {"index_dir": index_dir}}
    return {
        "prompt": [{"role": m.role, "content": m.content} for m in prompt.prompt],
        "data_source": prompt.data_source,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": prompt.answer},
        "extra_info": {
            "index": index,
            "question_id": prompt.question_id,
            "prompt_id": prompt.prompt_id,
            "aliases": list(prompt.aliases),
            "as_of": prompt.as_of.isoformat(),
            "hops": prompt.hops,
            "environment": prompt.environment,
            "need_tools_kwargs": True,
            "tools_kwargs": {spec["function"]["name"]: create for spec in render_tools()},
        },
        "agent_name": AGENT_NAME,
    }


def trainer_config(run_dir: Path, model: str, splits: list[str], n_gpus: int) -> dict[str, Any]:
    """A Hydra config over verl's `ppo_trainer`: multi-turn vLLM rollouts, our agent loop, reward manager and
    estimator. Every key is one of `ppo_trainer`'s (verl's dataclass configs are closed); the estimator's
    own settings travel in the launch script's environment (`rl.verl_plugin.turn_grpo_settings`)."""
    train = str(run_dir / "data" / "train.parquet") if "train" in splits else str(run_dir / "data" / f"{splits[0]}.parquet")
    val = str(run_dir / "data" / "test.parquet") if "test" in splits else train
    return {
        "hydra": {"searchpath": ["pkg://verl/trainer/config"]},
        "defaults": ["ppo_trainer", "_self_"],
        "data": {"train_files": train, "val_files": val, "return_raw_chat": True, "train_batch_size": 32,
                 "max_prompt_length": 4096, "max_response_length": 28672, "filter_overlong_prompts": True},
        "actor_rollout_ref": {
            "model": {"path": model, "use_remove_padding": True, "enable_gradient_checkpointing": True},
            "actor": {"optim": {"lr": 1e-6}, "ppo_mini_batch_size": 16, "use_kl_loss": True, "kl_loss_coef": 0.001,
                      "kl_loss_type": "low_var_kl", "loss_agg_mode": "token-mean",
                      "ppo_micro_batch_size_per_gpu": 1},
            "rollout": {
                "name": "vllm", "mode": "async", "n": 8, "temperature": 1.0, "gpu_memory_utilization": 0.6,
                "log_prob_micro_batch_size_per_gpu": 1,
                "multi_turn": {"enable": True, "format": "hermes", "max_assistant_turns": 60,
                               "max_tool_response_length": 4096,
                               "tool_config_path": str(run_dir / "tool_config.yaml")},
                "agent": {"agent_loop_config_path": str(run_dir / "agent_loops.yaml"),
                          "default_agent_loop": AGENT_NAME},
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": 1},
        },
        "algorithm": {"adv_estimator": "turn_grpo", "use_kl_in_reward": False, "norm_adv_by_std_in_grpo": True,
                      "gamma": 1.0},
        "reward": {"reward_manager": {"source": "importlib", "name": "TurnRewardManager",
                                      "module": {"path": "pkg://rl.verl_plugin"}}},
        "trainer": {"use_v1": True, "project_name": "hopsmith", "experiment_name": "turn_grpo", "logger": ["console"],
                    "n_gpus_per_node": n_gpus, "nnodes": 1, "total_epochs": 1, "save_freq": 50, "test_freq": 25,
                    "default_local_dir": str(run_dir / "checkpoints")},
    }


PLUGIN_MODULE = "rl.verl_plugin"
# what the plugin imports besides verl and torch (pip names); run_verl.sh checks them before starting Ray
PLUGIN_REQUIREMENTS = ("pydantic", "pyarrow", "numpy", "bm25s", "mwparserfromhell", "openai", "pyyaml")

LAUNCH = """#!/usr/bin/env bash
# Turn-level GRPO for hopsmith on verl {verl_version} (its default v1 trainer). Run it on a GPU node inside
# the verl environment: verl {verl_version} with vLLM and TransferQueue (`pip install 'verl[verl-core,vllm]=={verl_version}'`),
# plus what the plugin imports: {requirements}.
# Extra Hydra overrides pass through, e.g. ./run_verl.sh trainer.n_gpus_per_node=4 actor_rollout_ref.model.path=/models/x
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
export PYTHONPATH="${{HOPSMITH_ROOT:-{root}}}:${{PYTHONPATH:-}}"
# verl imports these modules in every process it starts (driver, Ray workers): registers `turn_grpo`
export VERL_USE_EXTERNAL_MODULES="{module}${{VERL_USE_EXTERNAL_MODULES:+,$VERL_USE_EXTERNAL_MODULES}}"
export {estimator_env}="${{{estimator_env}:-{estimator}}}" {coef_env}="${{{coef_env}:-{turn_coef}}}"
python3 -c "import verl, {module}; assert verl.__version__ == '{verl_version}', verl.__version__" || {{
  echo "run_verl.sh: needs verl {verl_version} and the hopsmith plugin importable (missing: see above)" >&2; exit 2; }}
exec python3 -m verl.trainer.main_ppo --config-path "$HERE" --config-name hopsmith_turn_grpo "$@"
"""
VERL_VERSION = "0.9.1"


def launch_script(estimator: str, turn_coef: float) -> str:
    return LAUNCH.format(root=REPO_ROOT, module=PLUGIN_MODULE, verl_version=VERL_VERSION,
                         requirements=", ".join(PLUGIN_REQUIREMENTS), estimator_env=ESTIMATOR_ENV,
                         coef_env=TURN_COEF_ENV, estimator=estimator, turn_coef=turn_coef)


def export_verl(shards: str | Path, out_dir: str | Path, *, model: str = "Nanbeige/Nanbeige4.1-3B",
                index_dir: str | Path | None = None, estimator: str = DEFAULT_ESTIMATOR, turn_coef: float = 1.0,
                failed_turns: str = "mask", failed_turn_reward: float = -1.0, max_turns: int = 60,
                n_gpus: int = 8, run_dir: str | Path | None = None,
                pass_band: Sequence[float] | None = None) -> Manifest:
    """Write verl's data, configs and launch script for the `rl` shards of a dataset folder, or with
    `pass_band` (LO, HI) for the questions of its `questions` config whose pass rate lies in that band.

    `shards`, `out_dir` and `index_dir` may be URLs (`s3://`, `gs://`). The configs name the files by the
    folder verl runs in, `run_dir`: `out_dir` when local; an export to object storage must say where it
    will be copied to on the training machine (verl's loaders and Hydra read local files). The index may
    stay a URL: the plugin downloads it (once per machine, `ground.storage.readable_folder`)."""
    shards, out_dir = as_path(shards), as_path(out_dir).resolve()
    if run_dir is None and isinstance(out_dir, StorePath):
        raise UserError(f"--out {out_dir} is on object storage, and verl reads its data and configs from local "
                        "files: pass --run-dir, the local folder you will copy the export to on the training "
                        "machine (e.g. `aws s3 sync` it there, then run run_verl.sh from it)")
    run_dir = Path(run_dir).resolve() if run_dir is not None else out_dir
    # with a band the prompts come from the `questions` config (every question with its rate), else the `rl` config
    by_split = prompts_by_split(shards, pass_band=pass_band)
    if not by_split:
        raise UserError(f"no question of {shards} has a pass rate in the band {list(pass_band or ())}")
    question_files = shard_files(shards / "data" / "questions")
    files = question_files + (config_files(shards, "rl") if pass_band is None else [])
    index_dir = as_path(index_dir) if index_dir else shards.resolve().parent / "index"
    if read_manifest(index_dir) is None:
        raise UserError(f"no finished search index in {index_dir} (pass --index DIR)")
    settings = {"model": model, "index_dir": str(index_dir.resolve()), "estimator": estimator, "turn_coef": turn_coef,
                "failed_turns": failed_turns, "failed_turn_reward": failed_turn_reward, "max_turns": max_turns,
                "n_gpus": n_gpus}
    if run_dir != out_dir:
        settings["run_dir"] = str(run_dir)
    if pass_band is not None:
        settings["pass_band"] = list(pass_band)
    run = begin_stage("export-verl", out_dir, settings, input_files=files)
    if run.done:
        return run.finished
    counts: dict[str, int] = {}
    outputs: dict[str, list[str]] = {"data": []}
    for split, prompts in sorted(by_split.items()):
        rows = [verl_row(p, i, settings["index_dir"]) for i, p in enumerate(prompts)]
        write_table(pa.Table.from_pylist(rows), out_dir / "data" / f"{split}.parquet")
        counts[f"rows:{split}"] = len(rows)
        outputs["data"].append(f"data/{split}.parquet")
    questions = list(read_questions(shards))
    write_records(Question, questions, out_dir / "questions.parquet")
    counts["questions"] = len(questions)
    agent_loops = [{"name": AGENT_NAME, "_target_": "rl.verl_plugin.HopsmithTurnAgentLoop",
                    "index_dir": settings["index_dir"], "questions_path": str(run_dir / "questions.parquet"),
                    "max_turns": max_turns, "failed_turns": failed_turns, "failed_turn_reward": failed_turn_reward}]
    tools = {"tools": [{"class_name": "rl.verl_plugin.HopsmithSearchTool",
                        "config": {"type": "native", "index_dir": settings["index_dir"]}, "tool_schema": spec}
                       for spec in render_tools()]}
    config = trainer_config(run_dir, model, sorted(by_split), n_gpus)
    config["actor_rollout_ref"]["rollout"]["multi_turn"]["max_assistant_turns"] = max_turns
    atomic_write_text(out_dir / "agent_loops.yaml", yaml.safe_dump(agent_loops, sort_keys=False))
    atomic_write_text(out_dir / "tool_config.yaml", yaml.safe_dump(tools, sort_keys=False))
    atomic_write_text(out_dir / "hopsmith_turn_grpo.yaml", yaml.safe_dump(config, sort_keys=False))
    launch = out_dir / "run_verl.sh"
    atomic_write_text(launch, launch_script(estimator, turn_coef))
    if isinstance(launch, Path):  # an object has no mode bits: run it with `bash run_verl.sh`
        launch.chmod(0o755)
    outputs["config"] = ["agent_loops.yaml", "tool_config.yaml", "hopsmith_turn_grpo.yaml", "run_verl.sh",
                         "questions.parquet"]
    return run.finish(counts, outputs)
