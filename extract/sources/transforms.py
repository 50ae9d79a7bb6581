"""The stage-1 sources as Beam transforms: `ReadDump` (a dump's work units read on workers), `ReadFromApi`
(batches of titles fetched on workers) and `source_transform(config)`, the one a config names. The readers
themselves are plain iterators (`extract.sources.dump`, `extract.sources.mediawiki_api`), which import no
Beam."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Iterator

import apache_beam as beam

from extract.sources.dump import (
    DEFAULT_STREAMS_PER_UNIT,
    DumpUnit,
    check_multistream,
    check_readable,
    dump_work_units,
    read_dump_unit,
)
from extract.sources.mediawiki_api import (
    TITLES_PER_REQUEST,
    ApiSettings,
    MediaWikiApi,
    batched,
    check_api_url,
    check_recent_days,
    normalise_title,
)
from ground.errors import UserError
from schemas.config import ExtractConfig
from schemas.wiki import Page, SkippedRecord


def source_transform(config: ExtractConfig, now: dt.datetime | None = None) -> beam.PTransform:
    """The reading PTransform for a config: ReadDump for a dump, ReadFromApi for an API URL."""
    if (config.dump is None) == (config.api_url is None):
        raise UserError("choose one source: a dump or an API URL")
    if config.dump is not None:
        return ReadDump(config.dump, config.index, config.streams_per_unit)
    settings = ApiSettings(url=config.api_url, max_in_flight=config.api_max_in_flight)
    return ReadFromApi(settings, titles=config.api_titles, recent_days=config.api_recent_days, now=now)


class _ReadUnitFn(beam.DoFn):
    """Read one work unit, counting pages and skips by reason in Beam metrics."""

    def process(self, unit: DumpUnit):
        for record in read_dump_unit(unit):
            name = "pages" if isinstance(record, Page) else f"skipped.{record.reason}"
            beam.metrics.Metrics.counter("hopsmith.read", name).inc()
            yield record


def _plan_units(paths: tuple[str, str], streams_per_unit: int) -> list[DumpUnit]:
    dump, index = paths
    return dump_work_units(dump, index, streams_per_unit)


class ReadDump(beam.PTransform):
    """PBegin -> PCollection of Page | SkippedRecord read from a dump.

    With a multistream index the index is read on a worker, split into units of `streams_per_unit`
    streams and reshuffled so a distributed runner reads units in parallel. Without one, the dump is read
    sequentially as one unit. Missing files are UserErrors at construction time.
    """

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | None = None,
                 streams_per_unit: int = DEFAULT_STREAMS_PER_UNIT):
        super().__init__()
        self.index = check_readable(index, "index") if index is not None else None
        self.path = check_readable(path) if index is None else check_multistream(path)
        if streams_per_unit < 1:
            raise UserError(f"streams per unit must be at least 1, got {streams_per_unit}")
        self.streams_per_unit = streams_per_unit

    def expand(self, pbegin):
        if self.index is None:
            units = pbegin | "WholeDump" >> beam.Create([DumpUnit(self.path)])
        else:
            units = (
                pbegin
                | "Index" >> beam.Create([(self.path, self.index)])
                | "PlanUnits" >> beam.FlatMap(_plan_units, self.streams_per_unit)
                | "SpreadUnits" >> beam.Reshuffle()
            )
        return units | "ReadUnits" >> beam.ParDo(_ReadUnitFn())


class _FetchBatchFn(beam.DoFn):
    """Fetch one batch of titles (a work unit) with a client built on the worker."""

    def __init__(self, settings: ApiSettings):
        self.settings = settings
        self.api: MediaWikiApi | None = None

    def setup(self):
        self.api = MediaWikiApi(self.settings)

    def process(self, titles: list[str]):
        for record in self.api.fetch_pages(titles):
            name = "pages" if isinstance(record, Page) else f"skipped.{record.reason}"
            beam.metrics.Metrics.counter("hopsmith.read", name).inc()
            yield record


def _recent_batches(days: int, settings: ApiSettings, now: dt.datetime | None) -> Iterator[list[str]]:
    return batched(MediaWikiApi(settings).recent_titles(days, now), TITLES_PER_REQUEST)


def _record_key(record: Page | SkippedRecord) -> str:
    """Records of the same page (a redirect target reached from two batches) share a key."""
    if isinstance(record, Page):
        return f"page:{record.page_id}"
    return f"skip:{normalise_title(record.title)}:{record.reason}"


def _first_by_content(records: Iterable[Page | SkippedRecord]) -> Page | SkippedRecord:
    return min(records, key=lambda record: record.model_dump_json())


class ReadFromApi(beam.PTransform):
    """PBegin -> PCollection of Page | SkippedRecord from the Action API: `titles`, or `recent_days`.

    Titles are batched 50 to a request; batches are the work units, reshuffled across workers. Each
    worker process keeps at most `settings.max_in_flight` requests in flight. Records of a page reached
    from several batches (a shared redirect target) are kept once.
    """

    def __init__(self, settings: ApiSettings, titles: Iterable[str] = (), recent_days: int | None = None,
                 now: dt.datetime | None = None):
        super().__init__()
        check_api_url(settings.url)
        self.settings = settings
        self.titles = list(dict.fromkeys(titles))
        self.recent_days = check_recent_days(recent_days) if recent_days is not None else None
        if bool(self.titles) == (self.recent_days is not None):
            raise UserError("the API source needs either titles or a number of recent days, not both")
        self.now = now

    def expand(self, pbegin):
        if self.titles:
            batches = pbegin | "TitleBatches" >> beam.Create(list(batched(self.titles, TITLES_PER_REQUEST)))
        else:
            batches = (
                pbegin
                | "RecentDays" >> beam.Create([self.recent_days])
                | "ListRecentChanges" >> beam.FlatMap(_recent_batches, self.settings, self.now)
            )
        return (
            batches
            | "SpreadBatches" >> beam.Reshuffle()
            | "FetchRevisions" >> beam.ParDo(_FetchBatchFn(self.settings))
            | "KeyByPage" >> beam.WithKeys(_record_key)
            | "OnePerPage" >> beam.CombinePerKey(_first_by_content)
            | "DropKeys" >> beam.Values()
        )
