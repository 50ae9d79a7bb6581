"""A compact array form of the entity-relation graph (CSR), built from stage 1's relations parquet.

Walk sampling touches millions of edges, so the graph lives in flat numpy arrays rather than Python
objects: `indptr`/`dst`/`rel` give each node's out-edges sorted by (relation, object), and per-edge and
per-node flags precompute everything a walk condition needs (recency of the fact, whether the head has a
single object for that relation, list pages, hubs). Node ids cover entities with a page, entity objects
without a page, and literal values (dates, numbers, quantities, strings), so a literal can be an answer.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ground.io import parquet_file, read_table, shard_files
from ground.storage import as_path
from knowledge.ontology import load_ontology
from schemas.base import arrow_schema
from schemas.wiki import Entity, Relation

PAGE, NO_PAGE, LITERAL = 0, 1, 2
LITERAL_PREFIX = "\x00"
_SEP = "\x1f"
RELATION_BATCH_ROWS = 65_536  # relation rows `load_csr` reads and filters at a time
ROWS_PER_READ = 16_384  # relation rows `RelationSource.rows` reads at a time, in whole row groups (at least one)
SOURCE_ROW = "__source_row"  # the column carrying each relation row's position in its source, while building
# What building the graph reads from a relation row: the rest (evidence, qualifiers, provenance beyond
# its timestamp) is read back by row for the sampled paths only (`RelationSource`).
BUILD_COLUMNS = ("head", "relation", "tail", "value", "value_type", "unit", "provenance")


def literal_key(value_type: str, value: str, unit: str | None) -> str:
    """The node key of a literal object: literals with equal type, value and unit are one node."""
    return f"{LITERAL_PREFIX}{value_type}{_SEP}{value}{_SEP}{unit or ''}"


def split_literal_key(key: str) -> tuple[str, str, str | None]:
    value_type, value, unit = key[len(LITERAL_PREFIX) :].split(_SEP)
    return value_type, value, unit or None


@dataclass
class CSRGraph:
    """Nodes 0..n-1, out-edges of node i at `indptr[i]:indptr[i+1]`, sorted by (rel, dst)."""

    keys: np.ndarray  # object: entity title, or literal_key(...) for literals
    kind: np.ndarray  # int8: PAGE, NO_PAGE, LITERAL
    is_head: np.ndarray  # bool
    is_list: np.ndarray  # bool
    is_disambiguation: np.ndarray  # bool
    entity_type: np.ndarray  # object: Entity.type ("" for nodes without a page)
    indptr: np.ndarray  # int64 [n+1]
    dst: np.ndarray  # int32 [m]
    rel: np.ndarray  # int32 [m]
    edge_row: np.ndarray  # int64 [m]: row of `relations`, for provenance
    source_row: np.ndarray  # int64 [m]: the edge's row in the relation source (shards in order, or the table)
    in_window: np.ndarray  # bool [m]: the fact's page revision lies inside the recency window
    single_object: np.ndarray  # bool [m]: the head has exactly one object for this relation
    degree: np.ndarray  # int32 [n]: in + out degree over entity-to-entity edges
    relation_names: list[str]
    relations: pa.Table | None  # the kept relation rows (schema of schemas.Relation); None: read from `source`
    as_of: dt.date
    window_days: int
    build_counts: dict[str, int] = field(default_factory=dict)
    source: RelationSource | None = None  # the relation shards the graph was loaded from

    @property
    def num_nodes(self) -> int:
        return len(self.keys)

    @property
    def num_edges(self) -> int:
        return len(self.dst)

    @property
    def out_degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    def sampler_nbytes(self) -> int:
        """Bytes of the numeric arrays the sampler reads (titles and relation rows excluded)."""
        arrays = (self.kind, self.is_head, self.is_list, self.is_disambiguation, self.indptr, self.dst,
                  self.rel, self.edge_row, self.source_row, self.in_window, self.single_object, self.degree)
        return int(sum(a.nbytes for a in arrays))

    def __getstate__(self) -> dict:
        """Pickled without the key index (built again when asked): a side input travels smaller."""
        return {name: value for name, value in self.__dict__.items() if name != "_key_index"}

    @functools.cached_property
    def _key_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The node ids in key order and the keys in that order, built on the first `node_id` (the walk
        itself never asks). Object arrays, Python string order: a fixed-width string copy would take 4 bytes
        times the longest key for every node."""
        order = np.argsort(self.keys, kind="stable")
        return order, self.keys[order]

    def node_id(self, key: str) -> int | None:
        order, sorted_keys = self._key_index
        index = sorted_keys.searchsorted(key)
        if index < len(sorted_keys) and sorted_keys[index] == key:
            return int(order[index])
        return None

    def relation_id(self, name: str) -> int | None:
        try:
            return self.relation_names.index(name)
        except ValueError:
            return None

    def objects(self, node: int, relation: int) -> np.ndarray:
        """Distinct object node ids of `node --relation-->` (edges are sorted by relation within a node)."""
        start, end = self.indptr[node], self.indptr[node + 1]
        rels = self.rel[start:end]
        lo, hi = rels.searchsorted(relation, "left"), rels.searchsorted(relation, "right")
        return np.unique(self.dst[start + lo : start + hi])

    def label(self, node: int) -> str:
        """A human-readable label: the title, or the literal value with its unit."""
        key = self.keys[node]
        if self.kind[node] != LITERAL:
            return key
        _, value, unit = split_literal_key(key)
        return f"{value} {unit}" if unit else value


