"""`pipeline.sft`: one prompt-completion example per `loss=1` turn of each SFT config, in chat messages a
Qwen3-style template renders as the row itself (the trainers' side is `make sft-check`)."""

from __future__ import annotations

import json

import pytest

from pipeline import renders
from pipeline.sft import nanbeige_chat, openai_chat, sft_rows, swift_row
from schemas.base import to_row
from tests.dataset_fixtures import make_judged, make_question

RENDERS = {"openai": renders.render_openai, "nanbeige": renders.render_nanbeige, "toolmind": renders.render_toolmind}


def stored(config: str, judged) -> dict:
    """A row as it comes back from its shard (JSON through arrow)."""
    return json.loads(json.dumps(to_row(RENDERS[config](judged))))


@pytest.mark.parametrize("config", sorted(RENDERS))
def test_one_example_per_trained_turn_with_its_prefix(config):
    judged = make_judged(make_question(1, hops=3))
    row = stored(config, judged)
    examples = sft_rows(config, row)
    assert len(examples) == sum(renders.turn_loss(judged)) > 0
    for example in examples:
        assert example["completion"][0]["role"] == "assistant"
        assert [m["role"] for m in example["prompt"][:2]] == ["system", "user"]
    assert len(examples[-1]["prompt"]) > len(examples[0]["prompt"])
    if config != "toolmind":
        assert all(isinstance(tool, dict) for tool in examples[0]["tools"])
        assert "answer" in {tool["function"]["name"] for tool in examples[0]["tools"]}


def test_chat_messages_render_through_the_qwen3_template_with_every_think_kept(template_tokenizer):
    from rl.chat import render_text

    judged = make_judged(make_question(2, hops=3))
    nanbeige = stored("nanbeige", judged)
    messages, tools = nanbeige_chat(nanbeige)
    assert template_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False) == \
        render_text(nanbeige["messages"])
    messages, tools = openai_chat(stored("openai", judged))
    text = template_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    thoughts = [m["reasoning_content"] for m in messages if m["role"] == "assistant"]
    assert len(thoughts) == len(renders.rendered_turns(judged.trajectory))
    assert text.count("<think>\n") == len(thoughts)
    assert all(f"<think>\n{thought}\n</think>" in text for thought in thoughts)
    # after their system turns, the openai and nanbeige rows are one conversation under the template
    assert text.partition("<|im_start|>user")[2] == render_text(nanbeige["messages"]).partition("<|im_start|>user")[2]


@pytest.mark.parametrize("config", sorted(RENDERS))
def test_swift_rows_end_at_the_last_trained_turn_with_thoughts_in_content(config):
    judged = make_judged(make_question(1, hops=3))
    row = stored(config, judged)
    swift = swift_row(config, row)
    stored_messages = row["conversations" if config == "toolmind" else "messages"]
    last_trained = max(i for i, m in enumerate(stored_messages) if m["role"] == "assistant" and m["loss"])
    assert [m["loss"] for m in swift["messages"]] == [m["loss"] for m in stored_messages[: last_trained + 1]]
    assert swift["messages"][-1]["role"] == "assistant" and swift["messages"][-1]["loss"] == 1
    if config == "openai":
        assert all(isinstance(tool, dict) for tool in swift["tools"])
        for message, original in zip(swift["messages"], stored_messages, strict=False):
            assert "reasoning_content" not in message and None not in message.values()
            if original["reasoning_content"] is not None:
                assert message["content"].startswith(f"<think>\n{original['reasoning_content']}\n</think>\n\n")
    untrained = row | {k: [m | {"loss": 0} for m in v] for k, v in row.items() if k in ("messages", "conversations")}
    assert swift_row(config, untrained) is None
