"""World-scale counts for uniqueness that does not shrink with the slice (`hopsmith census`).

A run's graph is a slice: "a higher education institution whose campus setting is City" fits one entity of
it and thousands of the wiki. A census, counted once from the graph of a full dump (`hopsmith census`), holds
how many subjects state each (relation, value) fact and how many entities each class has; the questions
stage reads it (`questions.census`) to estimate how many entities of the whole wiki fit a start's
description. Without one, the conservative rule holds instead: a described start needs a named anchor, a
fact whose object is a page (a place, a person, a work), never only dates, numbers or keywords.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ground.io import read_manifest, read_table
from ground.storage import as_path
from schemas.wiki import Entity, Relation

_SEP = "\t"


@dataclass(frozen=True)
class Census:
    """Subjects per (relation, value) fact and entities per class, over the graph it was counted from."""

    values: dict[str, int]  # "relation<TAB>value" -> subjects stating it
    classes: dict[str, int]
    entities: int
    source: str  # the graph folder's stage key it was counted from

    def holders(self, relation: str, value: str) -> int:
        return self.values.get(f"{relation}{_SEP}{value}", 0)


def count_census(graph_dir: str | Path) -> Census:
    """The census of an extract stage's graph folder (a full dump's, to be of use)."""
    graph_dir = as_path(graph_dir)
    manifest = read_manifest(graph_dir)
    if manifest is None:
        raise FileNotFoundError(f"{graph_dir} holds no finished graph (run `hopsmith extract`)")
    types = read_table(Entity, graph_dir / "entities").column("type").to_pylist()
    rows = read_table(Relation, graph_dir / "relations").select(["head", "relation", "tail", "value"]).to_pylist()
    values = Counter(f"{row['relation']}{_SEP}{row['tail'] if row['tail'] is not None else row['value']}"
                     for row in {(r["head"], r["relation"], r["tail"], r["value"]): r for r in rows}.values())
    return Census(dict(values), dict(Counter(t for t in types if t)), len(types), manifest.key)


def save_census(census: Census, path: str | Path) -> None:
    as_path(path).write_text(json.dumps({"source": census.source, "entities": census.entities,
                                         "classes": census.classes, "values": census.values}, sort_keys=True))


def load_census(path: str | Path) -> Census:
    data = json.loads(as_path(path).read_text())
    return Census(data["values"], data["classes"], data["entities"], data["source"])
