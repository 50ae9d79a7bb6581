"""Stage 1 records: pages read from a dump or the API, and the entities and relations extracted from them."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, field_validator

from pipeline.secrets import scrub
from schemas.base import Record

ValueType = Literal["entity", "date", "number", "quantity", "string"]
RelationSource = Literal["infobox", "link"]


class Page(Record):
    """One page's latest revision as read from a source (dump or Action API)."""

    page_id: int
    title: str
    ns: int
    revision_id: int
    timestamp: AwareDatetime
    text: str
    redirect_to: str | None = None
    source: str = ""


class Provenance(BaseModel):
    """Where a fact came from: enough to find the exact revision and template parameter."""

    model_config = ConfigDict(extra="forbid")
    page_id: int
    page_title: str
    revision_id: int
    timestamp: AwareDatetime
    infobox: str | None = None
    parameter: str | None = None


class Qualifier(BaseModel):
    """A qualifier on a relation: marriage start/end, parenthesised text, ..."""

    model_config = ConfigDict(extra="forbid")
    key: str
    value: str


class Entity(Record):
    """An article that survived extraction: a node of the entity-relation graph."""

    title: str
    type: str
    description: str
    last_modified: AwareDatetime
    is_head: bool
    page_id: int
    revision_id: int
    infobox: str | None = None
    aliases: list[str] = []
    is_list: bool = False


class Relation(Record):
    """A typed edge: head --relation--> tail entity, or head --relation--> literal value."""

    head: str
    relation: str
    group_index: int | None = None
    tail: str | None = None
    value: str | None = None
    value_type: ValueType
    unit: str | None = None
    date: dt.date | None = None
    qualifiers: list[Qualifier] = []
    source: RelationSource = "infobox"
    evidence: str | None = None
    provenance: Provenance


class SkippedRecord(Record):
    """An input that was not kept, with the stage and the reason: nothing is lost silently."""

    title: str
    stage: str
    reason: str
    detail: str = ""
    page_id: int | None = None

    @field_validator("detail")
    @classmethod
    def _no_secret(cls, detail: str) -> str:
        """A detail often quotes a server's reply, which may echo the request's key: it is stored scrubbed."""
        return scrub(detail)
