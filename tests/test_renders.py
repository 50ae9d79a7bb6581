"""Renders of the canonical judged trajectory: formats, loss masks, and lossless round trips."""

from __future__ import annotations

import json

import pytest

from pipeline import renders
from schemas.base import from_row, to_row
from schemas.dataset import OpenAIRow
from tests.dataset_fixtures import make_judged, make_question

VARIANTS = {
    "finished": dict(finished=True, unparsed=True),
    "max_turns": dict(finished=False, unparsed=True),
    "clean": dict(finished=True, unparsed=False),
}


@pytest.fixture(params=sorted(VARIANTS))
def judged(request):
    return make_judged(make_question(1, hops=3), **VARIANTS[request.param])


def _dicts(messages):
    return [m.model_dump() for m in messages]


def test_views_cover_every_turn_kind():
    trajectory = make_judged(make_question(1)).trajectory
    views = renders.turn_views(trajectory, keep_malformed=True)
    assert [v.kind for v in views] == ["call", "call", "call", "unparsed", "call", "final"]
    # the SFT renders leave the unparsed turn out, with the error it got back
    assert renders.turn_views(trajectory) == views[:3] + views[4:]
    assert views[-1].answer == "Person 1.2"
    assert views[3].raw_output == "Thought: hmm\nAction: search["
    assert views[3].observation == "Error: could not parse a tool call from your output."
    assert views[0].arguments == {"query": 'film "numbered" ü', "top_k": 5}


def test_toolmind_row_shape_and_alternation(judged):
    row = renders.render_toolmind(judged)
    assert row.key == judged.trajectory.trajectory_id and row.id == judged.trajectory.question_id
    roles = [m.role for m in row.conversations]
    assert roles[0] == "system" and set(roles) <= {"system", "user", "assistant"}
    assert all(a != b for a, b in zip(roles[1:], roles[2:], strict=False)), "user/assistant must alternate"
    assert "Today is: 2025-06-01" in row.conversations[0].content
    assert "### Tool name: search" in row.conversations[0].content
    assert "### Tool name: answer" in row.conversations[0].content  # declared wherever the tools are
    first = row.conversations[2].content
    assert first.startswith(
        "<think>\nStart by finding the film.\nIt is numbered.\n</think>\n\n<use_mcp_tool>"
    )
    assert "<server_name>wiki</server_name>\n<tool_name>search</tool_name>" in first
    assert (
        json.loads(first.split("<arguments>\n")[1].split("\n</arguments>")[0])["query"] == 'film "numbered" ü'
    )
    assert row.conversations[3].content.startswith("1. Film 0")
    if judged.trajectory.stop_reason == "answered":
        assert row.conversations[-1].role == "assistant"
        assert row.conversations[-1].content.endswith("\\boxed{Person 1.3}")


def test_loss_is_the_critic_mask_on_assistant_turns_only(judged):
    row = renders.render_toolmind(judged)
    assistant_loss = [m.loss for m in row.conversations if m.role == "assistant"]
    assert assistant_loss == renders.turn_loss(judged)
    assert assistant_loss[:3] == [1, 1, 0]
    assert all(m.loss == 0 for m in row.conversations if m.role != "assistant")


@pytest.mark.parametrize(
    "render, parse",
    [
        (renders.toolmind_conversation, renders.parse_toolmind),
        (renders.nanbeige_messages, renders.parse_nanbeige),
        (renders.openai_messages, renders.parse_openai),
    ],
    ids=["toolmind", "nanbeige", "openai"],
)
def test_round_trip_is_lossless(judged, render, parse):
    messages = _dicts(render(judged))
    # through JSON, as a consumer of the shards sees it
    parsed = parse(json.loads(json.dumps(messages)))
    assert parsed.turns == renders.turn_views(judged.trajectory)
    assert parsed.loss == renders.turn_loss(judged)
    assert parsed.question == judged.trajectory.question
    assert all(view.kind != "unparsed" for view in parsed.turns)


