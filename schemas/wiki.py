"""Stage 1 records: pages read from a dump or the API, and the entities and relations extracted from them."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from schemas.base import Record
from schemas.secrets import scrub

ValueType = Literal["entity", "date", "number", "quantity", "string"]
RelationSource = Literal["infobox", "link"]
MAX_ID = 2**63 - 1
# Page and revision ids are stored as parquet int64: a larger (or negative) id from a damaged dump or a
# hostile API fails validation here, where readers turn it into a counted `invalid_field` skip.
WikiId = Annotated[int, Field(ge=0, le=MAX_ID)]


class Page(Record):
    """One page's latest revision as read from a source (dump or Action API)."""

    page_id: WikiId
    title: str
    ns: int
    revision_id: WikiId
    timestamp: AwareDatetime
    text: str
    redirect_to: str | None = None
    source: str = ""


class Provenance(BaseModel):
    """Where a fact came from: enough to find the exact revision and template parameter."""

    model_config = ConfigDict(extra="forbid")
    page_id: WikiId
    page_title: str
    revision_id: WikiId
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
    page_id: WikiId
    revision_id: WikiId
    infobox: str | None = None
    aliases: list[str] = []
    is_list: bool = False


class Relation(Record):
    """A typed edge: head --relation--> tail entity, or head --relation--> literal value.

    `relation` is the ontology property the infobox parameter maps to (`birthPlace`, see graph/ontology.py)
    when `mapped`; otherwise the normalised parameter name (`coa_res`) or `links_to`. The raw parameter is
    always in `provenance.parameter`.
    """

    head: str
    relation: str
    mapped: bool = False
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
    page_id: WikiId | None = None

    @field_validator("detail")
    @classmethod
    def _no_secret(cls, detail: str) -> str:
        """A detail often quotes a server's reply, which may echo the request's key: it is stored scrubbed."""
        return scrub(detail)


def bounded_id(value: object) -> int | None:
    """An id usable on a SkippedRecord: the integer when it parses and fits int64, else None."""
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return number if 0 <= number <= MAX_ID else None


def invalid_detail(error: ValueError) -> str:
    """One line naming the field and value that failed validation (pydantic's first line names neither)."""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return f"{field}={str(first.get('input'))[:80]!r}: {first['msg']}"
    return str(error).splitlines()[0] if str(error) else type(error).__name__
