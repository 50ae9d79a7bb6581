"""The SFT configs as trainers take them: one row per trained turn, its conversation prefix as the prompt.

The published rows keep a `loss` flag per message; trainers do not read it (TRL's `assistant_only_loss`
trains every assistant turn, LLaMA-Factory every assistant turn too). `sft_rows` turns each `loss=1`
assistant message of a row into a prompt-completion example: `prompt` is every message before it, exactly as
the model saw them, `completion` is that one message, so a trainer's completion-only loss trains exactly the
turns the critic kept and nothing else. Messages are chat messages a chat template renders:

- `openai`: the row's messages (`reasoning_content`, `tool_calls` with JSON-string arguments, `tool`
  results), `tools` parsed from their stored JSON text into JSON schemas;
- `nanbeige`: the same structure recovered from the Qwen3/Nanbeige protocol text (system text and the
  `<tools>` block's schemas, `<think>` as `reasoning_content`, `<tool_call>` as `tool_calls`,
  `<tool_response>` as `tool` messages), so any Qwen3-style template renders it as the row's text;
- `toolmind`: `{role, content}` as written (the MCP protocol lives in the text; its tools in the system turn).

`sft_dataset(folder, config)` gives a `datasets.Dataset` of `{prompt, completion, tools}` whose message and
tool columns are `datasets.Json`, so rows keep their own keys (arrow would otherwise merge the tools' schemas
into one struct, null-filled). One line per trainer: see README "Training on the dataset".

ms-swift reads the `loss` flag itself: a `loss=0` assistant message gets no labels, so `swift sft` takes the
nanbeige and toolmind shards as they are, with two faults `write_swift_jsonl` removes. Its template labels a
conversation's closing `<|im_end|>` whatever the last turn's flag, so a row whose final answer is `loss=0`
would train that turn's end; the converter ends each conversation at its last `loss=1` turn (nothing trained
sees what follows). And it drops `reasoning_content` (its thinking templates take the thought inside
`content` as `<think>...</think>`), so the converter moves the openai config's thoughts there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pipeline.renders import parse_nanbeige_assistant

SFT_CONFIGS = ("openai", "nanbeige", "toolmind")
_MESSAGES = {"openai": "messages", "nanbeige": "messages", "toolmind": "conversations"}
_TOOLS_BLOCK = re.compile(r"\n\n# Tools\n\n.*<tools>\n(?P<tools>.*)\n</tools>.*\Z", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"\A<tool_response>\n(?P<observation>.*)\n</tool_response>\Z", re.DOTALL)


def tool_schemas(tools: list) -> list[dict[str, Any]]:
    """`tools` as JSON schemas: the shards store each declaration as JSON text."""
    return [json.loads(tool) if isinstance(tool, str) else tool for tool in tools]


def _set_keys(message: dict) -> dict:
    """A stored message without the keys its role leaves unset (arrow stores them as null)."""
    return {key: value for key, value in message.items() if value is not None}


def openai_chat(row: dict) -> tuple[list[dict], list[dict]]:
    """An `openai` row's messages without `loss` and unset keys, and its tools as JSON schemas."""
    messages = [{k: v for k, v in _set_keys(m).items() if k != "loss"} for m in row["messages"]]
    return messages, tool_schemas(row["tools"])


def nanbeige_chat(row: dict) -> tuple[list[dict], list[dict]]:
    """A `nanbeige` row as structured chat messages plus its tools (what `apply_chat_template` takes)."""
    messages = row["messages"]
    system = messages[0]["content"]
    block = _TOOLS_BLOCK.search(system)
    if block is None:
        raise ValueError("a nanbeige system turn declares its tools in a <tools> block")
    tools = [json.loads(line) for line in block.group("tools").splitlines()]
    chat = [{"role": "system", "content": system[: block.start()]}, {"role": "user", "content": messages[1]["content"]}]
    for message in messages[2:]:
        if message["role"] == "user":
            result = _TOOL_RESPONSE.fullmatch(message["content"])
            if result is None:
                raise ValueError("a nanbeige tool result is wrapped in <tool_response>")
            chat.append({"role": "tool", "content": result.group("observation")})
            continue
        view = parse_nanbeige_assistant(message["content"])
        if view.kind == "call":
            arguments = json.dumps(view.arguments, ensure_ascii=False)
            chat.append({"role": "assistant", "content": "", "reasoning_content": view.reasoning,
                         "tool_calls": [{"type": "function", "function": {"name": view.name, "arguments": arguments}}]})
        elif view.kind == "final":
            chat.append({"role": "assistant", "content": f"\\boxed{{{view.answer}}}", "reasoning_content": view.reasoning})
        else:
            raise ValueError("a nanbeige SFT row holds only calls and the final answer")
    return chat, tools


