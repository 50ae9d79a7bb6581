"""`hopsmith extract`: stage 1's arguments and the handler that runs `extract.stage.run_extract`."""

from __future__ import annotations

import argparse
import datetime as dt

from cli.sources import add_source_arguments, source_config
from extract.stage import run_extract
from extract.tables import IMPLAUSIBLE_COUNT
from schemas.base import utc
from schemas.config import ExtractConfig


def parse_as_of(text: str) -> dt.datetime:
    """`--as-of` (of `hopsmith extract` and `hopsmith dataset`): an ISO timestamp, or `YYYY-MM-DD` (that day
    at 00:00 UTC); naive times are UTC."""
    try:
        return utc(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or timestamp: {text!r}") from None


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="stage 1: a Wikipedia dump (or the Action API) -> typed entity-relation graph",
        description="Read pages, resolve redirects, drop disambiguation and non-article pages, and write "
        "entities/, relations/, skipped/, pages/ (parquet) and manifest.json to --out. Other --options are "
        "Apache Beam pipeline options (--runner, --direct_num_workers 2, ...).",
    )
    add_source_arguments(parser)
    defaults = ExtractConfig()
    parser.add_argument("--out", default="out/graph", metavar="DIR", help="output folder (default: %(default)s)")
    parser.add_argument("--as-of", type=parse_as_of, metavar="ISO", help="snapshot time (default: the newest revision in the input that is not dated after "
                        "the dump's own date or the time of the run)")
    parser.add_argument("--window", type=int, default=defaults.window_days, dest="window_days", metavar="DAYS",
                        help="head entities: latest revision at most this many days before --as-of "
                        "(default: %(default)s)")
    parser.add_argument("--max-page-bytes", type=int, default=defaults.max_page_bytes, metavar="N",
                        help="skip larger pages as 'oversized' (default: %(default)s)")
    parser.add_argument("--page-timeout", type=float, default=defaults.page_timeout_s, dest="page_timeout_s", metavar="SECONDS",
                        help="skip pages whose extraction takes longer, in seconds (default: %(default)s)")
    parser.add_argument("--shards", type=int, default=defaults.output_shards, dest="output_shards", metavar="N",
                        help="parquet shards per output table (default: %(default)s)")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    config = ExtractConfig(
        **source_config(args),
        as_of=args.as_of,
        window_days=args.window_days,
        max_page_bytes=args.max_page_bytes,
        page_timeout_s=args.page_timeout_s,
        output_shards=args.output_shards,
    )
    manifest = run_extract(config, args.out, beam_args=beam_args)
    counts = manifest.counts
    print(f"extract: {counts['pages_in']} pages in, {counts['kept']} entities ({counts['head_entities']} head), "
          f"{counts['relations']} relations, {counts['skipped']} skipped -> {args.out}")
    print(f"  as-of {manifest.as_of.isoformat() if manifest.as_of else 'none'}: {manifest.as_of_reason}")
    for key, value in counts.items():
        if key.startswith(("skipped:", "excluded:", "range_check:")) or key == IMPLAUSIBLE_COUNT:
            print(f"  {key:<28} {value}")
    return 0
