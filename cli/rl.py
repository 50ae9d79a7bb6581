"""`hopsmith rl [train] ...` and `hopsmith rl export-verl ...`. Importing this module does not import torch."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import get_args

from ground.errors import UserError
from ground.storage import as_path
from rl.config import DEFAULT_ESTIMATOR, Estimator
from schemas.config import ValidationError, config_error_line

PRESET_NAMES = ("tiny-cpu", "gpu")
PASS_BAND_HELP = ("RL prompts from the `questions` config: every question whose recorded pass rate lies in "
                  "[LO, HI] (e.g. `0 1` keeps the never-solved ones); default: the `rl` config as built")


def _train_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """The training flags, on both `hopsmith rl` and `hopsmith rl train` (a flag given to either wins)."""
    default = (lambda value: value) if defaults else (lambda value: argparse.SUPPRESS)
    parser.add_argument("--shards", default=default("out/dataset"), help="dataset folder (`make dataset` output)")
    parser.add_argument("--out", default=default("out/rl"),
                        help="run folder: checkpoint/, metrics-*.jsonl (local, or s3://, gs://: uploaded as it goes)")
    parser.add_argument("--preset", choices=PRESET_NAMES, default=default(None),
                        help="tiny-cpu (default without --model) or gpu (default with --model)")
    parser.add_argument("--model", default=default(None), help="pretrained model folder (else a tiny random LLaMA)")
    parser.add_argument("--config", default=default(None), help="JSON file of RLConfig fields (overrides the preset)")
    parser.add_argument("--modes", default=default(None), help="comma-separated: offline,online")
    parser.add_argument("--index", default=default(None), help="search index folder for online mode")
    parser.add_argument("--split", default=default(None), help="dataset split to train on (default: train)")
    parser.add_argument("--seed", type=int, default=default(None))
    parser.add_argument("--offline-steps", type=int, default=default(None))
    parser.add_argument("--online-steps", type=int, default=default(None))
    parser.add_argument("--estimator", choices=get_args(Estimator), default=default(None))
    parser.add_argument("--failed-turns", choices=("mask", "penalty"), default=default(None))
    parser.add_argument("--max-trajectories", type=int, default=default(None))
    parser.add_argument("--pass-band", type=float, nargs=2, metavar=("LO", "HI"), default=default(None),
                        help=PASS_BAND_HELP)


def register(subparsers) -> None:
    rl = subparsers.add_parser("rl", help="turn-reward RL from the shards (train, export-verl)",
                               description="Train with turn-level advantages (offline cloning, online PPO) or "
                               "export verl data and configs. `hopsmith rl --model PATH` = `hopsmith rl train`.")
    _train_options(rl, defaults=True)
    rl.set_defaults(func=handle_train)
    commands = rl.add_subparsers(dest="rl_command", metavar="{train,export-verl}")
    train = commands.add_parser("train", help="train on CPU (tiny model) or GPUs (accelerate)")
    _train_options(train, defaults=False)
    train.set_defaults(func=handle_train)
    export = commands.add_parser("export-verl", help="write verl parquet, plugin configs and a launch script")
    export.add_argument("--shards", default="out/dataset", help="dataset folder (`make dataset` output)")
    export.add_argument("--out", default="out/verl", help="output folder (local, or s3://, gs://: then --run-dir)")
    export.add_argument("--run-dir", default=None,
                        help="the local folder the export will lie in when verl runs (default: --out); needed "
                        "when --out is on object storage, since the configs name their files by it")
    export.add_argument("--model", default="Nanbeige/Nanbeige4.1-3B", help="model path or Hub id verl loads")
    export.add_argument("--index", default=None, help="search index folder (default: <shards>/../index)")
    export.add_argument("--estimator", choices=get_args(Estimator), default=DEFAULT_ESTIMATOR)
    export.add_argument("--turn-coef", type=float, default=1.0)
    export.add_argument("--failed-turns", choices=("mask", "penalty"), default="mask")
    export.add_argument("--max-turns", type=int, default=60)
    export.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    export.add_argument("--pass-band", type=float, nargs=2, metavar=("LO", "HI"), default=None, help=PASS_BAND_HELP)
    export.set_defaults(func=handle_export)


def build_config(args: argparse.Namespace):
    from rl.config import preset_config

    preset = args.preset or ("gpu" if args.model else "tiny-cpu")
    overrides = json.loads(as_path(args.config).read_text()) if args.config else {}
    flags = {"model": args.model, "index_dir": args.index, "split": args.split, "seed": args.seed,
             "offline_steps": args.offline_steps, "online_steps": args.online_steps, "estimator": args.estimator,
             "failed_turns": args.failed_turns, "max_trajectories": args.max_trajectories, "pass_band": args.pass_band,
             "modes": args.modes.split(",") if args.modes else None}
    try:
        return preset_config(preset, **{**overrides, **{k: v for k, v in flags.items() if v is not None}})
    except ValidationError as error:  # every field's range is in the schema
        raise UserError(config_error_line(error, "rl config")) from error
    except ValueError as error:
        raise UserError(str(error)) from error


def _no_beam_options(beam_args: list[str]) -> None:
    if beam_args:
        raise UserError(f"unknown options for `hopsmith rl`: {' '.join(beam_args)}")


def handle_train(args: argparse.Namespace, beam_args: list[str]) -> int:
    _no_beam_options(beam_args)
    config = build_config(args)  # refused before torch is imported and any work starts
    from rl.train import run_rl

    manifest = run_rl(args.shards, args.out, config)
    print(f"rl: checkpoint in {as_path(args.out) / 'checkpoint'}; counts {json.dumps(manifest.counts, sort_keys=True)}")
    return 0


def handle_export(args: argparse.Namespace, beam_args: list[str]) -> int:
    _no_beam_options(beam_args)
    from rl.export_verl import export_verl

    manifest = export_verl(args.shards, args.out, model=args.model, index_dir=args.index, estimator=args.estimator,
                           turn_coef=args.turn_coef, failed_turns=args.failed_turns, max_turns=args.max_turns,
                           n_gpus=args.gpus, run_dir=args.run_dir, pass_band=args.pass_band)
    launch = Path(args.run_dir or args.out) / "run_verl.sh"
    print(f"export-verl: {json.dumps(manifest.counts, sort_keys=True)}; launch with {launch}")
    return 0
