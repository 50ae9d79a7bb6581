"""The stage's output tables (entities, relations, skipped, pages): their models, how their rows are
ordered (as records, and as Arrow batches for the merge, which never decodes a row), which shard a row goes
to, and the outcome counts of the manifest. The one-process `extract_records` and the Beam pipeline share
them, so both write the same rows in the same order."""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable

import pyarrow as pa

from schemas.wiki import Entity, Page, Relation, SkippedRecord

STAGE = "extract"
TABLES = {"entities": Entity, "relations": Relation, "skipped": SkippedRecord, "pages": Page}
IMPLAUSIBLE_COUNT = "implausible_timestamps"  # revisions dated after the dump's date or the run


def outcome_counts(pages_in: int, kept: int, skip_reasons: Iterable[str], relation_sources: Iterable[str],
                   heads: int, excluded: dict[str, int] | None = None) -> dict[str, int]:
    """Counts by outcome: `pages_in == kept + skipped`, `skipped == sum(skipped:<reason>)`, and the infobox
    values left out as plumbing or by the range check, by reason (`excluded:image_size`, `excluded:range`, ...),
    and the range check's other outcomes (`range_check:fits`, `range_check:unknown_class`, ...)."""
    reasons = Counter(skip_reasons)
    sources = Counter(relation_sources)
    counts = {"pages_in": pages_in, "kept": kept, "skipped": sum(reasons.values()), "head_entities": heads,
              "relations": sum(sources.values())}
    counts.update({f"skipped:{reason}": n for reason, n in reasons.items()})
    counts.update({f"relations:{source}": n for source, n in sources.items()})
    counts.update({reason if ":" in reason else f"excluded:{reason}": n  # `range_check:fits` is no exclusion
                   for reason, n in sorted((excluded or {}).items())})
    return counts


def relation_sort_key(relation: Relation, ordinal: int) -> tuple:
    return (relation.head, relation.provenance.page_id, ordinal)


def skipped_sort_key(record: SkippedRecord) -> tuple:
    return (record.title, record.stage, record.reason, record.page_id or 0, record.detail)


# how the rows of each output table are ordered (a page's relations: by the order `FinishUnit` gave them),
# read from a batch of rows: the merge orders rows by these keys without decoding the rows
def title_sort_keys(batch: pa.RecordBatch) -> list:
    """Each row's title (entities, pages)."""
    return batch.column("title").to_pylist()


def skipped_sort_keys(batch: pa.RecordBatch) -> list:
    """`skipped_sort_key` of each row."""
    title, stage, reason, page_id, detail = (batch.column(name).to_pylist()
                                             for name in ("title", "stage", "reason", "page_id", "detail"))
    return [(t, s, r, p or 0, d) for t, s, r, p, d in zip(title, stage, reason, page_id, detail, strict=True)]


def relation_merge_keys(batch: pa.RecordBatch) -> list:
    """(head, provenance page id) of each row (a page's relations keep the order of their run)."""
    page_ids = batch.column("provenance").field("page_id").to_pylist()
    return list(zip(batch.column("head").to_pylist(), page_ids, strict=True))


SORT_KEYS: dict[str, Callable[[pa.RecordBatch], list]] = {
    "entities": title_sort_keys, "pages": title_sort_keys, "skipped": skipped_sort_keys,
    "relations": relation_merge_keys}


def shard_of(key, shards: int) -> int:
    """A record's output shard: a stable hash of its sort key's first field (the title)."""
    return zlib.crc32(str(key[0] if isinstance(key, tuple) else key).encode("utf-8")) % shards
