"""`hopsmith validate DIR`: its flags (`--allow-low-yield` is shared with `publish`) and the handler that
prints `pipeline.validate.validate_dataset`'s report."""

from __future__ import annotations

import argparse

from ground.errors import UserError
from pipeline.validate import validate_dataset


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check a dataset folder: every shard against the schemas, the card's counts and checksums",
    )
    parser.add_argument("dir", help="a dataset folder written by `hopsmith dataset` (e.g. out/dataset)")
    add_low_yield_argument(parser)
    parser.set_defaults(func=_handle)


def add_low_yield_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-low-yield", action="store_true",
                        help="accept a dataset with an empty train split or no question (never an empty one)")


def _handle(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise UserError(f"unknown arguments: {' '.join(beam_args)}")
    report = validate_dataset(args.dir, allow_low_yield=args.allow_low_yield)
    for error in report.errors:
        print(f"invalid: {error}")
    for warning in report.warnings:
        print(f"accepted: {warning}")
    summary = ", ".join(f"{config}: {n}" for config, n in sorted(report.rows.items()))
    verdict = "ok" if report.ok else f"{len(report.errors)} problem(s)"
    print(f"{verdict}: {report.shards} shards checked ({summary})")
    return 0 if report.ok else 1
