"""Fixtures of the verl contract suite: the export `make verl-check` wrote, a tiny local model folder, the
launch script's environment, and the launch config composed by Hydra as `run_verl.sh` composes it.

Runs only in the `.venv-verl` environment (real verl 0.9.1, CPU torch); `make test` never collects it.
`HOPSMITH_VERL_EXPORT` names the `hopsmith rl export-verl` folder of the shipped sample's dataset.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest

EXPORT_ENV = "HOPSMITH_VERL_EXPORT"
CONFIG_NAME = "hopsmith_turn_grpo"


def export_dir() -> Path:
    folder = os.environ.get(EXPORT_ENV)
    if not folder or not (Path(folder) / f"{CONFIG_NAME}.yaml").is_file():
        pytest.fail(f"{EXPORT_ENV} must name an export-verl folder (run `make verl-check`)")
    return Path(folder)


@pytest.fixture(scope="session")
def exported() -> Path:
    return export_dir()


def launch_environment(folder: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The variables `run_verl.sh` exports, evaluated by bash: the script up to its start-up check."""
    script = (folder / "run_verl.sh").read_text()
    prefix = script[: script.index("python3 -c")]
    names = re.findall(r"^export (.*)$", prefix, flags=re.MULTILINE)
    names = [part.split("=", 1)[0] for line in names for part in shlex.split(line) if "=" in part]
    with tempfile.TemporaryDirectory() as scratch:
        probe_script = Path(scratch) / "run_verl_prefix.sh"
        probe_script.write_text(prefix + "env -0\n")
        probe = subprocess.run(["bash", str(probe_script)], capture_output=True, text=True, check=True,
                               env=base if base is not None else {"PATH": os.environ["PATH"]})
    variables = dict(item.split("=", 1) for item in probe.stdout.split("\0") if "=" in item)
    return {name: variables[name] for name in names}


@pytest.fixture(scope="session")
def launch_env(exported) -> dict[str, str]:
    """With `HOPSMITH_ROOT` set (a user's checkout elsewhere), the script puts that on PYTHONPATH."""
    base = {"PATH": os.environ["PATH"]}
    if os.environ.get("HOPSMITH_ROOT"):
        base["HOPSMITH_ROOT"] = os.environ["HOPSMITH_ROOT"]
    return launch_environment(exported, base)


def flat_keys(config: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in config.items():
        if isinstance(value, dict) and value:
            keys |= flat_keys(value, f"{prefix}{key}.")
        else:
            keys.add(f"{prefix}{key}")
    return keys


def compose_launch_config(folder: Path, overrides: list[str] = ()):
    """The trainer config as `python -m verl.trainer.main_ppo --config-path DIR --config-name ...` builds it."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(folder), version_base=None):
        return compose(config_name=CONFIG_NAME, overrides=list(overrides))


def compose_packaged_config():
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose(config_name="ppo_trainer")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, exported) -> Path:
    """A local model folder (config + tokenizer with the chat template), no weights: what HF loaders read."""
    import pyarrow.parquet as pq
    from transformers import Qwen2Config

    from rl.tokenizer import train_tokenizer

    folder = tmp_path_factory.mktemp("tiny-model")
    rows = pq.read_table(exported / "data" / "train.parquet").to_pylist()
    texts = [m["content"] for row in rows for m in row["prompt"]] + ["Results for search open_page find_in_page"]
    tokenizer = train_tokenizer(texts, vocab_size=2048)
    tokenizer.save_pretrained(folder)
    Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=65536,
                eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                architectures=["Qwen2ForCausalLM"]).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def trainer_config(exported, tiny_model):
    """The launch config with the tiny model, as a user passes `actor_rollout_ref.model.path=...`."""
    return compose_launch_config(exported, [f"actor_rollout_ref.model.path={tiny_model}"])
