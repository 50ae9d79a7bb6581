"""`hopsmith trajectories`: its flags, the TrajectoryConfig they make (`config_from_args`) and the handler that
runs stage 3 (`synth.trajectories.run_trajectories`)."""

from __future__ import annotations

import argparse
import json

from pydantic import ValidationError

from cli.roles import add_role_arguments, role_from_args
from ground.errors import UserError
from ground.io import read_manifest
from ground.storage import as_path
from schemas.config import TrajectoryConfig, config_error_line
from synth.frameworks import FRAMEWORKS
from synth.policies import ERROR_KINDS, ScriptedPolicy
from synth.trajectories import run_trajectories


def _error_rate(text: str) -> tuple[str, float]:
    kind, _, rate = text.partition("=")
    try:
        return kind.strip(), float(rate)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KIND=RATE, got {text!r}") from None


def register(subparsers) -> None:
    defaults = TrajectoryConfig()
    parser = subparsers.add_parser(
        "trajectories",
        help="stage 3: solve every question in several agent frameworks over the local search index",
        description="Run questions x frameworks x rollouts as a resumable Beam job. Frameworks without an LLM "
        "endpoint use the offline scripted policy (gold path as a plan, real tool calls, seeded error model). "
        "Other --options are Apache Beam pipeline options. The API key is read from the environment variable "
        "named by --llm-api-key-env, never from the command line.",
    )
    parser.add_argument("--questions", default="out/questions", help="stage 2 output folder (default: %(default)s)")
    parser.add_argument("--index", default="out/index", help="search index folder (default: %(default)s)")
    parser.add_argument("--out", default="out/trajectories", help="output folder (default: %(default)s)")
    parser.add_argument("--cache", default="out/cache/llm", help="LLM response cache (default: %(default)s)")
    parser.add_argument("--config", help="a JSON file holding a TrajectoryConfig; flags given override it")
    parser.add_argument("--frameworks", nargs="+", choices=list(FRAMEWORKS), help="default: all")
    parser.add_argument("--rollouts", type=int, help=f"runs per question and framework (default: {defaults.rollouts})")
    parser.add_argument("--max-turns", type=int, help=f"turn limit, up to 10000 (default: {defaults.max_turns})")
    parser.add_argument("--keep-last", type=int, dest="keep_last_observations",
                        help=f"observations kept in full in LLM prompts (default: {defaults.keep_last_observations})")
    parser.add_argument("--keep-last-turns", type=int,
                        help=f"turns shown in LLM prompts; older are folded (default: {defaults.keep_last_turns})")
    parser.add_argument("--top-k", type=int, dest="search_top_k", help="results per scripted search")
    parser.add_argument("--max-questions", type=int, help="use only the first N questions (by id)")
    parser.add_argument("--questions-per-unit", type=int, help="questions per resumable work unit")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--error-rate", type=_error_rate, action="append", dest="error_rates", metavar="KIND=RATE",
                        help=f"per-turn rate of an offline error kind ({', '.join(ERROR_KINDS)}); repeatable")
    add_role_arguments(parser, "llm", "the LLM policy (per framework)")
    parser.add_argument("--llm-frameworks", nargs="+", choices=list(FRAMEWORKS),
                        help="frameworks driven by the LLM (default: all selected); the others run offline")
    parser.set_defaults(func=_command)


def config_from_args(args) -> TrajectoryConfig:
    """A TrajectoryConfig from --config (if any) with the flags given on top."""
    base: dict = {}
    if args.config:
        try:
            base = json.loads(as_path(args.config).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise UserError(f"cannot read --config {args.config}: {error}") from None
    fields = ("frameworks", "rollouts", "max_turns", "keep_last_observations", "keep_last_turns", "search_top_k",
              "max_questions", "questions_per_unit", "seed")
    base.update({name: getattr(args, name) for name in fields if getattr(args, name) is not None})
    if args.error_rates:
        base["error_rates"] = {**TrajectoryConfig().error_rates, **base.get("error_rates", {}), **dict(args.error_rates)}
    role = role_from_args(args, "llm")
    if role is not None:
        frameworks = args.llm_frameworks or base.get("frameworks") or TrajectoryConfig().frameworks
        base["policies"] = {**base.get("policies", {}), **{name: role.model_dump() for name in frameworks}}
    try:
        config = TrajectoryConfig.model_validate(base)
        ScriptedPolicy.check_rates(config.error_rates)
    except ValidationError as error:
        raise UserError(config_error_line(error, "trajectory configuration")) from None
    except ValueError as error:
        raise UserError(f"invalid trajectory configuration: {error}") from None
    return config


def _command(args, beam_args) -> int:
    for name, folder in (("questions", args.questions), ("index", args.index)):
        if read_manifest(folder) is None:
            raise UserError(f"no finished {name} output in {folder}")
    config = config_from_args(args)
    manifest = run_trajectories(args.questions, args.index, args.out, config, args.cache, beam_args=beam_args)
    counts = manifest.counts
    print(f"trajectories: {counts['trajectories']} runs of {counts['questions_used']} questions, "
          f"{counts['correct']} correct, {counts.get('turns', 0)} turns -> {args.out}")
    for key, value in counts.items():
        if key.startswith(("framework:", "stop:", "injected:", "llm:")):
            print(f"  {key:<32} {value}")
    return 0