def test_rl_tokenisation_keeps_the_malformed_turns_in_the_tool_result_slot(judged):
    messages = _dicts(renders.nanbeige_messages(judged, keep_malformed=True))
    parsed = renders.parse_nanbeige(json.loads(json.dumps(messages)))
    assert parsed.turns == renders.turn_views(judged.trajectory, keep_malformed=True)
    assert len(parsed.turns) == len(judged.trajectory.turns)
    assert all(m["role"] in ("assistant", "user") for m in messages[2:])


def test_openai_render_keeps_call_ids_and_arrow_round_trip():
    judged = make_judged(make_question(2))
    row = renders.render_openai(judged)
    ids = [c.id for m in row.messages if m.tool_calls for c in m.tool_calls]
    assert ids == ["c0", "c1", "c2", "c4"]
    tool_ids = [m.tool_call_id for m in row.messages if m.role == "tool"]
    assert tool_ids == ids
    assert [t["function"]["name"] for t in row.tools] == ["search", "open_page", "find_in_page", "answer"]
    assert [m.role for m in row.messages[2:]].count("user") == 0  # calls are answered by `tool` messages
    # JSON-string arguments, as the OpenAI API sends them
    assert all(
        isinstance(c.function.arguments, str) for m in row.messages if m.tool_calls for c in m.tool_calls
    )
    assert from_row(OpenAIRow, to_row(row)) == row


def test_nanbeige_template():
    judged = make_judged(make_question(3))
    messages = renders.nanbeige_messages(judged)
    system = messages[0].content
    tools_block = system.split("<tools>\n")[1].split("\n</tools>")[0]
    assert [json.loads(line)["function"]["name"] for line in tools_block.splitlines()] == [
        "search",
        "open_page",
        "find_in_page",
        "answer",
    ]
    call = messages[2].content.split("</think>\n\n")[1]
    assert call.startswith("<tool_call>\n") and call.endswith("\n</tool_call>")
    assert json.loads(call[len("<tool_call>\n") : -len("\n</tool_call>")]) == {
        "name": "search",
        "arguments": {"query": 'film "numbered" ü', "top_k": 5},
    }
    assert messages[3].role == "user"
    assert (
        messages[3].content
        == "<tool_response>\n1. Film 0 — a film\n2. <b>Other</b> {not json}\n</tool_response>"
    )
    row = renders.render_nanbeige(judged)
    assert row.turn_rewards == [1.0, 1.0, -1.0, 1.0, 1.0]  # turn 3 (unparsed) left out
    assert len(row.turn_rewards) == sum(m.role == "assistant" for m in row.messages)


@pytest.mark.parametrize(
    "content, kind",
    [
        (
            '<think>\nx\n</think>\n\n<tool_call>\n{"name": "search", "arguments": {"query": "a"}}\n</tool_call>',
            "call",
        ),
        ("<think>\nx\n</think>\n\n\\boxed{Paris}", "final"),
        (
            '<think>\nx\n</think>\n\n<tool_call>\n{"name": "search", "arguments": "a"}\n</tool_call>',
            "unparsed",
        ),
        (
            '<think>\nx\n</think>\n\n<tool_call>\n{"name": "search", "arguments": {}, "x": 1}\n</tool_call>',
            "unparsed",
        ),
        ("<think>\nx\n</think>\n\n<tool_call>\n{bad json\n</tool_call>", "unparsed"),
        ('<tool_call>\n{"name": "search", "arguments": {}}\n</tool_call>', "unparsed"),
        ("plain text", "unparsed"),
    ],
)
def test_parse_nanbeige_assistant(content, kind):
    assert renders.parse_nanbeige_assistant(content).kind == kind