def toolmind_chat(row: dict) -> tuple[list[dict], list[dict]]:
    """A `toolmind` row's `{role, content}` messages; its tools are declared in the system turn's text."""
    return [{"role": m["role"], "content": m["content"]} for m in row["conversations"]], []


def swift_row(config: str, row: dict) -> dict[str, Any] | None:
    """A row as ms-swift trains on it: `messages` with their `loss` flags up to the last `loss=1` assistant
    message; openai rows with each thought moved into `content` as `<think>...</think>` and tools as JSON
    schemas (the others declare their tools in the system turn's text). None for a row with no `loss=1`
    assistant message: it trains nothing."""
    if config not in _MESSAGES:
        raise ValueError(f"unknown SFT config {config!r}; choose one of {', '.join(SFT_CONFIGS)}")
    messages = [_set_keys(message) for message in row[_MESSAGES[config]]]
    trained = [position for position, message in enumerate(messages)
               if message["role"] == "assistant" and message.get("loss")]
    if not trained:
        return None
    messages = messages[: trained[-1] + 1]
    if config != "openai":
        return {"messages": messages}
    for message in messages:
        reasoning = message.pop("reasoning_content", None)
        if reasoning is not None:
            message["content"] = f"<think>\n{reasoning}\n</think>\n\n{message.get('content') or ''}"
    return {"messages": messages, "tools": tool_schemas(row["tools"])}


def write_swift_jsonl(dataset_dir: str | Path, config: str, out: str | Path,
                      split: str = "train") -> tuple[int, int]:
    """A config's split as ms-swift's messages JSONL at `out` (`swift sft --dataset out`), one line per row
    that trains a turn; returns how many rows it wrote and how many it left out for training nothing."""
    converted = [swift_row(config, row) for row in config_rows(dataset_dir, config, split)]
    with open(out, "w", encoding="utf-8") as lines:
        for row in filter(None, converted):
            lines.write(json.dumps(row, ensure_ascii=False) + "\n")
    written = sum(row is not None for row in converted)
    return written, len(converted) - written


CHATS = {"openai": openai_chat, "nanbeige": nanbeige_chat, "toolmind": toolmind_chat}


def sft_rows(config: str, row: dict) -> list[dict[str, Any]]:
    """One `{prompt, completion, tools}` example per `loss=1` assistant message of a row, in order."""
    if config not in CHATS:
        raise ValueError(f"unknown SFT config {config!r}; choose one of {', '.join(SFT_CONFIGS)}")
    chat, tools = CHATS[config](row)
    losses = [m.get("loss") or 0 for m in row[_MESSAGES[config]]]
    if len(losses) != len(chat):
        raise ValueError(f"{config} row: {len(chat)} chat messages for {len(losses)} stored ones")
    return [{"prompt": chat[:position], "completion": [chat[position]], "tools": tools}
            for position, (message, loss) in enumerate(zip(chat, losses, strict=True))
            if loss and message["role"] == "assistant"]


def config_rows(dataset_dir: str | Path, config: str, split: str = "train") -> list[dict]:
    """Every row of a config's split, shard by shard."""
    import pyarrow.parquet as pq

    shards = sorted((Path(dataset_dir) / "data" / config).glob(f"{split}-*.parquet"))
    if not shards:
        raise FileNotFoundError(f"no {config!r} {split} shards in {dataset_dir}/data/{config}")
    return [row for shard in shards for row in pq.read_table(shard).to_pylist()]


def sft_dataset(dataset_dir: str | Path, config: str, split: str = "train"):
    """A config's split as a `datasets.Dataset` of prompt-completion examples (one per trained turn)."""
    return examples_dataset([example for row in config_rows(dataset_dir, config, split)
                             for example in sft_rows(config, row)])


def examples_dataset(examples: list[dict[str, Any]]):
    """`sft_rows` examples as a `datasets.Dataset` whose message and tool columns keep each row's own keys."""
    import datasets

    features = datasets.Features({"prompt": datasets.List(datasets.Json()),
                                  "completion": datasets.List(datasets.Json()),
                                  "tools": datasets.List(datasets.Json())})
    return datasets.Dataset.from_list(examples, features=features)
