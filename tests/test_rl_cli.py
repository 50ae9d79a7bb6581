"""`hopsmith rl` on the command line: train (both spellings), export-verl, and user errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

pytest.importorskip("torch")

from cli.main import main  # noqa: E402
from cli.rl import register  # noqa: E402
from tests.rl_fixtures import make_dataset  # noqa: E402

TINY = {"vocab_size": 300, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 1024}


def test_registering_the_command_does_not_import_torch():
    probe = ("import argparse, sys, cli.rl; cli.rl.register(argparse.ArgumentParser().add_subparsers()); "
             "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_rl_flags_parse_before_and_after_train():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args, _ = parser.parse_known_args(["rl", "--model", "/m", "--seed", "3"])
    assert (args.rl_command, args.model, args.seed, args.func.__name__) == (None, "/m", 3, "handle_train")
    args, _ = parser.parse_known_args(["rl", "--shards", "S", "train", "--seed", "4"])
    assert (args.rl_command, args.shards, args.seed) == ("train", "S", 4)


def test_train_from_the_command_line_writes_a_checkpoint(tmp_path, capsys):
    shards = make_dataset(tmp_path / "dataset")
    config = tmp_path / "rl.json"
    config.write_text(json.dumps({"tiny": TINY, "offline_steps": 1, "max_len": 512}))
    code = main(["rl", "train", "--shards", str(shards), "--out", str(tmp_path / "rl"), "--modes", "offline",
                 "--config", str(config), "--failed-turns", "penalty"])
    assert code == 0
    assert (tmp_path / "rl" / "checkpoint" / "model.safetensors").is_file()
    manifest = json.loads((tmp_path / "rl" / "manifest.json").read_text())
    assert manifest["config"]["failed_turns"] == "penalty" and manifest["config"]["modes"] == ["offline"]
    assert "checkpoint" in capsys.readouterr().out


def test_user_errors_exit_with_a_message(tmp_path, capsys):
    assert main(["rl", "train", "--shards", str(tmp_path / "nothing"), "--out", str(tmp_path / "rl")]) == 2
    assert "make dataset" in capsys.readouterr().err
    shards = make_dataset(tmp_path / "dataset")
    assert main(["rl", "export-verl", "--shards", str(shards), "--out", str(tmp_path / "verl"),
                 "--index", str(tmp_path / "no-index")]) == 2
    assert "search index" in capsys.readouterr().err
    assert main(["rl", "train", "--shards", str(shards), "--runner", "DirectRunner"]) == 2
    assert "unknown options" in capsys.readouterr().err
    assert main(["rl", "--shards", str(shards), "--out", str(tmp_path / "rl"), "--model", str(tmp_path / "none"),
                 "--modes", "offline", "--preset", "tiny-cpu"]) == 2
    assert "cannot load the tokenizer" in capsys.readouterr().err


def test_train_with_a_pass_band_rolls_out_the_questions_in_it(small_dataset_run, tmp_path):
    """`rl train --pass-band` takes its prompts from the `questions` config by recorded rate, not the `rl` config."""
    dataset = small_dataset_run / "dataset"
    rates = [row["pass_rate"] for path in sorted((dataset / "data" / "questions").glob("train-*.parquet"))
             for row in pq.read_table(path, columns=["pass_rate"]).to_pylist()]
    config = tmp_path / "rl.json"
    config.write_text(json.dumps({"tiny": TINY, "online_steps": 0, "max_len": 512, "max_trajectories": 2}))
    for band, out in (("1 1", "solved"), ("0 0.5", "hard")):
        low, high = map(float, band.split())
        assert main(["rl", "train", "--shards", str(dataset), "--out", str(tmp_path / out), "--modes", "online",
                     "--config", str(config), "--pass-band", *band.split()]) == 0
        counts = json.loads((tmp_path / out / "manifest.json").read_text())["counts"]
        assert counts["prompts_in"] == sum(low <= rate <= high for rate in rates)
        assert counts["prompts_other_index"] == 0  # rendered with the run's own index as their environment
    assert main(["rl", "train", "--shards", str(dataset), "--out", str(tmp_path / "x"), "--pass-band", "1", "0"]) == 2
