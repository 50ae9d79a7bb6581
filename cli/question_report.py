"""`hopsmith question-report`: the question report's subcommand (`synth.report.question_report`)."""

from __future__ import annotations

import json

from synth.report import print_report, question_report


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "question-report",
        help="how hard a run's questions are: hops and shapes, named starts, one-search and prior answers",
        description="Measure the questions of a run folder (OUT/questions with OUT/graph and OUT/index): "
        "questions per hop count and shape, the share naming the start entity (or a fact that identifies it "
        "in the world), the share naming such a fact of an intermediate, the share whose text as one "
        "search shows the answer, the share answered by the final relation's dominant object, the top-5 "
        "answer share, and the relations and classes used.",
    )
    parser.add_argument("out", help="the run folder (`hopsmith dataset --out`)")
    parser.add_argument("--top-k", type=int, default=None, help="results of the one search (default: the run's)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    report = question_report(args.out, args.top_k)
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        print_report(report)
    return 0
