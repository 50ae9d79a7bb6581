"""`hopsmith dataset`: its flags and the handler that runs every stage from the dump to the Hub folder
(`pipeline.dataset.run_dataset`)."""

from __future__ import annotations

import argparse

from cli.extract import parse_as_of
from ground.storage import as_path
from pipeline.dataset import STAGE, STAGE_FOLDERS, load_config, run_dataset


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "dataset",
        help="run every stage from a dump to a publishable Hub folder (out/dataset)",
        description="Run extract, walk, index, questions, trajectories, difficulty, judge and dataset in order, skipping "
        "finished stages; a killed run, rerun, resumes. With no --config and no --dump it uses the shipped "
        "sample and the offline engines. Unknown --options are Apache Beam pipeline options.",
    )
    parser.add_argument("--config", help="TOML file with a DatasetConfig (see configs/sample.toml)")
    parser.add_argument("--out", help="output folder (default: out)")
    parser.add_argument(
        "--seed", type=int, help="seed for every stage that has none of its own in the config"
    )
    parser.add_argument("--dump", help="a pages-articles(-multistream) .xml.bz2 dump")
    parser.add_argument("--index", help="the multistream dump's -index.txt.bz2")
    parser.add_argument(
        "--as-of", type=parse_as_of, help="snapshot date (default: newest revision in the dump)"
    )
    parser.add_argument(
        "--pass-band", type=float, nargs=2, metavar=("LO", "HI"),
        help="the rl config keeps the questions whose measured pass rate lies in [LO, HI] (default: strictly "
        "between 0 and 1, so every GRPO group has both outcomes; 0 1 keeps all)",
    )
    parser.add_argument(
        "--no-difficulty", action="store_true",
        help="skip the difficulty stage (each question's pass rate under [difficulty]'s eval policy, by default "
        "the offline searcher at k=4): no pass_rate column, every question an RL prompt",
    )
    parser.set_defaults(func=_handle)


def _handle(args: argparse.Namespace, beam_args: list[str]) -> int:
    overrides = {
        "out": args.out,
        "seed": args.seed,
        "extract.dump": args.dump,
        "extract.index": args.index,
        "as_of": args.as_of.isoformat() if args.as_of else None,
        "rl_pass_band": args.pass_band,
        "difficulty.enabled": False if args.no_difficulty else None,
    }
    config = load_config(args.config, overrides)
    manifest = run_dataset(config, beam_args)
    print(f"dataset written to {as_path(config.out) / STAGE_FOLDERS[STAGE]} (key {manifest.key[:12]})")
    return 0
