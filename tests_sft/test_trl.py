"""TRL's SFTTrainer on the openai, nanbeige and toolmind configs through `pipeline.sft`: exactly the `loss=1`
assistant turns carry labels, and a few optimiser steps run."""

from __future__ import annotations

import json
import math

import pytest

from pipeline.sft import examples_dataset, sft_dataset, sft_rows
from tests_sft.conftest import CONFIGS, read_rows, tiny_qwen3, trained_turns


def spread(rows: list[dict], count: int = 10) -> list[dict]:
    """`count` rows spread over the config, the longest included (TRL tokenises ~10 long examples a second
    on 2 cores, so the label check reads every trained turn of these rows, and the count check all rows)."""
    longest = max(rows, key=lambda row: len(json.dumps(row)))
    return rows[:: max(1, len(rows) // (count - 1))][: count - 1] + [longest]


def sft_config(tmp_path, **overrides):
    from trl import SFTConfig

    settings = dict(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=2, learning_rate=1e-3,
                    report_to="none", use_cpu=True, save_strategy="no", logging_steps=1, max_length=None,
                    completion_only_loss=True, dataset_num_proc=None, seed=0)
    return SFTConfig(**(settings | overrides))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_exactly_the_loss_1_turns_carry_labels_and_trl_trains(config, dataset_dir, tokenizer, tmp_path):
    from trl import SFTTrainer

    rows = read_rows(dataset_dir, config)
    everything = sft_dataset(dataset_dir, config)
    expected, untrained = trained_turns(rows, config)
    assert len(everything) == len(expected) > 0 and untrained > 0  # one example per loss=1 turn, none else
    if config == "openai":
        assert all(isinstance(tool, dict) for tool in everything[0]["tools"])  # JSON schemas, not JSON text
    chosen = spread(rows)
    dataset = examples_dataset([example for row in chosen for example in sft_rows(config, row)])
    expected, _ = trained_turns(chosen, config)
    trainer = SFTTrainer(model=tiny_qwen3(tokenizer), args=sft_config(tmp_path), train_dataset=dataset,
                         processing_class=tokenizer)
    tokenized = trainer.train_dataset
    assert len(tokenized) == len(expected)
    for position, example in enumerate(tokenized):
        batch = trainer.data_collator([example])
        labels, ids = batch["labels"][0], batch["input_ids"][0]
        labelled = (labels != -100).nonzero().flatten().tolist()
        assert labelled == list(range(len(ids) - len(labelled), len(ids))), "labels are the sequence's tail"
        text = tokenizer.decode(ids[labelled], skip_special_tokens=False)
        assert text.rstrip("\n") == expected[position], (config, position)
        assert tokenizer.decode(ids[: len(ids) - len(labelled)], skip_special_tokens=False).endswith(
            "<|im_start|>assistant\n")

    shortest = sorted(range(len(dataset)), key=lambda i: len(tokenized[i]["input_ids"]))[:8]
    trainer = SFTTrainer(model=tiny_qwen3(tokenizer), args=sft_config(tmp_path), train_dataset=dataset.select(shortest),
                         processing_class=tokenizer)
    result = trainer.train()
    assert trainer.state.global_step == 2 and math.isfinite(result.training_loss)


def test_openai_rows_validate_against_openai_types_and_keep_every_think_under_qwen3(dataset_dir, tokenizer):
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
    from pydantic import TypeAdapter

    from pipeline.sft import openai_chat

    messages_type = TypeAdapter(list[ChatCompletionMessageParam])
    tool_type = TypeAdapter(list[ChatCompletionToolParam])
    for row in read_rows(dataset_dir, "openai") + read_rows(dataset_dir, "openai", "test"):
        messages, tools = openai_chat(row)
        messages_type.validate_python([{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages],
                                      strict=True)
        tool_type.validate_python(tools, strict=True)
        assert [m["role"] for m in messages[2:]].count("user") == 0, "feedback comes back as tool messages"
        declared = {tool["function"]["name"] for tool in tools}
        assert {c["function"]["name"] for m in messages for c in m.get("tool_calls", [])} <= declared
        text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
        thoughts = [m["reasoning_content"] for m in messages if m["role"] == "assistant"]
        assert text.count("<think>\n") == len(thoughts), row["trajectory_id"]
        assert all(f"<think>\n{thought}\n</think>" in text for thought in thoughts)
        json.dumps(messages)
