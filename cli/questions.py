"""`hopsmith questions`: the questions stage's subcommand (`synth.questions.run_questions`)."""

from __future__ import annotations

import datetime as dt

from cli.roles import add_role_arguments, role_from_args
from ground.errors import UserError
from ground.io import read_manifest
from schemas.config import LLMRole, QuestionConfig
from synth.questions import run_questions


def register(subparsers) -> None:
    """`hopsmith questions`: paths -> verified multi-hop questions."""
    defaults = QuestionConfig()
    parser = subparsers.add_parser(
        "questions",
        help="stage 2b: relational paths -> verified multi-hop questions",
        description="Write one question per path (offline templates, or an LLM with --writer-base-url), gate "
        "it (a described start entity and every hop unique over the graph, tree branches, answer leaks, "
        "dominant answers, fewer hops, duplicates, one answer's share of the run, the question as one search "
        "with --index, and a closed-book shortcut check with --shortcut-base-url) and write OUT/questions/ "
        "and OUT/skipped/ (parquet). Resumable per unit of paths. Unknown --options are Apache Beam options.",
    )
    parser.add_argument("--graph", default="out/graph", help="stage 1 output folder (default: %(default)s)")
    parser.add_argument("--paths", default="out/paths", help="walk output folder (default: %(default)s)")
    parser.add_argument("--out", default="out/questions", help="output folder (default: %(default)s)")
    parser.add_argument("--cache", default="out/cache/llm", help="LLM response cache folder (default: %(default)s)")
    parser.add_argument("--index", default=None, help="the agents' search index (`hopsmith index`): questions whose "
                        "text as one search shows the answer are rejected (default: gate off)")
    parser.add_argument("--one-search-top-k", type=int, default=defaults.one_search_top_k)
    parser.add_argument("--describe-start", type=float, default=defaults.describe_start,
                        help="share of questions whose start entity is described, not named (default: %(default)s)")
    parser.add_argument("--max-answer-share", type=float, default=defaults.max_answer_share,
                        help="most questions of the run with one answer, as a share (default: %(default)s)")
    parser.add_argument("--keep-dominant-answers", action="store_true",
                        help="keep answers that are the most common object of their final relation")
    add_role_arguments(parser, "writer", "the question writer")
    add_role_arguments(parser, "shortcut", "the closed-book shortcut checker")
    parser.add_argument("--shortcut-attempts", type=int, default=defaults.shortcut_attempts)
    parser.add_argument("--as-of", type=dt.date.fromisoformat, help="as-of date stated in questions (default: the walk's)")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--leak-ngram", type=int, default=defaults.leak_ngram)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--shards", type=int, default=defaults.shards)
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    for label, folder in (("graph", args.graph), ("paths", args.paths)):
        if read_manifest(folder) is None:
            raise UserError(f"--{label} {folder} holds no finished stage output (no manifest.json)")
    config = QuestionConfig(
        writer=role_from_args(args, "writer") or LLMRole(), shortcut=role_from_args(args, "shortcut"),
        shortcut_attempts=args.shortcut_attempts, as_of=args.as_of, max_questions=args.max_questions,
        leak_ngram=args.leak_ngram, seed=args.seed, shards=args.shards, one_search_top_k=args.one_search_top_k,
        describe_start=args.describe_start, max_answer_share=args.max_answer_share,
        reject_dominant_answer=not args.keep_dominant_answers,
    )
    manifest = run_questions(args.graph, args.paths, args.out, config, args.cache, beam_args=beam_args,
                             index_dir=args.index)
    counts = manifest.counts
    hops = ", ".join(f"{k.split('_')[1]} hops: {v}" for k, v in counts.items() if k.startswith("questions:hops_"))
    print(f"questions: {counts['questions:kept']} kept of {counts['paths:read']} paths ({hops}) -> {args.out}")
    for key, value in counts.items():
        if key.startswith("rejected:"):
            print(f"  {key:<28} {value}")
    return 0
