"""`hopsmith question-report`: the question report's subcommand (`synth.report.question_report`)."""

from __future__ import annotations

import json

from synth.report import print_report, question_report


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "question-report",
        help="how hard a run's questions are, by probes that are not the gates: searches, prior guess, breaks",
        description="Measure the questions of a run folder (OUT/questions with OUT/graph and OUT/index) with "
        "probes the questions stage's gates do not run: questions per hop count and shape, the share naming "
        "the start entity (or a fact that identifies it in the world), the share naming such a fact of an "
        "intermediate, the share whose text lists the answer in a TF-IDF retriever over the index's pages "
        "(not the agents' bm25s index), the shares whose start or intermediate description alone ranks that "
        "entity first there, the share the commonest answer of the other questions ending in the same "
        "relation guesses, the share with a template break, the fame mix, the top-5 answer share, and the "
        "relations and classes used.",
    )
    parser.add_argument("out", help="the run folder (`hopsmith dataset --out`)")
    parser.add_argument("--top-k", type=int, default=None, help="results of the question search probe (default: the "
                        "run's one_search_top_k)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    report = question_report(args.out, args.top_k)
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        print_report(report)
    return 0
