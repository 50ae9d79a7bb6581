"""The schema contract: Arrow schemas derive from the pydantic models and every record round-trips."""

import datetime as dt
import enum
from typing import Any

import pyarrow as pa
import pytest

from schemas.base import SCHEMA_VERSION, Record, arrow_schema, from_row, from_table, to_row, to_table
from schemas.critic import CriterionScore, JudgedTrajectory, TurnJudgement
from schemas.dataset import PromptMessage, RLPrompt
from schemas.questions import Path, PathHop, Question
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from schemas.wiki import Entity, Page, Provenance, Qualifier, Relation, SkippedRecord

TS = dt.datetime(2026, 5, 1, 12, 30, tzinfo=dt.UTC)
PROV = Provenance(page_id=7, page_title="Inception", revision_id=99, timestamp=TS, infobox="infobox film", parameter="director")


def _samples():
    relation = Relation(
        head="Inception", relation="director", tail="Christopher Nolan", value_type="entity", provenance=PROV
    )
    dated = Relation(
        head="Christopher Nolan",
        relation="spouse",
        tail="Emma Thomas",
        value_type="entity",
        qualifiers=[Qualifier(key="start", value="1997")],
        provenance=PROV,
    )
    literal = Relation(
        head="Thames", relation="length", value="346", unit="km", value_type="quantity", provenance=PROV
    )
    hop = PathHop(head="Inception", relation="director", tail="Christopher Nolan", value_type="entity", provenance=PROV)
    path = Path(path_id="p1", start="Inception", nodes=["Inception", "Christopher Nolan"], hops=[hop],
                answer="Christopher Nolan", answer_type="entity", seed=3, conditions=["no_revisit"])
    question = Question(question_id="q1", text="Who directed the 2010 heist film?", answer="Christopher Nolan",
                        as_of=dt.date(2026, 10, 1), hops=1, path=path, engine="template")
    turn = Turn(index=0, reasoning="search", tool_call=ToolCall(call_id="c0", name="search",
                arguments={"query": "Inception", "top_k": 3, "nested": {"a": [1, 2]}}), observation="1. Inception")
    trajectory = Trajectory(trajectory_id="t1", question_id="q1", question=question.text, answer=question.answer,
                            as_of=question.as_of, framework="tagged", policy="scripted", engine="offline", seed=0,
                            turns=[turn, Turn(index=1, final_answer="Christopher Nolan")], stop_reason="answered",
                            outcome=Outcome(exact_match=True, f1=1.0, correct=True))
    score = CriterionScore(score=0.9, passed=True, rationale="ok")
    judgement = TurnJudgement(trajectory_id="t1", turn_index=0, tool_accuracy=score, information_gain=score,
                              logical_soundness=score, verdict=True, reward=0.9, loss_mask=1, engine="offline")
    return [
        (Page, Page(page_id=1, title="Inception", ns=0, revision_id=2, timestamp=TS, text="{{Infobox film}}")),
        (Entity, Entity(title="Inception", type="film", description="A film.", last_modified=TS, is_head=True,
                        page_id=1, revision_id=2, aliases=["Inception (film)"])),
        (Relation, relation),
        (Relation, dated),
        (Relation, literal),
        (SkippedRecord, SkippedRecord(title="Huge page", stage="extract", reason="oversized", page_id=5)),
        (Path, path),
        (Question, question),
        (Trajectory, trajectory),
        (TurnJudgement, judgement),
        (JudgedTrajectory, JudgedTrajectory(trajectory=trajectory, judgements=[judgement], outcome_reward=1.0)),
        (RLPrompt, RLPrompt(prompt_id="r1", question_id="q1", prompt=[PromptMessage(role="user", content="?")],
                            answer="x", as_of=dt.date(2026, 1, 1), hops=2, environment="out/index",
                            tools=[{"type": "function"}])),
    ]


@pytest.mark.parametrize(("model", "record"), _samples(), ids=lambda v: getattr(v, "__name__", ""))
def test_record_round_trips_through_arrow(model, record):
    table = to_table(model, [record])
    assert table.schema.equals(arrow_schema(model), check_metadata=False)
    assert from_table(model, table) == [record]
    assert record.schema_version == SCHEMA_VERSION


def test_arrow_types_follow_annotations():
    schema = arrow_schema(Relation)
    assert schema.field("tail").nullable and not schema.field("head").nullable
    assert schema.field("date").type == pa.date32()
    assert schema.field("provenance").type.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert schema.field("qualifiers").type == pa.list_(pa.struct([pa.field("key", pa.string(), False),
                                                                   pa.field("value", pa.string(), False)]))
    # free-form mappings travel as JSON strings
    turn_type = arrow_schema(Trajectory).field("turns").type.value_type
    assert turn_type.field("tool_call").type.field("arguments").type == pa.string()


def test_unknown_fields_are_rejected():
    with pytest.raises(ValueError):
        SkippedRecord(title="x", stage="read", reason="r", unexpected=1)


class _Colour(enum.Enum):
    RED = "red"


class _Inner(Record):
    note: str | None = None
    scores: list[int] = []


class _Mixed(Record):
    colour: _Colour
    labels: list[str | None] = []
    inner: _Inner | None = None
    inners: list[_Inner] = []
    extra: dict[str, Any] = {}


def test_rows_convert_each_kind_of_field():
    """The per-model converters (built once per model) give each kind of field its Arrow form: an enum its
    value, a mapping JSON, a nested model a dict, None stays None at every level; and the row reads back."""
    record = _Mixed(colour=_Colour.RED, labels=["a", None], inner=_Inner(scores=[1, 2]),
                    inners=[_Inner(note="n")], extra={"b": [1], "a": None})
    row = to_row(record)
    assert row == {"schema_version": SCHEMA_VERSION, "colour": "red", "labels": ["a", None],
                   "inner": {"schema_version": SCHEMA_VERSION, "note": None, "scores": [1, 2]},
                   "inners": [{"schema_version": SCHEMA_VERSION, "note": "n", "scores": []}],
                   "extra": '{"a": null, "b": [1]}'}
    assert from_row(_Mixed, row) == record
    assert from_table(_Mixed, to_table(_Mixed, [record, _Mixed(colour=_Colour.RED)])) == \
        [record, _Mixed(colour=_Colour.RED)]


def test_tables_built_by_column_equal_tables_built_from_rows():
    """`to_table` builds each column directly (a nested record present in every row as a struct of its own
    columns): the table is the one `from_pylist` makes of the records' `to_row`s, enums, JSON and Nones
    included, whether a nested record is present in every row or missing from some."""
    full = _Mixed(colour=_Colour.RED, labels=["a", None], inner=_Inner(scores=[1, 2]),
                  inners=[_Inner(note="n")], extra={"b": [1]})
    groups: dict[type, list] = {}
    for model, record in _samples():
        groups.setdefault(model, []).append(record)
    groups[_Mixed] = [full, _Mixed(colour=_Colour.RED)]
    cases = [*groups.items(), (_Mixed, [full, full.model_copy(update={"inner": _Inner(note="x")})]), (Relation, [])]
    for model, records in cases:
        expected = pa.Table.from_pylist([to_row(r) for r in records], schema=arrow_schema(model))
        assert to_table(model, records).equals(expected), model.__name__
