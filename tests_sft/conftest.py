"""The SFT contract suite (`make sft-check`, .venv-sft): real trainers on the sample's dataset.

`HOPSMITH_SFT_DATASET` names the dataset folder (`make sft-check` builds it with `hopsmith dataset`). The
model is a tiny randomly initialised Qwen3 and the tokenizer is trained here on the rows' own text, with the
Qwen3 tool-calling template shipped in data/chat_templates: nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rl.chat import IM_END

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "data" / "chat_templates" / "qwen3_tool_calling.jinja"
CONFIGS = {"openai": "messages", "nanbeige": "messages", "toolmind": "conversations"}


@pytest.fixture(scope="session")
def dataset_dir() -> Path:
    folder = os.environ.get("HOPSMITH_SFT_DATASET")
    if not folder:
        pytest.fail("set HOPSMITH_SFT_DATASET to a dataset folder (`make sft-check` does)")
    return Path(folder)


def read_rows(dataset_dir: Path, config: str, split: str = "train") -> list[dict]:
    shards = sorted((dataset_dir / "data" / config).glob(f"{split}-*.parquet"))
    rows = [row for shard in shards for row in pq.read_table(shard).to_pylist()]
    assert rows, f"no {config} rows in {dataset_dir}"
    return rows


@pytest.fixture(scope="session")
def tokenizer(dataset_dir):
    from rl.tokenizer import train_tokenizer

    texts = [m["content"] or "" for config, key in (("nanbeige", "messages"), ("toolmind", "conversations"))
             for row in read_rows(dataset_dir, config)[:40] for m in row[key]]
    tokenizer = train_tokenizer(texts, vocab_size=4000)
    tokenizer.chat_template = TEMPLATE.read_text()
    return tokenizer


def tiny_qwen3(tokenizer):
    """A randomly initialised two-layer Qwen3, sized to the tokenizer."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=65536,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return Qwen3ForCausalLM(config)


def rendered_turn(config: str, message: dict) -> str:
    """The text a trained turn must be, from the stored message alone (not from the loader or the template)."""
    if config != "openai":
        return message["content"] + IM_END
    calls = "".join(f'<tool_call>\n{{"name": "{c["function"]["name"]}", "arguments": {c["function"]["arguments"]}}}'
                    "\n</tool_call>" for c in message["tool_calls"] or [])
    return f"<think>\n{message['reasoning_content']}\n</think>\n\n{message['content'] or ''}{calls}{IM_END}"


def trained_turns(rows: list[dict], config: str) -> tuple[list[str], int]:
    """The expected completion of every `loss=1` assistant message in row order, and the loss=0 count."""
    expected, untrained = [], 0
    for row in rows:
        for message in row[CONFIGS[config]]:
            if message["role"] == "assistant" and message["loss"] == 1:
                expected.append(rendered_turn(config, message))
            elif message["role"] == "assistant":
                untrained += 1
    return expected, untrained
