"""Stage-1 sources: a MediaWiki dump reader and an Action API reader, as plain iterators and Beam transforms."""

from pipeline.sources.dump import ReadDump, dump_work_units, iter_dump_pages, read_multistream_index

__all__ = ["ReadDump", "dump_work_units", "iter_dump_pages", "read_multistream_index"]
