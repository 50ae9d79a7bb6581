"""The stage-1 source flags: `add_source_arguments` (a dump or the MediaWiki Action API) and `source_config`,
which turns the parsed flags into ExtractConfig fields; shared by `hopsmith extract` and any command that
reads pages. The readers themselves are `extract.sources`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from extract.sources import check_readable, sibling_index
from extract.sources.mediawiki_api import RECENT_CHANGES_MAX_DAYS, check_recent_days
from ground.errors import UserError
from schemas.config import ExtractConfig


def _recent_days(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of days, got {text!r}")
    try:
        return check_recent_days(int(text))
    except UserError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """`--dump/--index/--streams-per-unit` or `--api` with `--titles/--titles-file/--recent-days`."""
    defaults = ExtractConfig()
    dump = parser.add_argument_group("dump source")
    dump.add_argument("--dump", metavar="PATH",
                      help="pages-articles[-multistream].xml[.bz2] dump (plain XML and bz2 both read)")
    dump.add_argument("--index", metavar="PATH",
                      help="the multistream dump's index (…-multistream-index.txt[.bz2]; found automatically "
                      "beside a …-multistream.xml.bz2 dump); with it the dump is read as independent work units "
                      "that a Beam runner spreads over workers")
    dump.add_argument("--streams-per-unit", type=_positive, default=defaults.streams_per_unit, metavar="N",
                      help="bz2 streams (~100 pages each) per work unit with --index (default: %(default)s)")
    api = parser.add_argument_group(
        "MediaWiki Action API source",
        "Latest revisions, 50 titles a request, with maxlag=5, Retry-After honoured and a User-Agent naming "
        "hopsmith and the contact in $HOPSMITH_CONTACT. Anonymous API traffic is rate-limited: use a dump "
        "for more than a few thousand pages.",
    )
    api.add_argument("--api", metavar="URL", help="the wiki's api.php, e.g. https://en.wikipedia.org/w/api.php")
    api.add_argument("--titles", nargs="+", metavar="T", default=[], help="page titles to fetch")
    api.add_argument("--titles-file", metavar="PATH", help="a file of page titles, one per line")
    api.add_argument("--recent-days", type=_recent_days, metavar="N",
                     help="fetch the main-namespace pages changed in the last N days; list=recentchanges only "
                     f"reaches back {RECENT_CHANGES_MAX_DAYS} days, so N is 1 to {RECENT_CHANGES_MAX_DAYS}")
    api.add_argument("--api-max-in-flight", type=_positive, default=defaults.api_max_in_flight, metavar="N",
                     help="API requests in flight at once per worker process (default: %(default)s)")


def _read_titles(path: str) -> list[str]:
    check_readable(path, "titles")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"titles file {path} is unreadable: {error}") from None
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def source_config(args: argparse.Namespace) -> dict:
    """ExtractConfig fields from the parsed source arguments, or a UserError for an inconsistent choice."""
    dump, api = getattr(args, "dump", None), getattr(args, "api", None)
    titles = list(getattr(args, "titles", None) or [])
    if getattr(args, "titles_file", None):
        titles += _read_titles(args.titles_file)
    recent_days = getattr(args, "recent_days", None)
    if (dump is None) == (api is None):
        raise UserError("choose one source: --dump PATH or --api URL")
    if dump is None and getattr(args, "index", None):
        raise UserError("--index belongs to --dump")
    if api is None and (titles or recent_days):
        raise UserError("--titles, --titles-file and --recent-days belong to --api")
    if api is not None and bool(titles) == (recent_days is not None):
        raise UserError("--api needs --titles/--titles-file or --recent-days (one of them)")
    index = getattr(args, "index", None) or (sibling_index(dump) if dump else None)
    fields = {"dump": dump, "index": index, "api_url": api, "api_titles": titles,
              "api_recent_days": recent_days}
    for name in ("streams_per_unit", "api_max_in_flight"):
        if getattr(args, name, None) is not None:
            fields[name] = getattr(args, name)
    return fields
