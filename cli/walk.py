"""`hopsmith walk`: stage 1's graph -> conditional random walks (Path records), through `graph.walk_stage`."""

from __future__ import annotations

import datetime as dt

from pydantic import ValidationError

from graph.csr import excluded_relations
from graph.walk_stage import STAGE, run_walks
from ground.errors import UserError
from ground.io import read_manifest
from ground.yields import below_floor
from schemas.config import WalkConfig, config_error_line


def register(subparsers) -> None:
    """`hopsmith walk`: stage 1's graph -> conditional random walks (Path records)."""
    defaults = WalkConfig()
    parser = subparsers.add_parser(
        "walk",
        help="stage 2a: conditional random walks over the graph -> relational paths",
        description="Sample relational paths from head entities over infobox relations, with the walk "
        "conditions counted per rejection, and write OUT/paths/*.parquet and manifest.json. Unknown --options "
        "are Apache Beam pipeline options.",
    )
    parser.add_argument("--graph", default="out/graph", help="stage 1 output folder (default: %(default)s)")
    parser.add_argument("--out", default="out/paths", help="output folder (default: %(default)s)")
    parser.add_argument("--hops", type=int, nargs="+", default=defaults.hops, help="path lengths, 1..8 (default: 2 3 4)")
    parser.add_argument("--walks-per-start", type=int, default=defaults.walks_per_start)
    parser.add_argument("--max-paths", type=int, default=None, help="keep at most this many paths")
    parser.add_argument("--hub-quantile", type=float, default=defaults.hub_quantile,
                        help="nodes above this degree quantile are not used as intermediates (default: %(default)s)")
    parser.add_argument("--min-out-degree", type=int, default=defaults.min_out_degree,
                        help="intermediate nodes need at least this many out-edges (default: %(default)s)")
    parser.add_argument("--step-retries", type=int, default=defaults.step_retries,
                        help="candidate edges tried per step before a walk dies (default: %(default)s)")
    parser.add_argument("--no-recent-fact", action="store_true", help="do not require a fact inside the recency window")
    parser.add_argument("--no-literal-answers", action="store_true", help="answers must be entities")
    parser.add_argument("--allow-multiple-objects", action="store_true",
                        help="do not require the final hop to have a single object")
    parser.add_argument("--include-relation", action="append", default=[], metavar="NAME",
                        help="walk a relation excluded by default (e.g. links_to); repeatable")
    parser.add_argument("--exclude-relation", action="append", default=[], metavar="NAME",
                        help="never walk this relation; repeatable")
    parser.add_argument("--include-unmapped", action="store_true",
                        help="also walk infobox parameters that map to no ontology property")
    parser.add_argument("--as-of", type=dt.date.fromisoformat, help="snapshot date (default: the graph's)")
    parser.add_argument("--window", type=int, dest="window_days", help="recency window in days (default: the graph's)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--shards", type=int, default=defaults.shards)
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    if read_manifest(args.graph) is None:
        raise UserError(f"--graph {args.graph} holds no finished stage 1 output: run `hopsmith extract` first")
    excluded = [r for r in excluded_relations(None) if r not in args.include_relation] + args.exclude_relation
    try:
        config = WalkConfig(
            hops=args.hops, walks_per_start=args.walks_per_start, max_paths=args.max_paths,
            hub_quantile=args.hub_quantile, min_out_degree=args.min_out_degree, step_retries=args.step_retries,
            require_recent_fact=not args.no_recent_fact, allow_literal_answers=not args.no_literal_answers,
            require_single_answer=not args.allow_multiple_objects, exclude_relations=excluded,
            mapped_only=not args.include_unmapped,
            as_of=args.as_of, window_days=args.window_days, seed=args.seed, shards=args.shards,
        )
    except ValidationError as error:
        raise UserError(config_error_line(error, "walk config")) from error
    manifest = run_walks(args.graph, args.out, config, beam_args=beam_args)
    counts = manifest.counts
    print(f"walk: {counts['paths:kept']} paths from {counts['starts:eligible']} start entities "
          f"({counts['walks:attempted']} walks, {counts['walks:completed']} completed) -> {args.out}")
    for key, value in counts.items():
        if key.startswith("rejected:"):
            print(f"  {key:<28} {value}")
    for line in below_floor(STAGE, counts):
        print(line)
    return 0
