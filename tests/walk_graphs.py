"""Small hand-made graphs (Entity and Relation records) for the walk and question tests."""

from __future__ import annotations

import datetime as dt
import zlib
from pathlib import Path

import pyarrow as pa

from graph.csr import CSRGraph, build_csr
from ground.io import write_manifest, write_records
from schemas.base import to_table
from schemas.manifest import Manifest
from schemas.wiki import Entity, Provenance, Qualifier, Relation

AS_OF = dt.date(2026, 3, 1)
RECENT = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)  # revised on the snapshot day: a question of such facts is as of AS_OF
OLD = dt.datetime(2019, 5, 1, tzinfo=dt.UTC)


def entity(title: str, type_: str = "person", *, head: bool = True, is_list: bool = False, description: str = "",
           aliases: list[str] = (), when: dt.datetime = RECENT) -> Entity:
    return Entity(title=title, type=type_, description=description or f"{title} ({type_})", last_modified=when,
                  is_head=head, page_id=zlib.crc32(title.encode()) % 10**6, revision_id=1, infobox=f"Infobox {type_}",
                  aliases=list(aliases), is_list=is_list)


def fact(head: str, relation: str, obj: str, value_type: str = "entity", *, when: dt.datetime = RECENT,
         unit: str | None = None, group_index: int | None = None, qualifiers: dict[str, str] | None = None,
         source: str = "infobox", evidence: str | None = None, mapped: bool | None = None) -> Relation:
    """A relation row; infobox facts are mapped ontology properties unless `mapped=False`."""
    is_entity = value_type == "entity"
    date = None
    if value_type == "date" and len(obj) == 10:
        date = dt.date.fromisoformat(obj)
    return Relation(
        head=head, relation=relation, group_index=group_index,
        mapped=source == "infobox" if mapped is None else mapped,
        tail=obj if is_entity else None, value=None if is_entity else obj, value_type=value_type, unit=unit,
        date=date, qualifiers=[Qualifier(key=k, value=v) for k, v in (qualifiers or {}).items()],
        source=source, evidence=evidence,
        provenance=Provenance(page_id=zlib.crc32(head.encode()) % 10**6, page_title=head, revision_id=1, timestamp=when,
                              infobox="Infobox", parameter=relation),
    )


def tables(entities: list[Entity], relations: list[Relation]) -> tuple[pa.Table, pa.Table]:
    return to_table(Entity, entities), to_table(Relation, relations)


def csr(entities: list[Entity], relations: list[Relation], exclude: list[str] = ("links_to",)) -> CSRGraph:
    ents, rels = tables(entities, relations)
    return build_csr(ents, rels, as_of=AS_OF, window_days=182, exclude_relations=list(exclude))


def write_graph(folder: Path, entities: list[Entity], relations: list[Relation], relation_shards: int = 1,
                row_group_rows: int | None = None) -> Path:
    """Write a graph the way stage 1 does: entities/, relations/ shards (`relation_shards` of them, in row
    groups of `row_group_rows`) and a finished manifest."""
    write_records(Entity, entities, folder / "entities" / "entities-00000.parquet")
    size = -(-len(relations) // relation_shards)
    for shard in range(relation_shards):
        write_records(Relation, relations[shard * size : (shard + 1) * size],
                      folder / "relations" / f"relations-{shard:05d}.parquet", row_group_rows)
    write_manifest(folder, Manifest(stage="extract", key="test-graph", code_version="test",
                                    as_of=dt.datetime.combine(AS_OF, dt.time(), dt.UTC), window_days=182))
    return folder
