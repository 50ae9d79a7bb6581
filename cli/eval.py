"""`hopsmith eval`: solve a questions folder k times a question with one policy over a search index, and
report how hard it was (`synth.evaluation`)."""

from __future__ import annotations

import json

from cli.roles import add_role_arguments, role_from_args
from ground.errors import UserError
from ground.io import read_manifest, read_records
from ground.storage import as_path
from schemas.questions import Question
from synth.environment import SearchEnvironment
from synth.evaluation import POLICIES, EvalSettings, evaluate, judged, summarize, with_distractors, write_eval
from synth.frameworks import FRAMEWORKS


def register(subparsers) -> None:
    defaults = EvalSettings()
    parser = subparsers.add_parser(
        "eval",
        help="measure the questions' difficulty: a policy solves each k times over the run's search index",
        description="Solve every question of a questions folder k times with one policy (offline: the scripted "
        "searcher; naive: search the question, open the top page, answer its title; llm: the --llm-* role) and "
        "write results.jsonl (a record a question, BrowseComp-Plus run fields per rollout), summary.json "
        "(pass@1, pass@k, accuracy by hops/shape/final relation, evidence recall, turns to the answer, % "
        "unfinished) and runs/ (BrowseComp-Plus run files).",
    )
    parser.add_argument("--questions", default="out/questions", help="stage 2 output folder (default: %(default)s)")
    parser.add_argument("--index", default="out/index", help="search index folder (default: %(default)s)")
    parser.add_argument("--out", default="out/eval", help="output folder (default: %(default)s)")
    parser.add_argument("--cache", default="out/cache/llm", help="LLM response cache (default: %(default)s)")
    parser.add_argument("--policy", choices=POLICIES, default=defaults.policy, help="default: %(default)s")
    parser.add_argument("--framework", choices=list(FRAMEWORKS), default=defaults.framework, help="default: %(default)s")
    parser.add_argument("-k", "--rollouts", type=int, default=defaults.rollouts, help="rollouts a question (default: %(default)s)")
    parser.add_argument("--max-turns", type=int, default=defaults.max_turns, help="default: %(default)s")
    parser.add_argument("--top-k", type=int, default=defaults.top_k, help="results per offline search (default: %(default)s)")
    parser.add_argument("--max-questions", type=int, help="only the first N questions (by id)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--pass-band", type=float, nargs=2, metavar=("LO", "HI"),
                        help="also write pass_band.txt: the questions whose pass rate is in [LO, HI] (RL prompts "
                        "for GRPO groups: e.g. 0.01 0.99, neither always nor never solved)")
    parser.add_argument("--distractors", type=float, nargs="+", metavar="RATIO",
                        help="also run over the path pages plus RATIO times as many other pages, for each ratio "
                        "(0: gold pages only); writes distractors-RATIO/ and distractors.json")
    add_role_arguments(parser, "llm", "the LLM policy (--policy llm)")
    add_role_arguments(parser, "judge", "the optional answer judge (its agreement with the matcher is reported)")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    for name, folder in (("questions", args.questions), ("index", args.index)):
        if read_manifest(folder) is None:
            raise UserError(f"no finished {name} output in {folder}")
    role = role_from_args(args, "llm")
    if args.policy == "llm" and role is None:
        raise UserError("--policy llm needs --llm-base-url and --llm-model")
    if args.pass_band and not 0.0 <= args.pass_band[0] <= args.pass_band[1] <= 1.0:
        raise UserError("--pass-band needs 0 <= LO <= HI <= 1")
    if args.rollouts < 1 or args.max_turns < 1:
        raise UserError("--rollouts and --max-turns must be at least 1")
    settings = EvalSettings(policy=args.policy, framework=args.framework, rollouts=args.rollouts,
                            max_turns=args.max_turns, seed=args.seed, top_k=args.top_k,
                            max_questions=args.max_questions, role=role)
    if any(ratio < 0 for ratio in args.distractors or ()):
        raise UserError("--distractors ratios must be >= 0")
    questions = list(read_records(Question, as_path(args.questions) / "questions"))
    env = SearchEnvironment.load(args.index)
    results = evaluate(questions, env, settings, args.cache)
    if (judge := role_from_args(args, "judge")) is not None:
        judged(results, questions, judge, args.cache)
    summary = summarize(results)
    write_eval(args.out, results, summary, settings, tuple(args.pass_band) if args.pass_band else None)
    shown = {key: value for key, value in summary.items() if not isinstance(value, dict)}
    print(f"eval: {args.policy} policy, {summary['questions']} questions x {args.rollouts} -> {args.out}")
    print(json.dumps(shown, indent=2))
    if args.distractors:
        _distractor_sweep(args, questions, env, settings, summary)
    return 0


def _distractor_sweep(args, questions, env, settings: EvalSettings, full: dict) -> None:
    """Eval again over the path pages plus each ratio of other pages; `distractors.json` sets the figures side
    by side with the full index's."""
    chosen = sorted(questions, key=lambda q: q.question_id)[: settings.max_questions]
    sweep = {"full index": {"pages": len(env.pages), **_headline(full)}}
    for ratio in args.distractors:
        sub = with_distractors(env, chosen, ratio, settings.seed)
        results = evaluate(chosen, sub, settings, args.cache)
        summary = summarize(results)
        write_eval(as_path(args.out) / f"distractors-{ratio:g}", results, summary, settings)
        sweep[f"{ratio:g}"] = {"pages": len(sub.pages), **_headline(summary)}
    (as_path(args.out) / "distractors.json").write_text(json.dumps(sweep, indent=2) + "\n", encoding="utf-8")
    for name, figures in sweep.items():
        print(f"  distractors {name:<10} {figures}")


def _headline(summary: dict) -> dict:
    return {key: summary[key] for key in ("pass@1", "pass@k", "evidence_recall", "unfinished")}
