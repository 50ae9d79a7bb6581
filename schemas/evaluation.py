"""`hopsmith eval` records: one result a question (its k rollouts, each in BrowseComp-Plus's run-JSON fields
where they apply) and the summary figures computed from them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from schemas.base import Record


class OutputItem(BaseModel):
    """BrowseComp-Plus's `result` entry: the agent's final output."""

    model_config = ConfigDict(extra="forbid")
    type: str = "output_text"
    output: str


class RolloutResult(BaseModel):
    """One rollout. `tool_call_counts`, `status` ("completed" when the agent answered, else the stop reason),
    `retrieved_docids` (every page a search listed or a call opened) and `result` are BrowseComp-Plus's
    run fields; doc ids are page ids as strings."""

    model_config = ConfigDict(extra="forbid")
    rollout: int
    tool_call_counts: dict[str, int]
    status: str
    retrieved_docids: list[str]
    result: list[OutputItem]
    final_answer: str | None = None
    correct: bool
    f1: float
    turns: int
    searches: int
    evidence_recall: float | None = None  # share of the path pages retrieved; None when no path page is indexed
    turns_to_answer_seen: int | None = None  # turns up to the first observation that shows the answer
    searches_to_answer_seen: int | None = None
    answered_before_search: bool = False
    judge_correct: bool | None = None  # the optional LLM answer judge's verdict; None when not judged or unparsed


class QuestionResult(Record):
    """All rollouts of one question, with what the summary groups them by."""

    query_id: str
    query: str
    hops: int
    shape: str
    final_relation: str
    evidence_docids: list[str]  # the path pages (qrel_evidence)
    gold_docids: list[str]  # the page that states the answer (qrel_golds)
    policy: str
    framework: str
    engine: str
    model: str | None = None
    rollouts: list[RolloutResult]
    pass_rate: float
