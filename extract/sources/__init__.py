"""Stage-1 sources: a MediaWiki dump reader and an Action API reader, as plain iterators and Beam transforms.

`cli.sources` turns the command line's source flags into ExtractConfig fields; a stage reads with
`source_transform(config)`: a PTransform from the pipeline root to a PCollection of `Page | SkippedRecord`
(every page read is one or the other). The transforms live in `extract.sources.transforms`, imported on
first use, so that the plain readers run without importing Beam.
"""

from __future__ import annotations

from pathlib import Path

from extract.sources.dump import (
    check_readable,
    dump_work_units,
    iter_dump_pages,
    read_multistream_index,
)
from extract.sources.mediawiki_api import ApiSettings, MediaWikiApi

_BEAM_NAMES = ("ReadDump", "ReadFromApi", "source_transform")

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


def __getattr__(name: str):
    """The Beam transforms (`extract.sources.transforms`), imported when first asked for: reading pages with
    the plain iterators never imports Beam."""
    if name in _BEAM_NAMES:
        from extract.sources import transforms

        return getattr(transforms, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
