"""ReAct text protocol: `Thought:` / `Action:` / `Action Input:`, results come back as `Observation:`."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from schemas.trajectory import ToolCall, Turn
from synth.frameworks.base import (
    ANSWER_TOOL,
    Framework,
    ModelOutput,
    ParsedTurn,
    answer_call,
    loads_object,
    primary_argument,
    tools_json_lines,
)


def _label(name: str) -> str:
    """A `Name:` line label, tolerating markdown bold around the name or the colon and full-width colons."""
    return rf"^\s*\**\s*{name}\s*\**\s*[:：]\s*\**[ \t]*"


_ACTION = re.compile(_label("action") + r"(.*)$", re.IGNORECASE | re.MULTILINE)
_ACTION_INPUT = re.compile(_label("action[ _]input"), re.IGNORECASE | re.MULTILINE)
_OBSERVATION = re.compile(_label("observation"), re.IGNORECASE | re.MULTILINE)
_THOUGHT = re.compile(_label("thought"), re.IGNORECASE)
_FINAL = re.compile(_label("final answer") + r"(.+)", re.IGNORECASE | re.MULTILINE | re.DOTALL)
_BRACKET_CALL = re.compile(r"^([A-Za-z_]+)\s*\[(.*)\]\s*$", re.DOTALL)

SYSTEM = """You are a research agent that answers questions by searching a local copy of Wikipedia.
Today is: {as_of}. Facts may have changed since; answer as of that date.

You have these tools (JSON-schema function declarations):
{tools}

Work step by step. Every reply has exactly this form:
Thought: <your reasoning about what you know and what to do next>
Action: <one tool name: search, open_page, find_in_page or answer>
Action Input: <the tool arguments as one JSON object>

After each action you receive `Observation: <tool result>`. Never write the Observation yourself.
Verify facts in the pages before relying on them. When you are sure, call `answer` with the shortest
answer, e.g. Action: answer / Action Input: {{"text": "Paris"}}."""


class ReActFramework(Framework):
    name = "react"
    format_reminder = "Reply with `Thought:`, `Action:` and `Action Input:` (a JSON object)."

    def system_prompt(self, as_of: dt.date) -> str:
        return SYSTEM.format(as_of=as_of.isoformat(), tools=tools_json_lines())

    def parse(self, output: ModelOutput, call_id: str) -> ParsedTurn:
        text = output.content or ""
        observation = _OBSERVATION.search(text)
        if observation:  # the model went on to imagine the tool result: ignore it
            text = text[: observation.start()]
        action = _ACTION.search(text)
        if action is None:
            final = _FINAL.search(text)
            reasoning = _THOUGHT.sub("", text[: final.start()] if final else text).strip()
            if final and final.group(1).strip():
                return ParsedTurn(reasoning, answer_call(call_id, final.group(1).strip()))
            return ParsedTurn(reasoning, parse_error="no `Action:` line and no `Final Answer:`")
        reasoning = _THOUGHT.sub("", text[: action.start()]).strip()
        name_text = action.group(1).strip().strip("`*'\" ")
        after = text[action.end():]
        action_input = _ACTION_INPUT.search(after)
        bracket = _BRACKET_CALL.match(name_text)
        if bracket:
            name, raw_input = bracket.group(1), bracket.group(2)
        elif action_input:
            name, raw_input = name_text, after[action_input.end():]
        else:
            return ParsedTurn(reasoning, parse_error="`Action:` without `Action Input:`")
        name = name.strip().strip("`*'\"").lower()
        if not name:
            return ParsedTurn(reasoning, parse_error="empty `Action:`")
        arguments = _arguments(name, raw_input)
        if isinstance(arguments, str):
            return ParsedTurn(reasoning, parse_error=arguments)
        return ParsedTurn(reasoning, ToolCall(call_id=call_id, name=name, arguments=arguments))

    def render(self, reasoning: str, name: str, arguments_json: str, call_id: str) -> ModelOutput:
        return ModelOutput(f"Thought: {reasoning}\nAction: {name}\nAction Input: {arguments_json}")

    def assistant_message(self, turn: Turn) -> dict[str, Any]:
        return {"role": "assistant", "content": turn.raw_output}

    def result_messages(self, turn: Turn, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"Observation: {text}"}]


def _arguments(name: str, raw_input: str) -> dict[str, Any] | str:
    """Action Input as arguments: a JSON object, or a bare string for a one-argument tool; else an error."""
    raw_input = raw_input.strip()
    if raw_input.startswith("["):
        return "`Action Input:` must be a JSON object"
    if raw_input.startswith(("{", "```")):
        parsed = loads_object(raw_input)
        return parsed if parsed is not None else "`Action Input:` is not a valid JSON object"
    field = primary_argument(name) if name != ANSWER_TOOL else "text"
    if field is None or not raw_input:
        return "`Action Input:` must be a JSON object"
    value = raw_input.splitlines()[0].strip() if name != ANSWER_TOOL else raw_input
    try:
        value = json.loads(value) if value.startswith('"') else value
    except json.JSONDecodeError:
        pass
    return {field: str(value).strip()}
