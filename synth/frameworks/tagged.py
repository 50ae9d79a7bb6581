"""Tag protocol of Nanbeige/Hermes (Qwen3-style): `<think>`, `<tool_call>{json}</tool_call>`, `<tool_response>`.

Tools are listed inside `<tools></tools>` in the system turn; a call is a JSON object with `name` and
`arguments` inside `<tool_call>` tags; results come back in a user turn wrapped in `<tool_response>`. A
reply without a tool call is the final answer (`\\boxed{...}` preferred), mapped to the `answer` tool.
"""

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
    final_answer_text,
    loads_object,
    tools_json_lines,
)

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)

SYSTEM = """You are a deep-search assistant. Answer the user's question by searching a local copy of Wikipedia.
Today is: {as_of}. Answer as of that date.

# Tools

You may call one function per turn to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>

Think inside <think></think> before each call. Results arrive inside <tool_response></tool_response>.
When you are certain, either call `answer` or reply without a tool call and put the final answer in \\boxed{{}}."""


class TaggedFramework(Framework):
    name = "tagged"
    format_reminder = 'Think in <think></think>, then one <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'

    def system_prompt(self, as_of: dt.date) -> str:
        return SYSTEM.format(as_of=as_of.isoformat(), tools=tools_json_lines())

    def parse(self, output: ModelOutput, call_id: str) -> ParsedTurn:
        text = output.content or ""
        think = _THINK.search(text)
        if think:
            reasoning, rest = think.group(1).strip(), text[think.end():]
        elif "</think>" in text:  # the template opened <think> for the model
            reasoning, rest = text.split("</think>", 1)
            reasoning = reasoning.strip()
        else:
            reasoning, rest = "", text
        call = _TOOL_CALL.search(rest)
        if call is None:
            answer = final_answer_text(rest)
            if answer is None:
                return ParsedTurn(reasoning, parse_error="no <tool_call> and no final answer")
            return ParsedTurn(reasoning, answer_call(call_id, answer))
        if not reasoning:
            reasoning = rest[: call.start()].strip()
        payload = loads_object(call.group(1))
        if payload is None:
            return ParsedTurn(reasoning, parse_error="<tool_call> does not hold a JSON object")
        name = payload.get("name")
        arguments = payload.get("arguments", payload.get("parameters", {}))
        if isinstance(arguments, str):
            arguments = loads_object(arguments)
        if not isinstance(name, str) or not name.strip():
            return ParsedTurn(reasoning, parse_error="<tool_call> JSON has no \"name\"")
        if not isinstance(arguments, dict):
            return ParsedTurn(reasoning, parse_error="<tool_call> \"arguments\" is not a JSON object")
        return ParsedTurn(reasoning, ToolCall(call_id=call_id, name=name.strip(), arguments=arguments))

    def render(self, reasoning: str, name: str, arguments_json: str, call_id: str) -> ModelOutput:
        think = f"<think>\n{reasoning}\n</think>\n\n"
        arguments = _try_json(arguments_json)
        if name == ANSWER_TOOL and isinstance(arguments, dict) and isinstance(arguments.get("text"), str):
            return ModelOutput(think + f"The final answer is \\boxed{{{arguments['text']}}}.")
        body = f'{{"name": {json.dumps(name)}, "arguments": {arguments_json}}}'
        return ModelOutput(think + f"<tool_call>\n{body}\n</tool_call>")

    def assistant_message(self, turn: Turn) -> dict[str, Any]:
        return {"role": "assistant", "content": turn.raw_output}

    def result_messages(self, turn: Turn, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"}]


def _try_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
