"""Native OpenAI function calling: tools declared in the request, calls in `tool_calls`, results as `tool` messages.

The raw output stored for a turn is the JSON of `{content, tool_calls}` as received (arguments kept as the
string the model produced), so the assistant message can be rebuilt exactly. A reply without tool calls is
the final answer. Only the first call of a turn is executed; the others are answered with an error so the
conversation stays valid for the API.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from schemas.trajectory import ToolCall, Turn
from synth.frameworks.base import (
    Framework,
    ModelOutput,
    ParsedTurn,
    answer_call,
    final_answer_text,
    loads_object,
)
from synth.tools import tool_specs

SYSTEM = """You are a research agent that answers questions by searching a local copy of Wikipedia with the
tools you are given. Today is: {as_of}. Answer as of that date.
Call one tool at a time. Verify each fact in the pages before relying on it. Explain your reasoning briefly
before each call. When you are sure, call `answer` with the shortest answer."""

_TOOLS = tool_specs()
IGNORED_CALL = "Error: only one tool call per turn is executed; this call was ignored."


class FunctionCallingFramework(Framework):
    name = "function_calling"
    format_reminder = "Call exactly one of the declared tools with arguments as a JSON object."
    text_protocol = False

    def system_prompt(self, as_of: dt.date) -> str:
        return SYSTEM.format(as_of=as_of.isoformat())

    def request_tools(self) -> list[dict[str, Any]]:
        return _TOOLS

    def raw_output(self, output: ModelOutput) -> str:
        return json.dumps({"content": output.content, "tool_calls": output.tool_calls}, ensure_ascii=False)

    def output_of(self, turn: Turn) -> ModelOutput:
        raw = json.loads(turn.raw_output)
        return ModelOutput(content=raw.get("content") or "", tool_calls=raw.get("tool_calls") or [])

    def parse(self, output: ModelOutput, call_id: str) -> ParsedTurn:
        reasoning = (output.content or "").strip()
        if not output.tool_calls:
            answer = final_answer_text(reasoning)
            if answer is None:
                return ParsedTurn(reasoning, parse_error="no tool call and no final answer")
            return ParsedTurn(reasoning, answer_call(call_id, answer))
        call = output.tool_calls[0]
        name = str(call.get("name") or "").strip()
        if not name:
            return ParsedTurn(reasoning, parse_error="tool call without a function name")
        raw_arguments = call.get("arguments")
        arguments = raw_arguments if isinstance(raw_arguments, dict) else loads_object(str(raw_arguments or "{}"))
        if arguments is None:
            return ParsedTurn(reasoning, parse_error=f"arguments of {name} are not a valid JSON object")
        return ParsedTurn(reasoning, ToolCall(call_id=str(call.get("id") or call_id), name=name, arguments=arguments))

    def render(self, reasoning: str, name: str, arguments_json: str, call_id: str) -> ModelOutput:
        return ModelOutput(reasoning, [{"id": call_id, "name": name, "arguments": arguments_json}])

    def assistant_message(self, turn: Turn) -> dict[str, Any]:
        output = self.output_of(turn)
        message: dict[str, Any] = {"role": "assistant", "content": output.content or None}
        if output.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id") or f"call_{turn.index}_{i}",
                    "type": "function",
                    "function": {"name": call.get("name") or "", "arguments": _arguments_text(call.get("arguments"))},
                }
                for i, call in enumerate(output.tool_calls)
            ]
        return message

    def result_messages(self, turn: Turn, text: str) -> list[dict[str, Any]]:
        calls = self.assistant_message(turn).get("tool_calls", [])
        if not calls:
            return [{"role": "user", "content": text}]
        return [{"role": "tool", "tool_call_id": calls[0]["id"], "content": text}] + [
            {"role": "tool", "tool_call_id": call["id"], "content": IGNORED_CALL} for call in calls[1:]
        ]


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
