"""`hopsmith` command line: one subcommand per stage, registered by the module that implements it.

Each module in COMMAND_MODULES exposes `register(subparsers)`, which adds its subcommand and sets
`func(args, beam_args) -> int` as the handler. Arguments the subcommand does not know are Apache Beam
pipeline options (`--runner`, `--direct_num_workers`, ...) and are passed through to the runner.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from pipeline.errors import UserError

COMMAND_MODULES = (
    "pipeline.extract",
    "graph.stats",
    "graph.walks",
    "synth.questions",
    "synth.report",
    "synth.environment",
    "synth.trajectories",
    "pipeline.dataset",
    "pipeline.validate",
    "pipeline.publish",
    "critic.judge",
    "critic.report",
    "rl.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hopsmith",
        description="Deep-search data synthesis from a Wikipedia snapshot. Unknown --options of a stage "
        "are passed to Apache Beam (e.g. --runner DataflowRunner, --direct_num_workers 2).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def configure_logging(verbose: bool) -> None:
    """Log at WARNING (INFO with -v). The level is set on the handler too, because some libraries (bm25s)
    set their own loggers to DEBUG when imported."""
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    for handler in logging.getLogger().handlers:
        handler.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    # Importing Beam warns on the root logger about optional GCP clients; only errors matter until the
    # user's verbosity is known.
    logging.basicConfig(level=logging.ERROR, force=True)
    parser = build_parser()
    args, beam_args = parser.parse_known_args(argv)
    configure_logging(args.verbose)
    try:
        return int(args.func(args, beam_args) or 0)
    except UserError as error:
        print(f"hopsmith: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hopsmith: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
