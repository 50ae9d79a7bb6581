"""`hopsmith critic-report`: its flags and the handler that prints the critic's precision and recall
(`critic.report`) on labelled sets or on judged output."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cli.judge import add_judge_arguments, judge_config_from_args
from critic.report import judged_report, judged_summary, labelled_report, read_judged, reviewed_agreement
from ground.errors import UserError
from ground.io import atomic_write_text


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "critic-report",
        help="precision/recall of the turn critic per criterion and failure kind",
        description="Print the critic's precision and recall (positive class: the turn fails) per criterion and "
        "per failure kind, on the hand-labelled set or on judged output labelled by injected errors.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--labelled", action="append",
                        help="labelled JSONL (e.g. tests/data/critic_labelled.jsonl, or the natural set that "
                        "tests/data/build_critic_natural.py writes); repeat it to report on several sets")
    source.add_argument("--judged", help="a `hopsmith judge` output folder")
    source.add_argument("--reviewed", help="a reviewer's per-turn verdicts (tests/data/critic_reviewed.jsonl): "
                        "the offline critic's agreement per criterion")
    parser.add_argument("--json", dest="json_out", help="also write the report as JSON to this file")
    parser.add_argument("--cache", default="out/cache/llm", help="LLM response cache folder (labelled set only)")
    add_judge_arguments(parser)
    parser.set_defaults(func=_handle)


def _handle(args: argparse.Namespace, beam_args: list[str]) -> int:
    if args.reviewed:
        if not Path(args.reviewed).is_file():
            raise UserError(f"reviewed set not found: {args.reviewed}")
        reports = [reviewed_agreement(args.reviewed, judge_config_from_args(args))]
    elif args.labelled:
        missing = [path for path in args.labelled if not Path(path).is_file()]
        if missing:
            raise UserError(f"labelled set not found: {missing[0]}")
        config = judge_config_from_args(args)
        reports = [labelled_report(path, config, args.cache) for path in args.labelled]
    else:
        reports = [judged_report(args.judged)]
        print(judged_summary(read_judged(args.judged)))
    for report in reports:
        print(report.format())
    if args.json_out:
        data = reports[0].to_dict() if len(reports) == 1 else [r.to_dict() for r in reports]
        atomic_write_text(args.json_out, json.dumps(data, indent=2) + "\n")
    return 0
