"""ms-swift on the sample's SFT configs, the way `swift sft` reads them: its own dataset loader and the
template its SFT pipeline trains with. ms-swift honours each message's `loss` flag; as shipped, the nanbeige
and toolmind shards train exactly the `loss=1` turns plus the closing `<|im_end|>` of a row whose final
answer is `loss=0` (its template labels a conversation's end whatever the flag), and the openai config loses
its thoughts. Through `pipeline.sft.write_swift_jsonl`, exactly the `loss=1` assistant turns of every config
carry labels. `swift sft` runs two optimiser steps on the shipped nanbeige shard.

Runs in .venv-swift (ms-swift pins an older transformers and TRL than .venv-sft), with HF_HUB_OFFLINE=1 (else
`datasets` pings its hub to count a local file's load); `make sft-check` runs this file there and test_trl.py
in .venv-sft.
"""

from __future__ import annotations

import ipaddress
import math
import socket
from pathlib import Path

import pytest

from pipeline.sft import write_swift_jsonl
from rl.chat import IM_END
from tests_sft.conftest import CONFIGS, read_rows, tiny_qwen3, trained_turns

SHIPPED = ("nanbeige", "toolmind")
SPLITS = ("train", "test")


def is_loopback(host) -> bool:
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


@pytest.fixture(scope="module", autouse=True)
def loopback_only():
    """Fails the module if anything resolves or connects off this machine: ms-swift asks its hub about local
    models unless `check_model=False`, `datasets` counts loads unless HF_HUB_OFFLINE, and both retry quietly."""
    attempts = []
    resolve, connect = socket.getaddrinfo, socket.socket.connect

    def guarded_resolve(host, *args, **kwargs):
        if not is_loopback(host):
            attempts.append(host)
            raise OSError(f"no network in tests: {host}")
        return resolve(host, *args, **kwargs)

    def guarded_connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(address[0]):
            attempts.append(address[0])
            raise OSError(f"no network in tests: {address[0]}")
        return connect(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", guarded_resolve)
        patch.setattr(socket.socket, "connect", guarded_connect)
        yield
    assert attempts == [], f"ms-swift reached for the network: {sorted(set(attempts))}"


def shards(dataset_dir: Path, config: str, split: str = "train") -> list[str]:
    return [str(path) for path in sorted((dataset_dir / "data" / config).glob(f"{split}-*.parquet"))]


@pytest.fixture(scope="module")
def swift_sft(dataset_dir, tokenizer, tmp_path_factory):
    """`swift sft`'s pipeline on the shipped nanbeige train shards, with a tiny random Qwen3 saved as a local
    model folder (ms-swift's `qwen3` model type and template); its `template` is what it trains with."""
    from swift import SftArguments
    from swift.pipelines.train.sft import SwiftSft

    model_dir = tmp_path_factory.mktemp("qwen3-tiny")
    tiny_qwen3(tokenizer).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    args = SftArguments(model=str(model_dir), model_type="qwen3", template="qwen3",
                        dataset=shards(dataset_dir, "nanbeige"), strict=True, split_dataset_ratio=0,
                        output_dir=str(tmp_path_factory.mktemp("swift-run")), tuner_type="full", max_steps=2,
                        per_device_train_batch_size=2, learning_rate=1e-3, torch_dtype="float32",
                        gradient_checkpointing=False, save_strategy="no", eval_strategy="no", report_to=["none"],
                        logging_steps=1, dataset_num_proc=1, load_from_cache_file=False, check_model=False, seed=0)
    return SwiftSft(args)


def labelled_spans(encoded: dict, tokenizer) -> list[str]:
    """The text of each run of labelled tokens (label != -100) of one encoded row."""
    spans, run = [], []
    for token, label in zip(encoded["input_ids"], encoded["labels"], strict=True):
        if label != -100:
            run.append(token)
        elif run:
            spans.append(run)
            run = []
    return [tokenizer.decode(span, skip_special_tokens=False) for span in spans + ([run] if run else [])]


def swift_rows(paths: list[str]) -> list[dict]:
    """Rows through ms-swift's own loader (what `swift sft --dataset PATH` does), strict: none dropped."""
    from swift import load_dataset

    dataset, _ = load_dataset(paths, strict=True, num_proc=1, load_from_cache_file=False)
    return list(dataset)


def ends_untrained(config: str, row: dict) -> bool:
    """Whether a row's last assistant turn (its final answer) is `loss=0`."""
    return not [m for m in row[CONFIGS[config]] if m["role"] == "assistant"][-1]["loss"]


def check_labels(config: str, rows: list[dict], loaded: list[dict], swift_sft, tokenizer,
                 closing_labelled: bool) -> dict[str, int]:
    """Each loaded row's labelled spans are its `loss=1` turns in order, plus, where `closing_labelled`, the
    closing end-of-turn of a row whose final answer is `loss=0`; returns the counts."""
    assert len(loaded) == len(rows), "ms-swift's loader keeps every row"
    counts = dict(rows=len(rows), spans=0, loss_1=0, loss_0=0, closing=0)
    for position, (row, swift_row) in enumerate(zip(rows, loaded, strict=True)):
        turns, untrained = trained_turns([row], config)
        # ms-swift's Qwen3 template ends a turn with "<|im_end|>\n" and trains the newline too
        expected = [turn + "\n" for turn in turns]
        if closing_labelled and ends_untrained(config, row):
            expected.append(IM_END + "\n")
            counts["closing"] += 1
        spans = labelled_spans(swift_sft.template.encode(swift_row), tokenizer)
        assert spans == expected, (config, position)
        counts["spans"] += len(spans)
        counts["loss_1"] += len(turns)
        counts["loss_0"] += untrained
    print(f"ms-swift {config}: {counts}")
    assert counts["loss_1"] > 0 and counts["loss_0"] > 0
    return counts


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("config", SHIPPED)
def test_swift_honours_loss_on_the_shipped_shards_but_labels_a_loss_0_rows_closing(config, split, dataset_dir,
                                                                                   swift_sft, tokenizer):
    rows = read_rows(dataset_dir, config, split)
    counts = check_labels(config, rows, swift_rows(shards(dataset_dir, config, split)), swift_sft, tokenizer,
                          closing_labelled=True)
    assert counts["closing"] == sum(ends_untrained(config, row) for row in rows)
    # the train split is large enough to hold loss-0 final answers (the small test split may hold none)
    assert counts["closing"] > 0 or split == "test"


def test_swift_drops_the_thoughts_of_the_openai_shard_as_shipped(dataset_dir, swift_sft, tokenizer):
    """Why `write_swift_jsonl` moves them: ms-swift drops `reasoning_content`, puts an empty `<think>` in the
    prompt and trains each openai turn from its answer or call on."""
    rows = read_rows(dataset_dir, "openai")
    empty_thought = "<think>\n\n</think>\n\n"
    for position, (row, swift_row) in enumerate(zip(rows, swift_rows(shards(dataset_dir, "openai")), strict=True)):
        thoughtless = {"messages": [m | {"reasoning_content": ""} for m in row["messages"]]}
        expected = [turn.removeprefix(empty_thought) + "\n" for turn in trained_turns([thoughtless], "openai")[0]]
        expected += [IM_END + "\n"] * ends_untrained("openai", row)
        assert labelled_spans(swift_sft.template.encode(swift_row), tokenizer) == expected, position


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_swift_labels_exactly_the_loss_1_turns_through_the_jsonl(config, split, dataset_dir, swift_sft, tokenizer,
                                                                tmp_path):
    path = tmp_path / f"{config}-{split}.jsonl"
    rows = [row for row in read_rows(dataset_dir, config, split) if trained_turns([row], config)[0]]
    assert write_swift_jsonl(dataset_dir, config, path, split) == (len(rows), 0)
    check_labels(config, rows, swift_rows([str(path)]), swift_sft, tokenizer, closing_labelled=False)


def test_swift_sft_trains_on_the_shipped_nanbeige_shard(swift_sft):
    result = swift_sft.main()
    assert result["global_step"] == 2
    losses = [entry["loss"] for entry in result["log_history"] if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
