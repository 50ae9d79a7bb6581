"""Stage-1 sources: a MediaWiki dump reader and an Action API reader, as plain iterators and Beam transforms.

`cli.sources` turns the command line's source flags into ExtractConfig fields; a stage reads with
`source_transform(config)`: a PTransform from the pipeline root to a PCollection of `Page | SkippedRecord`
(every page read is one or the other).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import apache_beam as beam

from extract.sources.dump import (
    ReadDump,
    check_readable,
    dump_work_units,
    iter_dump_pages,
    read_multistream_index,
)
from extract.sources.mediawiki_api import ApiSettings, MediaWikiApi, ReadFromApi
from ground.errors import UserError
from schemas.config import ExtractConfig

__all__ = [
    "ApiSettings",
    "MediaWikiApi",
    "ReadDump",
    "ReadFromApi",
    "check_readable",
    "dump_work_units",
    "iter_dump_pages",
    "read_multistream_index",
    "sibling_index",
    "source_transform",
]


def sibling_index(dump: str) -> str | None:
    """`X-multistream-index.txt.bz2` beside `X-multistream.xml.bz2`, when it exists (Wikimedia's naming)."""
    path = Path(dump)
    if not path.name.endswith("-multistream.xml.bz2"):
        return None
    index = path.with_name(path.name.removesuffix(".xml.bz2") + "-index.txt.bz2")
    return str(index) if index.is_file() else None


def source_transform(config: ExtractConfig, now: dt.datetime | None = None) -> beam.PTransform:
    """The reading PTransform for a config: ReadDump for a dump, ReadFromApi for an API URL."""
    if (config.dump is None) == (config.api_url is None):
        raise UserError("choose one source: a dump or an API URL")
    if config.dump is not None:
        return ReadDump(config.dump, config.index, config.streams_per_unit)
    settings = ApiSettings(url=config.api_url, max_in_flight=config.api_max_in_flight)
    return ReadFromApi(settings, titles=config.api_titles, recent_days=config.api_recent_days, now=now)