def _object_keys(relations: pa.Table) -> pa.Array:
    """Entity objects keep their title; literal objects become literal_key(type, value, unit)."""
    is_entity = pc.equal(relations["value_type"], "entity")
    literal = pc.binary_join_element_wise(
        pc.binary_join_element_wise(LITERAL_PREFIX, relations["value_type"], ""),
        pc.fill_null(relations["value"], ""),
        pc.fill_null(relations["unit"], ""),
        _SEP,
    )
    return pc.if_else(is_entity, relations["tail"], literal).combine_chunks()


def _window_flags(relations: pa.Table, as_of: dt.date, window_days: int) -> np.ndarray:
    stamps = pc.struct_field(relations["provenance"], "timestamp").combine_chunks()
    lower = _day_start(as_of, -window_days)
    upper = _day_start(as_of, 1)
    inside = pc.greater_equal(stamps, pa.scalar(lower, stamps.type))
    if upper is not None:  # None: as_of is the last representable day, so nothing lies after it
        inside = pc.and_(inside, pc.less(stamps, pa.scalar(upper, stamps.type)))
    return pc.fill_null(inside, False).to_numpy(zero_copy_only=False).astype(bool)


def _day_start(day: dt.date, shift_days: int) -> dt.datetime | None:
    """00:00 UTC of `day` shifted by whole days, clamped at the first day; None past the last one."""
    try:
        return dt.datetime.combine(day + dt.timedelta(days=shift_days), dt.time(), dt.UTC)
    except OverflowError:
        return None if shift_days > 0 else dt.datetime.combine(dt.date.min, dt.time(), dt.UTC)


def build_csr(
    entities: pa.Table,
    relations: pa.Table,
    *,
    as_of: dt.date,
    window_days: int,
    exclude_relations: list[str] | None = (),
    mapped_only: bool = False,
) -> CSRGraph:
    """Build the CSR graph from entity and relation tables (schemas of Entity and Relation). With
    `mapped_only`, relations whose parameter maps to no ontology property are left out (and counted)."""
    counts: Counter = Counter()
    walkable = _walkable(relations, excluded_relations(exclude_relations), mapped_only, counts)
    return _build_csr(entities, walkable, counts, as_of=as_of, window_days=window_days)


def excluded_relations(configured: Iterable[str] | None) -> list[str]:
    """The relations a walk never takes: those configured, or for None the non-fact relations of the ontology
    (`data/ontology/non_facts.tsv`, `walks = skip`)."""
    return list(load_ontology().non_fact_relations) if configured is None else list(configured)


def _walkable(relations: pa.Table, exclude_relations, mapped_only: bool, counts: Counter) -> pa.Table:
    """The relation rows a walk may take (mapped when `mapped_only`, not excluded, with an object); what is
    left out is added to `counts` by reason, so batches can be filtered one at a time."""
    counts["relations:read"] += relations.num_rows
    if mapped_only:
        mapped = pc.fill_null(relations["mapped"], False)
        counts["relations:unmapped"] += relations.num_rows - (pc.sum(mapped).as_py() or 0)
        relations = relations.filter(mapped)
    if exclude_relations:
        keep = pc.invert(pc.is_in(relations["relation"], pa.array(list(exclude_relations), pa.string())))
        counts["relations:excluded_relation"] += relations.num_rows - pc.sum(keep).as_py() if relations.num_rows else 0
        relations = relations.filter(keep)
    unusable = pc.or_(
        pc.and_(pc.equal(relations["value_type"], "entity"), pc.is_null(relations["tail"])),
        pc.and_(pc.not_equal(relations["value_type"], "entity"), pc.is_null(relations["value"])),
    )
    counts["relations:no_object"] += pc.sum(pc.cast(unusable, pa.int64())).as_py() or 0
    return relations.filter(pc.invert(unusable))