def test_parsers_reject_broken_conversations():
    messages = _dicts(renders.nanbeige_messages(make_judged(make_question(4))))
    with pytest.raises(ValueError):
        renders.parse_nanbeige(messages[:3])  # a call without its result
    broken = [dict(m) for m in messages]
    broken[3]["content"] = "not wrapped"
    with pytest.raises(ValueError):
        renders.parse_nanbeige(broken)


def test_turns_rows_one_per_kept_turn():
    judged = make_judged(make_question(5))
    rows = renders.render_turns(judged)
    kept = [
        t.index
        for t, loss in zip(renders.rendered_turns(judged.trajectory), renders.turn_loss(judged), strict=True)
        if loss
    ]
    assert [r.turn_index for r in rows] == kept == [0, 1, 4, 5]
    full = renders.toolmind_conversation(judged)
    for row in rows:
        assert [m.loss for m in row.conversations] == [0] * (len(row.conversations) - 1) + [1]
        assert row.conversations[-1].role == "assistant"
        assert [m.content for m in row.conversations] == [m.content for m in full[: len(row.conversations)]]
    assert len({r.key for r in rows}) == len(rows)


def test_rl_prompt():
    question = make_question(6, hops=4)
    prompt = renders.render_rl(question, environment="hopsmith-search@abc")
    assert [m.role for m in prompt.prompt] == ["system", "user"]
    assert prompt.prompt[0].content == renders.nanbeige_system_prompt("2025-06-01")
    assert prompt.prompt[1].content == question.text
    assert (prompt.answer, prompt.aliases, prompt.hops) == (question.answer, question.aliases, 4)
    assert prompt.environment == "hopsmith-search@abc"


def test_unparsed_turn_without_observation_gets_the_parse_error_as_feedback():
    judged = make_judged(make_question(7))
    judged.trajectory.turns[3].observation = None
    view = renders.turn_views(judged.trajectory, keep_malformed=True)[3]
    assert view.observation.startswith("Error: your output could not be parsed (no Action Input)")
    messages = renders.nanbeige_messages(judged, keep_malformed=True)
    assert messages[9].content == f"<tool_response>\n{view.observation}\n</tool_response>"
    assert renders.parse_nanbeige([m.model_dump() for m in messages]).turns == \
        renders.turn_views(judged.trajectory, keep_malformed=True)


def test_rows_name_the_engines_and_the_models_the_servers_reported():
    """Each trajectory row says which policy and judge made it, with the model each server reported (not
    the configured name); a turn row names the judge of its own turn; an RL prompt names its writer."""
    judged = make_judged(make_question(8))
    offline = renders.produced_by(judged)
    assert (offline.policy_engine, offline.policy_model) == (judged.trajectory.engine, None)
    assert (offline.judge_engine, offline.judge_model) == (judged.judgements[0].engine, None)

    judged.trajectory.engine, judged.trajectory.model = "openai:local-alias", "gemma-3-270m-served"
    for judgement in judged.judgements[1:]:  # turn 0 fell back to the offline critic
        judgement.engine, judgement.model = "offline+openai:judge-alias", "qwen-served"
    produced = {"policy_engine": "openai:local-alias", "policy_model": "gemma-3-270m-served",
                "judge_engine": "offline+openai:judge-alias", "judge_model": "qwen-served"}
    for row in (renders.render_nanbeige(judged), renders.render_openai(judged)):
        assert row.produced_by.model_dump() == produced
        assert from_row(type(row), to_row(row)).produced_by == row.produced_by
    by_turn = {row.turn_index: row.produced_by for row in renders.render_turns(judged)}
    assert by_turn[0].judge_engine == judged.judgements[0].engine and by_turn[0].judge_model is None
    assert by_turn[1].model_dump() == produced

    question = make_question(9).model_copy(update={"engine": "openai:writer-alias", "model": "writer-served"})
    prompt = renders.render_rl(question, environment="env")
    assert (prompt.writer_engine, prompt.writer_model) == ("openai:writer-alias", "writer-served")
