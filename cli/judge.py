"""`hopsmith judge`: its flags, the JudgeConfig they make (`add_judge_arguments` and `judge_config_from_args`,
shared with `critic-report`) and the handler that runs stage 4 (`critic.judge.run_judge`)."""

from __future__ import annotations

import argparse
import tomllib

from cli.roles import add_role_arguments, role_from_args
from critic.judge import run_judge
from ground.errors import UserError
from ground.io import read_manifest
from ground.storage import as_path
from schemas.config import JudgeConfig, LLMRole, ValidationError, config_error_line
from schemas.critic import CRITERIA


def _criterion_values(pairs: list[str], flag: str) -> dict[str, float]:
    values = {}
    for pair in pairs:
        name, _, number = pair.partition("=")
        if name not in CRITERIA or not number:
            raise UserError(f"{flag} takes CRITERION=VALUE with CRITERION one of {', '.join(CRITERIA)}; got {pair!r}")
        try:
            values[name] = float(number)
        except ValueError as error:
            raise UserError(f"{flag} {pair!r}: {number!r} is not a number") from error
    return values


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags that build a JudgeConfig; shared by `judge` and `critic-report`."""
    parser.add_argument("--config", help="TOML file: a JudgeConfig at top level, or the [judge] table of a "
                        "`hopsmith dataset` config; flags override it")
    add_role_arguments(parser, "judge", "the LLM judge")
    parser.add_argument("--threshold", action="append", default=[], metavar="CRITERION=VALUE",
                        help=f"pass threshold of a criterion ({', '.join(CRITERIA)}); repeatable")
    parser.add_argument("--weight", action="append", default=[], metavar="CRITERION=VALUE",
                        help="weight of a criterion in a passing turn's reward; repeatable")
    parser.add_argument("--failed-turns", choices=["mask", "penalty"],
                        help="mask: failed turns get loss mask 0; penalty: they keep it and learn from the negative reward")
    parser.add_argument("--loss-policy", choices=["critical", "verdict"],
                        help="critical: loss 1 only on passing turns that moved the run toward the answer; "
                        "verdict: on every passing turn")
    parser.add_argument("--failed-turn-reward", type=float, help="reward of a failed turn (negative)")
    parser.add_argument("--repeat-window", type=int, help="only calls this many turns back count as repeats")


def judge_config_from_args(args: argparse.Namespace) -> JudgeConfig:
    values: dict = {}
    if args.config:
        try:
            data = tomllib.loads(as_path(args.config).read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise UserError(f"cannot read config {args.config}: {error}") from error
        section = data.get("judge")
        dataset_style = isinstance(section, dict) and set(section) <= set(JudgeConfig.model_fields)
        values = dict(section if dataset_style else data)
    values["judge"] = (role_from_args(args, "judge", values.get("judge")) or LLMRole()).model_dump()
    values["thresholds"] = {**JudgeConfig().thresholds, **values.get("thresholds", {}),
                            **_criterion_values(args.threshold, "--threshold")}
    values["weights"] = {**JudgeConfig().weights, **values.get("weights", {}), **_criterion_values(args.weight, "--weight")}
    for flag in ("failed_turns", "loss_policy", "failed_turn_reward", "repeat_window"):
        if getattr(args, flag) is not None:
            values[flag] = getattr(args, flag)
    try:
        config = JudgeConfig.model_validate(values)
    except ValidationError as error:
        raise UserError(config_error_line(error, "judge config")) from error
    return config


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "judge",
        help="stage 4: judge every trajectory turn (tool accuracy, information gain, logical soundness)",
        description="Judge every assistant turn of every trajectory on three criteria with an offline critic "
        "and, with --judge-base-url, an LLM judge; write per-turn rewards, loss masks and outcome rewards to "
        "OUT/judged/*.parquet. Resumable: a rerun skips finished work units. Unknown --options are Apache Beam "
        "pipeline options.",
    )
    parser.add_argument("--trajectories", default="out/trajectories", help="stage 3 output folder")
    parser.add_argument("--questions", default="out/questions", help="stage 2 question folder (gold paths)")
    parser.add_argument("--index", default="out/index", help="search index folder (redirect aliases); 'none' to skip")
    parser.add_argument("--out", default="out/judged", help="output folder")
    parser.add_argument("--cache", default="out/cache/llm", help="LLM response cache folder")
    add_judge_arguments(parser)
    parser.set_defaults(func=_handle)


def _handle(args: argparse.Namespace, beam_args: list[str]) -> int:
    config = judge_config_from_args(args)
    index_dir = None if args.index == "none" else args.index
    for label, folder in (("trajectories", args.trajectories), ("questions", args.questions), ("index", index_dir)):
        if folder is not None and read_manifest(folder) is None:
            raise UserError(f"--{label} {folder} holds no finished stage output (no manifest.json)")
    manifest = run_judge(args.trajectories, args.questions, index_dir, args.out, config, args.cache, beam_args=beam_args)
    counts = manifest.counts
    print(f"judged {counts.get('judged', 0)} trajectories, {counts.get('turns', 0)} turns "
          f"({counts.get('turns_passed', 0)} passed) -> {as_path(args.out) / 'judged'}")
    return 0
