"""The contract suite fails on a broken plugin or launch config: each case runs the relevant contract test
on a copy of the checkout with one break, and expects that test to fail for that reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ground.levels import PACKAGES
from tests_verl.conftest import CONFIG_NAME, EXPORT_ENV

REPO = Path(__file__).resolve().parent.parent
PLUGIN = "rl/verl_plugin.py"

# name -> (file, text, replacement, contract test selector, expected text in the failure)
BREAKS = {
    "constructor": (PLUGIN, "dataset_cls, data_config,", "dataset_cls, dataset_config,", "agent_loop",
                    "dataset_config"),
    "reward path": (PLUGIN, "    def as_dict(self)", "    def as_dict_unused(self)", "rm_scores", "assert"),
    "estimator registration": (PLUGIN, 'register_adv_est("turn_grpo")(compute_turn_grpo_advantage)', "pass",
                               "turn_grpo", "Unknown advantage estimator"),
}


def copy_checkout(destination: Path) -> Path:
    """Every package, the contract suite and the knowledge tables (`data/`, less the sample dump)."""
    for package in (*PACKAGES, "tests_verl"):
        shutil.copytree(REPO / package, destination / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "data", destination / "data", ignore=shutil.ignore_patterns("__pycache__", "sample"))
    shutil.copy(REPO / "pyproject.toml", destination / "pyproject.toml")
    return destination


def run_contract(checkout: Path, selector: str, export: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(checkout), "HOPSMITH_ROOT": str(checkout), EXPORT_ENV: str(export)}
    return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                           "tests_verl/test_verl_contract.py", "-k", selector],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_contract_fails_on_a_broken_plugin(name, exported, tmp_path):
    path, text, replacement, selector, reason = BREAKS[name]
    checkout = copy_checkout(tmp_path / "checkout")
    source = (checkout / path).read_text()
    assert text in source
    (checkout / path).write_text(source.replace(text, replacement))
    result = run_contract(checkout, selector, exported)
    assert result.returncode == 1 and (" failed" in result.stdout or " error" in result.stdout), result.stdout[-2000:]
    assert reason in result.stdout


def test_contract_fails_on_an_unknown_override_key(exported, tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    export = tmp_path / "export"
    shutil.copytree(exported, export, ignore=shutil.ignore_patterns("checkpoints"))
    config = yaml.safe_load((export / f"{CONFIG_NAME}.yaml").read_text())
    config["reward_model"] = {"use_reward_loop": False}  # a key verl 0.8 had and 0.9 silently ignores
    (export / f"{CONFIG_NAME}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_contract(checkout, "compose", export)
    assert result.returncode == 1 and "reward_model.use_reward_loop" in result.stdout, result.stdout[-2000:]
