"""The as-of time of a run: given by `--as-of`, else the newest plausible revision in the input, where a
revision dated after the dump's own date (plus a slack) or after the run is implausible: kept, but it never
chooses the as-of. `NewestPlausible` is the accumulator of that choice, per work unit and merged over them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from collections.abc import Iterable

from schemas.base import utc
from schemas.config import ExtractConfig
from schemas.wiki import Page, SkippedRecord

DUMP_DATE_SLACK = dt.timedelta(days=7)  # a dump named for the day it started takes days to write
_DUMP_DATE = re.compile(r"(?:^|[-_.])((?:19|20)\d{2})(\d{2})(\d{2})(?=[-_.])")


def dump_date(path: str | None) -> dt.date | None:
    """The date in a Wikimedia dump's file name (`enwiki-20240601-pages-articles...`), when it has one."""
    match = _DUMP_DATE.search(os.path.basename(path or ""))
    if match is None:
        return None
    try:
        return dt.date(*(int(part) for part in match.groups()))
    except ValueError:
        return None


def timestamp_ceiling(config: ExtractConfig, now: dt.datetime | None = None) -> tuple[dt.datetime, str]:
    """The latest plausible revision time and what set it: the dump's date (plus DUMP_DATE_SLACK) or now.
    A revision dated later (year 9999, a clock in the future) would otherwise become the default as-of."""
    now = utc(now or dt.datetime.now(dt.UTC))
    day = dump_date(config.dump)
    if day is not None:
        dated = dt.datetime.combine(day, dt.time(), dt.UTC) + DUMP_DATE_SLACK
        if dated < now:
            return dated, f"the dump's date {day.isoformat()} + {DUMP_DATE_SLACK.days} days"
    return now, "the time of the run"


@dataclasses.dataclass(frozen=True)
class AsOfChoice:
    """The snapshot time of a run and why it was chosen; `implausible` counts revisions dated after the
    ceiling, which are kept (never head entities) but never choose the as-of."""

    as_of: dt.datetime | None
    reason: str
    implausible: int = 0

    @classmethod
    def choose(cls, given: dt.datetime | None, newest: dt.datetime | None, implausible: int,
               ceiling: tuple[dt.datetime, str]) -> AsOfChoice:
        ignored = (f"; {implausible} revision(s) dated after {ceiling[0].isoformat()} ({ceiling[1]}) ignored"
                   if implausible else "")
        if given is not None:
            return cls(utc(given), "given by --as-of" + ignored, implausible)
        if newest is None:
            return cls(None, "no page with a plausible revision time" + ignored, implausible)
        return cls(newest, "the newest plausible revision in the input" + ignored, implausible)


class NewestPlausible:
    """(newest revision time not after the ceiling, count of revisions after it) over Page records."""

    def __init__(self, ceiling: dt.datetime):
        self.ceiling = ceiling

    def create_accumulator(self):
        return (None, 0)

    def add_input(self, accumulator, record):
        newest, implausible = accumulator
        if not isinstance(record, Page):
            return accumulator
        stamp = utc(record.timestamp)
        if stamp > self.ceiling:
            return newest, implausible + 1
        return (stamp if newest is None or stamp > newest else newest), implausible

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        stamps = [newest for newest, _ in accumulators if newest is not None]
        return (max(stamps) if stamps else None), sum(n for _, n in accumulators)


def choose_as_of(records: Iterable[Page | SkippedRecord], config: ExtractConfig,
                 now: dt.datetime | None = None) -> AsOfChoice:
    ceiling = timestamp_ceiling(config, now)
    combine = NewestPlausible(ceiling[0])
    accumulator = combine.create_accumulator()
    for record in records:
        accumulator = combine.add_input(accumulator, record)
    return AsOfChoice.choose(config.as_of, *accumulator, ceiling)
