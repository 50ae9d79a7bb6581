"""Phase 2 of the Beam pipeline: the output shards. `FinishUnit` rewrites one unit's rows from its parts
with the fix-ups the joins sent it and writes them as sorted runs per output table and shard; `MergeShard`
merges each shard's runs into the output file, streaming (`ground.io.merge_runs`). A unit's relations (most
of its rows) stay Arrow: the page rules read only the fields they judge (`extract.article.RelationFacts`), and
the kept rows are copied from the part with the fields the rules changed (`kept_rows`), never decoded into
records, validated and encoded again."""

from __future__ import annotations

from collections import ChainMap, Counter
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from extract.article import (
    RelationFacts,
    attach_aliases,
    check_ranges,
    distinct_relations,
    is_head,
    named_value_key,
    value_naming,
)
from extract.classify import skip_page
from extract.tables import SORT_KEYS, TABLES, shard_of, skipped_sort_key
from extract.units import UnitParts, page_at
from ground.io import RUN_BATCH_BYTES, RUN_BATCH_ROWS, WorkUnits, merge_runs, write_run
from ground.storage import as_path
from runtime.heap import release_freed_memory
from schemas.base import arrow_schema, to_table
from wikitext.markup import normalize_title

T = TypeVar("T")


class FinishUnit:
    """Phase 2 for one unit: its rows with its fix-ups applied (duplicates dropped, link targets resolved,
    named values turned into edges, linked pages range-checked by their class, aliases and the recency window
    set), written as one sorted run per output table and shard. Yields the plumbing and range-check counts of
    its kept articles."""

    def __init__(self, out_dir: str, shards: int, window_days: int):
        self.out_dir, self.shards, self.window_days = out_dir, shards, window_days

    def process(self, joined, as_of, losers):
        unit_id, grouped = joined
        fixes: dict[str, dict] = {"tail": {}, "tail_class": {}, "name": {}, "aliases": {}}
        parts = UnitParts(self.out_dir, unit_id)
        # pages and relations are copied from their parts as Arrow rows (`part_rows`)
        rows: dict[str, list] = {table: [] for table in TABLES if table not in ("pages", "relations")}
        for kind, *fix in grouped["fixups"]:
            if kind == "skip":
                rows["skipped"].append((skipped_sort_key(fix[0]), fix[0]))
            else:
                fixes[kind][fix[0]] = fix[1]
        rows["skipped"].extend((skipped_sort_key(skip), skip) for skip in parts.rows("skipped"))
        entities = parts.rows("entities")
        facts, part_relations = parts.relations()
        relations = iter(facts)
        # a relation's order: `relation_sort_key`, i.e. (head, provenance page id, ordinal in its page)
        page_ids = part_relations.column("provenance").combine_chunks().field("page_id").to_pylist()
        kept_relations: list[tuple[tuple, RelationFacts]] = []
        pages = parts.pages()
        titles = pages.column("title").to_pylist()
        kept_pages: list[tuple[str, tuple[int, str]]] = []  # (sort key, (row in `pages`, normalised title))
        excluded: Counter = Counter()
        tail_classes = {fixes["tail"].get(title, title): cls for title, cls in fixes["tail_class"].items()}
        for key, row in parts.articles():
            if row.skip_reason is None:
                entity, page_relations = next(entities), [next(relations) for _ in range(row.relations)]
            if key in losers:
                continue
            if row.skip_reason is not None:
                skip = skip_page(page_at(pages, key[1]), row.skip_reason, row.skip_detail)
                rows["skipped"].append((skipped_sort_key(skip), skip))
                continue
            excluded.update(row.excluded)
            entity = entity.model_copy(update={"is_head": is_head(entity.last_modified, as_of, self.window_days)})
            rows["entities"].append((entity.title, attach_aliases(entity, fixes["aliases"].get(entity.title, ()))))
            kept_pages.append((entity.title, (key[1], normalize_title(titles[key[1]]))))
            resolved = [r._replace(tail=fixes["tail"][r.tail]) if r.tail in fixes["tail"] else r
                        for r in page_relations]
            named, named_classes = [], {}
            for relation in distinct_relations(entity.title, resolved):
                target, cls = fixes["name"].get(named_value_key(relation) or "", (None, None))
                update = value_naming(relation, target)
                named.append(relation if update is None else relation._replace(**update))
                if target is not None:
                    named_classes[target] = cls
            class_of = ChainMap(named_classes, tail_classes).get
            for ordinal, relation in enumerate(check_ranges(named, class_of, excluded)):
                kept_relations.append(((relation.head, page_ids[relation.row], ordinal), relation))
        for table, keyed in rows.items():
            for shard, records in enumerate(self._by_shard(keyed)):
                self._write_run(table, unit_id, shard, to_table(TABLES[table], records))
        for shard, kept in enumerate(self._by_shard(kept_pages)):
            rows_kept = part_rows(pages, [row for row, _ in kept], {"title": [title for _, title in kept]})
            self._write_run("pages", unit_id, shard, rows_kept)
        for shard, kept in enumerate(self._by_shard(kept_relations)):
            self._write_run("relations", unit_id, shard, kept_rows(part_relations, kept))
        del rows, pages, kept_pages, part_relations, kept_relations
        release_freed_memory()
        yield dict(excluded)


    def _write_run(self, table: str, unit_id: str, shard: int, rows: pa.Table) -> None:
        """A unit's sorted run for one table and shard, in batches of RUN_BATCH_ROWS wide rows (pages) or as
        many narrow ones (relations) as fill RUN_BATCH_BYTES: each batch has fixed costs (its header, a
        compressed block per buffer; 64-row batches cost a unit's relations 5 times their compression), and a
        merge holds one batch per run, of either kind about as large."""
        fit = RUN_BATCH_BYTES * rows.num_rows // max(rows.nbytes, 1)
        write_run(arrow_schema(TABLES[table]), [rows], _run_path(self.out_dir, table, unit_id, shard),
                  max(RUN_BATCH_ROWS, fit))

    def _by_shard(self, keyed: list[tuple[tuple, T]]) -> list[list[T]]:
        """(sort key, row) pairs -> each output shard's rows, in sort-key order."""
        by_shard: list[list[T]] = [[] for _ in range(self.shards)]
        for sort_key, row in sorted(keyed, key=lambda pair: pair[0]):
            by_shard[shard_of(sort_key, self.shards)].append(row)
        return by_shard