def _build_csr(entities: pa.Table, relations: pa.Table, counts: Counter, *, as_of: dt.date,
               window_days: int) -> CSRGraph:
    """The CSR graph over walkable relation rows (`_walkable`'s); `counts` holds what was left out."""
    counts = dict(counts)
    source_rows = (relations[SOURCE_ROW].to_numpy().astype(np.int64) if SOURCE_ROW in relations.column_names
                   else np.arange(relations.num_rows, dtype=np.int64))
    relations = relations.drop_columns([SOURCE_ROW]) if SOURCE_ROW in relations.column_names else relations
    objects = _object_keys(relations)

    titles = entities["title"].to_pylist()
    page_keys = sorted(set(titles))
    entity_objects = pc.unique(pc.filter(objects, pc.equal(relations["value_type"], "entity"))).to_pylist()
    other = set(entity_objects) | set(relations["head"].to_pylist())
    no_page_keys = sorted(other - set(page_keys))
    literal_keys = sorted(set(pc.unique(objects).to_pylist()) - set(page_keys) - set(no_page_keys))
    keys = np.array(page_keys + no_page_keys + literal_keys, dtype=object)
    n = len(keys)
    kind = np.concatenate([
        np.full(len(page_keys), PAGE, np.int8),
        np.full(len(no_page_keys), NO_PAGE, np.int8),
        np.full(len(literal_keys), LITERAL, np.int8),
    ])
    key_array = pa.array(keys.tolist(), pa.string())

    by_title = {t: i for i, t in enumerate(titles)}
    page_rows = np.array([by_title[k] for k in page_keys], dtype=np.int64)
    is_head = np.zeros(n, bool)
    is_list = np.zeros(n, bool)
    entity_type = np.full(n, "", dtype=object)
    if len(page_rows):
        is_head[: len(page_keys)] = entities["is_head"].to_numpy(zero_copy_only=False)[page_rows]
        is_list[: len(page_keys)] = entities["is_list"].to_numpy(zero_copy_only=False)[page_rows]
        entity_type[: len(page_keys)] = np.array(entities["type"].to_pylist(), dtype=object)[page_rows]
    lowered_types = np.char.lower(entity_type.astype(str))
    is_disambiguation = (lowered_types == "disambiguation") | np.array(
        [str(k).endswith("(disambiguation)") for k in keys], dtype=bool
    )

    src = pc.index_in(relations["head"], value_set=key_array).to_numpy(zero_copy_only=False).astype(np.int64)
    dst = pc.index_in(objects, value_set=key_array).to_numpy(zero_copy_only=False).astype(np.int64)
    relation_names = sorted(set(relations["relation"].to_pylist()))
    rel = pc.index_in(relations["relation"], value_set=pa.array(relation_names, pa.string()))
    rel = rel.to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.arange(relations.num_rows, dtype=np.int64)
    window = _window_flags(relations, as_of, window_days) if relations.num_rows else np.zeros(0, bool)

    order = np.lexsort((rows, dst, rel, src))
    src, dst, rel, rows, window = src[order], dst[order], rel[order], rows[order], window[order]
    # Group duplicates (spouse and spouse2 naming the same person) collapse into one edge; the edge is
    # recent when any of its facts is.
    first = np.ones(len(src), bool)
    first[1:] = (src[1:] != src[:-1]) | (rel[1:] != rel[:-1]) | (dst[1:] != dst[:-1])
    starts = np.flatnonzero(first)
    window = np.logical_or.reduceat(window, starts) if len(starts) else window
    counts["relations:duplicate_edge"] = int(len(src) - len(starts))
    src, dst, rel, rows = src[starts], dst[starts], rel[starts], rows[starts]

    group_start = np.ones(len(src), bool)
    group_start[1:] = (src[1:] != src[:-1]) | (rel[1:] != rel[:-1])
    group_id = np.cumsum(group_start) - 1
    group_size = np.bincount(group_id) if len(group_id) else np.zeros(0, np.int64)
    single_object = group_size[group_id] == 1 if len(group_id) else np.zeros(0, bool)

    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    entity_edge = kind[dst] != LITERAL
    degree = (np.bincount(src[entity_edge], minlength=n) + np.bincount(dst[entity_edge], minlength=n)).astype(np.int32)
    counts["graph:nodes"] = n
    counts["graph:edges"] = len(src)
    return CSRGraph(
        keys=keys,
        kind=kind,
        is_head=is_head,
        is_list=is_list,
        is_disambiguation=is_disambiguation,
        entity_type=entity_type,
        indptr=indptr,
        dst=dst.astype(np.int32),
        rel=rel.astype(np.int32),
        edge_row=rows,
        source_row=source_rows[rows],
        in_window=window,
        single_object=single_object,
        degree=degree,
        relation_names=relation_names,
        relations=relations,
        as_of=as_of,
        window_days=window_days,
        build_counts=counts,
    )


