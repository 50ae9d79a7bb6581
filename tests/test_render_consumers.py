"""Each render, as a user loads it with `datasets`, passes its real consumer's own checks, on every row of
the shipped sample's dataset: `openai` rows through the openai package's message and tool types,
`nanbeige` rows through transformers' `apply_chat_template` with the Qwen3 tool-calling template (shipped
in data/chat_templates), `toolmind` rows through a structural check as strict as the public ToolMind-Web
loaders."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from xml.sax.saxutils import escape

import datasets

from pipeline.card import OPENAI_REQUEST_CODE
from pipeline.renders import parse_nanbeige_assistant
from pipeline.validate import toolmind_structure_problems


def load_rows(run: Path, config: str) -> list[dict]:
    loaded = datasets.load_dataset(str(run / "dataset"), config, cache_dir=str(run / "hf-cache"))
    rows = [row for split in loaded.values() for row in split]
    assert rows
    return rows


def card_code(run: Path) -> dict:
    """The `chat_request` the dataset card shows, executed from the card's own text."""
    card = (run / "dataset" / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", card, re.DOTALL).group(1)
    assert code == OPENAI_REQUEST_CODE
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the card's snippet is the subject
    return namespace


def test_openai_rows_validate_against_the_openai_types(small_dataset_run):
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
    from pydantic import TypeAdapter

    messages_type = TypeAdapter(list[ChatCompletionMessageParam])
    tool_type = TypeAdapter(ChatCompletionToolParam)
    chat_request = card_code(small_dataset_run)["chat_request"]
    rows = load_rows(small_dataset_run, "openai")
    assert any(m["tool_calls"] is None for row in rows for m in row["messages"])  # why the step is needed
    for row in rows:
        request = chat_request(row)
        messages_type.validate_python(request["messages"], strict=True)
        for tool in request["tools"]:
            tool_type.validate_python(tool, strict=True)
        for message in request["messages"]:
            assert None not in message.values() and "loss" not in message
        declared = {tool["function"]["name"] for tool in request["tools"]}
        called = {call["function"]["name"] for m in request["messages"] for call in m.get("tool_calls", [])}
        assert called <= declared, (row["trajectory_id"], called - declared)
        json.dumps(request)  # sendable as it is


def structured(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    """A nanbeige row as a caller of `apply_chat_template` holds it: plain system text plus `tools`,
    assistant `reasoning_content` and `tool_calls`, tool results as `tool` messages."""
    system, _, tool_section = messages[0]["content"].partition("\n\n# Tools\n\n")
    declared = re.search(r"<tools>\n(.*)\n</tools>", tool_section, re.DOTALL).group(1)
    tools = [json.loads(line) for line in declared.splitlines()]
    out = [{"role": "system", "content": system}, {"role": "user", "content": messages[1]["content"]}]
    for message in messages[2:]:
        if message["role"] == "user":
            inner = re.fullmatch(r"<tool_response>\n(.*)\n</tool_response>", message["content"], re.DOTALL)
            out.append({"role": "tool", "content": inner.group(1)})
            continue
        view = parse_nanbeige_assistant(message["content"])
        if view.kind == "call":
            out.append({"role": "assistant", "content": "", "reasoning_content": view.reasoning,
                        "tool_calls": [{"type": "function",
                                        "function": {"name": view.name, "arguments": view.arguments}}]})
        elif view.kind == "final":
            out.append({"role": "assistant", "content": f"\\boxed{{{view.answer}}}",
                        "reasoning_content": view.reasoning})
        else:
            out.append({"role": "assistant", "content": view.raw_output, "reasoning_content": ""})
    return out, tools


def test_nanbeige_rows_render_identically_through_apply_chat_template(small_dataset_run, template_tokenizer):
    from rl.chat import render_text

    rows = load_rows(small_dataset_run, "nanbeige")
    for row in rows:
        messages, tools = structured(row["messages"])
        rendered = template_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
        assert rendered == render_text(row["messages"]), row["trajectory_id"]


MCP_BLOCK = re.compile(r"<use_mcp_tool>.*?</use_mcp_tool>", re.DOTALL)
ARGUMENTS = re.compile(r"(<arguments>)(.*?)(</arguments>)", re.DOTALL)


def toolmind_problems(conversation: list[dict]) -> list[str]:
    """The structural checks of a strict ToolMind-Web loader over one conversation."""
    problems = []
    roles = [m["role"] for m in conversation]
    expected = ["system", "user"] + ["assistant" if i % 2 == 0 else "user" for i in range(len(roles) - 2)]
    if roles != expected or roles[-1] != "assistant":
        problems.append(f"roles {roles} do not alternate system, user, (assistant, user)*, assistant")
    for position, message in enumerate(conversation):
        if message["role"] != "assistant":
            if message["loss"] != 0:
                problems.append(f"loss on {message['role']} message {position}")
            continue
        blocks = MCP_BLOCK.findall(message["content"])
        final = position == len(conversation) - 1
        if len(blocks) > 1:
            problems.append(f"message {position}: {len(blocks)} tool calls")
        if final and blocks:
            problems.append("the final message calls a tool")
        if not blocks:
            if not final and message["loss"]:
                problems.append(f"trained message {position} has no tool call")
            continue
        if not message["content"].endswith(blocks[0]):
            problems.append(f"message {position}: the tool call is not at the end")
        try:
            call = ElementTree.fromstring(ARGUMENTS.sub(lambda m: m[1] + escape(m[2]) + m[3], blocks[0]))
        except ElementTree.ParseError as error:
            problems.append(f"message {position}: XML does not parse ({error})")
            continue
        if [child.tag for child in call] != ["server_name", "tool_name", "arguments"]:
            problems.append(f"message {position}: call elements {[child.tag for child in call]}")
            continue
        try:
            arguments = json.loads(call.find("arguments").text)
        except json.JSONDecodeError:
            problems.append(f"message {position}: arguments are not JSON")
            continue
        if not isinstance(arguments, dict):
            problems.append(f"message {position}: arguments are not a JSON object")
    return problems


def test_toolmind_rows_pass_a_strict_structural_check(small_dataset_run):
    rows = load_rows(small_dataset_run, "toolmind")
    for row in rows:
        assert toolmind_problems(row["conversations"]) == [], row["key"]
        assert toolmind_structure_problems(row["conversations"]) == [], row["key"]  # declared tools, schema-valid
    broken = [dict(m) for m in rows[0]["conversations"]]
    broken[1]["loss"] = 1
    broken[2]["content"] += "\n" + MCP_BLOCK.findall(broken[2]["content"])[0]
    found = " ".join(toolmind_problems(broken))
    assert "loss on user message 1" in found and "2 tool calls" in found
