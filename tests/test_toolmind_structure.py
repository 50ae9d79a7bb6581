"""The strict ToolMind-Web structural loader (`pipeline.validate.toolmind_structure_problems`): it passes
every toolmind render and quarantines what the issue found in the published rows (raw ReAct text, calls
to undeclared tools, arguments that break the tool's schema or are not JSON)."""

from __future__ import annotations

import pytest

from pipeline import renders
from pipeline.validate import json_schema_problems, toolmind_structure_problems
from tests.dataset_fixtures import make_judged, make_question


def _conversation(**variant):
    return [m.model_dump() for m in renders.render_toolmind(make_judged(make_question(1, hops=3), **variant)).conversations]


@pytest.mark.parametrize("variant", [dict(finished=True, unparsed=True), dict(finished=False, unparsed=True),
                                     dict(finished=True, unparsed=False)])
def test_every_toolmind_render_and_turns_prefix_passes(variant):
    assert toolmind_structure_problems(_conversation(**variant)) == []
    for row in renders.render_turns(make_judged(make_question(1, hops=3), **variant)):
        assert toolmind_structure_problems([m.model_dump() for m in row.conversations]) == []


def _with_call(arguments: str, tool: str = "search") -> list[dict]:
    conversation = _conversation(finished=True, unparsed=False)
    conversation[2]["content"] = ("<think>\nx\n</think>\n\n<use_mcp_tool>\n<server_name>wiki</server_name>\n"
                                  f"<tool_name>{tool}</tool_name>\n<arguments>\n{arguments}\n</arguments>\n</use_mcp_tool>")
    return conversation


@pytest.mark.parametrize("conversation, problem", [
    (_with_call('{"q": "x"}'), "missing required 'query'"),
    (_with_call('{"query": "x", "top_k": 5'), "arguments are not JSON"),
    (_with_call('{"title": "x", "page": 0}', "open_page"), "outside the schema's bounds"),
    (_with_call('{"query": ""}'), "length 0"),
    (_with_call('{"text": "x"}', "submit"), "tool 'submit' is not declared"),
])
def test_malformed_calls_are_quarantined(conversation, problem):
    assert any(problem in found for found in toolmind_structure_problems(conversation))


def test_raw_react_text_and_calls_to_an_undeclared_answer_are_quarantined():
    conversation = _conversation(finished=True, unparsed=False)
    conversation[2]["content"] = "Thought: hmm\nAction: search[film]"
    assert any("no <think>" in p for p in toolmind_structure_problems(conversation))
    called = _with_call('{"text": "x"}', "answer")
    called[0]["content"] = called[0]["content"].split("\n### Tool name: answer")[0]
    assert any("'answer' is not declared" in p for p in toolmind_structure_problems(called))


def test_json_schema_checker_refuses_keywords_it_does_not_check():
    assert json_schema_problems({"a": 1}, {"type": "object", "patternProperties": {}}) != []
    assert json_schema_problems(True, {"type": "integer"}) != []
