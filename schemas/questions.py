"""Stage 2 records: relational paths sampled from the graph and the verified questions written from them."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict

from schemas.base import Record
from schemas.wiki import Provenance, Qualifier, ValueType


class PathHop(BaseModel):
    """One edge of a path, copied from its Relation with provenance."""

    model_config = ConfigDict(extra="forbid")
    head: str
    relation: str
    tail: str | None = None
    value: str | None = None
    value_type: ValueType
    qualifiers: list[Qualifier] = []
    provenance: Provenance
    in_window: bool = False


class Path(Record):
    """A relational path start --r1--> n1 --r2--> ... --rk--> answer, the skeleton of a k-hop question."""

    path_id: str
    start: str
    nodes: list[str]
    hops: list[PathHop]
    answer: str
    answer_type: ValueType
    seed: int
    conditions: list[str] = []
    wl_hash: str = ""


class Question(Record):
    """A verified multi-hop question with a unique answer, written from one Path."""

    question_id: str
    text: str
    answer: str
    aliases: list[str] = []
    as_of: dt.date
    hops: int
    obfuscations: list[str] = []
    path: Path
    engine: str
    model: str | None = None
    seed: int = 0
