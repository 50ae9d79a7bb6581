"""Each framework's parser on good and malformed outputs (fixtures), rendering, and the context window."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from schemas.trajectory import ToolCall, Turn
from synth.frameworks import FRAMEWORKS, ContextWindow, ModelOutput, get_framework
from synth.frameworks.base import echoes, progress_note

FIXTURES = Path(__file__).parent / "data" / "frameworks"
AS_OF = dt.date(2026, 6, 1)
CALLS = [
    ("search", {"query": "Barack Obama", "top_k": 5}),
    ("open_page", {"title": "Michelle Obama", "page": 2}),
    ("find_in_page", {"title": "Chicago", "text": "1837"}),
    ("answer", {"text": "Springfield, Illinois"}),
]


def _cases():
    for name in FRAMEWORKS:
        for case in json.loads((FIXTURES / f"{name}.json").read_text()):
            yield pytest.param(name, case, id=f"{name}: {case['case']}")


@pytest.mark.parametrize(("framework_name", "case"), list(_cases()))
def test_parser_fixtures(framework_name, case):
    framework = get_framework(framework_name)
    parsed = framework.parse(ModelOutput(case["content"], case.get("tool_calls", [])), "call_7")
    expect = case["expect"]
    if "parse_error" in expect:
        assert parsed.tool_call is None
        assert expect["parse_error"] in parsed.parse_error
        return
    assert parsed.parse_error is None
    assert parsed.tool_call == ToolCall(call_id=expect.get("call_id", "call_7"), name=expect["name"], arguments=expect["arguments"])
    assert parsed.reasoning == expect["reasoning"]


def test_every_framework_has_good_and_malformed_fixtures():
    for name in FRAMEWORKS:
        cases = json.loads((FIXTURES / f"{name}.json").read_text())
        assert sum("parse_error" in c["expect"] for c in cases) >= 3
        assert sum("parse_error" not in c["expect"] for c in cases) >= 4


@pytest.mark.parametrize("framework_name", sorted(FRAMEWORKS))
@pytest.mark.parametrize(("tool", "arguments"), CALLS)
def test_render_then_parse_is_the_identity(framework_name, tool, arguments):
    framework = get_framework(framework_name)
    output = framework.render("The page says so.", tool, json.dumps(arguments), "call_3")
    parsed = framework.parse(output, "call_3")
    assert parsed.tool_call == ToolCall(call_id="call_3", name=tool, arguments=arguments)
    assert parsed.reasoning == "The page says so."
    turn = Turn(index=3, raw_output=framework.raw_output(output))
    assert framework.output_of(turn) == output  # raw_output is lossless


@pytest.mark.parametrize("framework_name", sorted(FRAMEWORKS))
def test_broken_json_renders_to_a_parse_error(framework_name):
    framework = get_framework(framework_name)
    output = framework.render("x", "search", json.dumps({"query": "Chicago"})[:-1], "call_0")
    parsed = framework.parse(output, "call_0")
    assert parsed.tool_call is None and parsed.parse_error


def _turns(count: int, framework_name: str, observation_chars: int = 1500) -> list[Turn]:
    framework = get_framework(framework_name)
    turns = []
    for i in range(count):
        arguments = {"query": f"query number {i}", "top_k": 5}
        output = framework.render(f"Reasoning for turn {i}.", "search", json.dumps(arguments), f"call_{i}")
        turns.append(Turn(index=i, raw_output=framework.raw_output(output), reasoning=f"Reasoning for turn {i}.",
                          tool_call=ToolCall(call_id=f"call_{i}", name="search", arguments=arguments),
                          observation=f"observation {i} " + "x" * observation_chars))
    return turns


@pytest.mark.parametrize("framework_name", sorted(FRAMEWORKS))
def test_messages_follow_the_protocol(framework_name):
    framework = get_framework(framework_name)
    turns = _turns(3, framework_name, observation_chars=10)
    turns.append(Turn(index=3, raw_output=framework.raw_output(ModelOutput("gibberish")), parse_error="no call"))
    messages = framework.build_messages("Who?", AS_OF, turns, ContextWindow(5, 20))
    assert messages[0]["role"] == "system" and "Today is: 2026-06-01" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "Question: Who?"}
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert len(assistants) == 4
    last = messages[-1]["content"]
    assert "could not be parsed (no call)" in last
    if framework_name == "function_calling":
        assert messages[2]["tool_calls"][0]["id"] == "call_0"
        assert messages[3] == {"role": "tool", "tool_call_id": "call_0", "content": turns[0].observation}
        assert "tools" not in messages[0] and framework.request_tools()[0]["function"]["name"] == "search"
    elif framework_name == "react":
        assert messages[3] == {"role": "user", "content": f"Observation: {turns[0].observation}"}
    else:
        assert messages[3] == {"role": "user", "content": f"<tool_response>\n{turns[0].observation}\n</tool_response>"}
        assert '"name": "search"' in messages[0]["content"] and "<tools>" in messages[0]["content"]


@pytest.mark.parametrize("framework_name", sorted(FRAMEWORKS))
def test_context_window_elides_and_folds(framework_name):
    framework = get_framework(framework_name)
    turns = _turns(30, framework_name)
    messages = framework.build_messages("Who?", AS_OF, turns, ContextWindow(keep_last_observations=3, keep_last_turns=10))
    text = json.dumps(messages)
    assert sum(m["role"] == "assistant" for m in messages) == 10
    full = [i for i in range(30) if f"observation {i} xxx" in text]
    assert full == [27, 28, 29]
    assert text.count("[observation elided to save context") == 7
    assert "your first 20 turns were folded" in messages[1]["content"]
    assert "query number 19" in messages[1]["content"] and "query number 0\\\"" not in messages[1]["content"]


def test_prompt_size_is_bounded_for_600_turns():
    window = ContextWindow(keep_last_observations=5, keep_last_turns=20)
    for name in FRAMEWORKS:
        framework = get_framework(name)
        turns = _turns(600, name)
        sizes = [len(json.dumps(framework.build_messages("Who?", AS_OF, turns[:n], window))) for n in (25, 100, 600)]
        assert max(sizes) < 20_000 and max(sizes) < 1.05 * min(sizes)  # only digits in ids and counts grow
    note = progress_note(_turns(600, "react"))
    assert len(note) < 1200


@pytest.mark.parametrize("name", ["function_calling", "tagged"])
@pytest.mark.parametrize("reply", [
    "I need to look up who directed the film before I can answer this question.",  # a short ramble
    "What is the birthplace of the director?",  # a question back
    "Let me think.\nParis",  # more than one line
])
def test_a_plain_reply_that_is_no_answer_is_a_parse_error(name, reply):
    parsed = get_framework(name).parse(ModelOutput(reply), "call_0")
    assert parsed.tool_call is None and parsed.parse_error


@pytest.mark.parametrize("name", ["function_calling", "tagged"])
def test_a_short_plain_reply_or_a_boxed_one_is_the_answer(name):
    framework = get_framework(name)
    assert framework.parse(ModelOutput("Steven Spielberg"), "c").tool_call.arguments == {"text": "Steven Spielberg"}
    boxed = framework.parse(ModelOutput("After checking the page, the answer is \\boxed{1946}."), "c")
    assert boxed.tool_call.arguments == {"text": "1946"}


@pytest.mark.parametrize(("name", "echo"), [
    ("tagged", ", then"),  # a base model continuing our own format reminder, once taken as the answer
    ("react", "Action Input:"),
    *((name, "Question: Where was the director of Jaws born?") for name in FRAMEWORKS),
])
def test_an_answer_that_echoes_our_prompt_is_recognised(name, echo):
    prompt = get_framework(name).prompt_text("Where was the director of Jaws born?")
    assert echoes(echo, prompt) and not echoes("Cincinnati", prompt)