@dataclass(frozen=True)
class RelationSource:
    """Stage 1's relation shards, in `shard_files` order: a graph's `source_row` r is row r of their
    concatenation. Reads rows by number a row group at a time, so a reader holds one group, not the table."""

    files: tuple[str, ...]
    offsets: tuple[int, ...]  # first row of each file; one more entry: the total

    @classmethod
    def of(cls, files: Iterable) -> RelationSource:
        files = tuple(str(f) for f in files)
        sizes = [parquet_file(f).metadata.num_rows for f in files]
        return cls(files, tuple(int(x) for x in np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])))

    def rows(self, rows: Iterable[int], columns: list[str]) -> dict[int, dict]:
        """The given rows' `columns` as dicts (values as the graph's relation table gives them), read
        `ROWS_PER_READ` rows of whole row groups at a time, only groups holding a wanted row."""
        wanted = np.unique(np.fromiter(rows, np.int64))
        schema = pa.schema([arrow_schema(Relation).field(name) for name in columns])
        found: dict[int, dict] = {}
        at = np.searchsorted(self.offsets, wanted, "right") - 1
        for index in np.unique(at):
            local = wanted[at == index] - self.offsets[index]
            file = parquet_file(self.files[index])
            sizes = [file.metadata.row_group(g).num_rows for g in range(file.num_row_groups)]
            group_starts = np.cumsum([0] + sizes)
            groups = np.searchsorted(group_starts, local, "right") - 1
            needed = np.unique(groups)
            for chunk in _row_group_reads(needed, sizes):
                table = file.read_row_groups(chunk.tolist(), columns=columns).cast(schema)
                # row positions inside the concatenation of the chunk's groups
                chunk_starts = np.cumsum([0] + [sizes[g] for g in chunk[:-1]])
                picked = np.isin(groups, chunk)
                position = chunk_starts[np.searchsorted(chunk, groups[picked])] + local[picked] - group_starts[groups[picked]]
                for row, values in zip(local[picked], table.take(pa.array(position)).to_pylist(), strict=True):
                    found[int(row + self.offsets[index])] = values
        return found


def _row_group_reads(groups: np.ndarray, sizes: list[int]) -> Iterator[np.ndarray]:
    """`groups` (ascending) in consecutive reads of up to ROWS_PER_READ rows, at least one group each."""
    start, rows = 0, 0
    for end, group in enumerate(groups):
        if end > start and rows + sizes[group] > ROWS_PER_READ:
            yield groups[start:end]
            start, rows = end, 0
        rows += sizes[group]
    if start < len(groups):
        yield groups[start:]


def load_csr(graph_dir: str | Path, *, as_of: dt.date, window_days: int, exclude_relations: list[str] | None = (),
             mapped_only: bool = False, keep_relations: bool = True) -> CSRGraph:
    """Read stage 1's entities/ and relations/ shards and build the CSR graph. Without `keep_relations`
    the graph holds no relation rows (a walk worker's graph: `path_hops` reads them from `source` by
    `source_row`), and only the columns building needs are kept while building."""
    graph_dir = as_path(graph_dir)
    entities = read_table(Entity, graph_dir / "entities")
    counts: Counter = Counter()
    schema = arrow_schema(Relation)
    files = shard_files(graph_dir / "relations")
    source = RelationSource.of(files)
    columns = [*(schema.names if keep_relations else BUILD_COLUMNS), SOURCE_ROW]
    kept, exclude_relations = [], excluded_relations(exclude_relations)
    # a batch of relation rows at a time: the unmapped, excluded (`links_to`) and objectless rows, most of
    # the table, are never all in memory, only the rows the graph keeps (and `relations` holds)
    for file, start in zip(files, source.offsets[:-1], strict=True):
        for batch in parquet_file(file).iter_batches(batch_size=RELATION_BATCH_ROWS):
            table = pa.Table.from_batches([batch]).cast(schema)
            table = table.append_column(SOURCE_ROW, pa.array(np.arange(start, start + table.num_rows, dtype=np.int64)))
            start += table.num_rows
            kept.append(_walkable(table, exclude_relations, mapped_only, counts).select(columns))
    empty = schema.empty_table().append_column(SOURCE_ROW, pa.array([], pa.int64()))
    graph = _build_csr(entities, pa.concat_tables(kept) if kept else empty.select(columns), counts, as_of=as_of,
                       window_days=window_days)
    graph.source = source
    if not keep_relations:
        graph.relations = None
    return graph