# the fields of a relation the page rules may change; its other fields are copied as they are
_CHANGED_FIELDS = ("tail", "value", "value_type")


def kept_rows(part: pa.Table, kept: list[RelationFacts]) -> pa.Table:
    """The relations part's rows of the `kept` facts, in their order, with the fields the rules changed."""
    return part_rows(part, [facts.row for facts in kept],
                     {name: [getattr(facts, name) for facts in kept] for name in _CHANGED_FIELDS})


def part_rows(part: pa.Table, rows: list[int], changed: dict[str, list]) -> pa.Table:
    """A part's `rows`, in their order, with the `changed` columns' new values."""
    taken = part.take(pa.array(rows, type=pa.int64()))
    for name, values in changed.items():
        field = taken.schema.field(name)
        taken = taken.set_column(taken.schema.get_field_index(name), field, pa.array(values, type=field.type))
    return taken.combine_chunks()


def _run_path(out_dir: str, table: str, unit_id: str, shard: int) -> Path:
    return WorkUnits(out_dir, ()).folder / "runs" / table / f"{unit_id}-{shard:05d}.arrows"


class MergeShard:
    """One output shard: every unit's run for it merged in order (`merge_runs`) and written a row group at
    a time; an empty shard is not written."""

    def __init__(self, out_dir: str, shards: int):
        self.out_dir, self.shards = out_dir, shards

    def process(self, task, unit_ids, _finished):
        table, shard = task
        runs = [_run_path(self.out_dir, table, unit_id, shard) for unit_id in sorted(unit_ids)]
        path = as_path(self.out_dir) / table / f"part-{shard:05d}-of-{self.shards:05d}.parquet"
        scratch = WorkUnits(self.out_dir, ()).folder / "merges" / f"{table}-{shard:05d}"
        written = merge_runs(TABLES[table], runs, SORT_KEYS[table], path, scratch)
        release_freed_memory()
        if written:
            yield str(path)
