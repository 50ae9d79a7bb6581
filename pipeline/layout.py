"""The Hub layout of a published dataset: configs, their row types and features, splits and shard names.

`out/dataset/data/<config>/<split>-NNNNN-of-NNNNN.parquet`. Each config's features are derived from its
row model (`schemas.base.arrow_schema` -> `datasets.Features`) and embedded in every shard, so
`datasets.load_dataset("parquet", data_files=...)` and loading the folder by config both return the
declared features. A question's split is a hash of its id, so every config puts a question, its
trajectories and its RL prompt in the same split, and no run or row order can move it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import datasets
import pyarrow as pa
from pydantic import BaseModel

from ground.io import atomic_write_text, sha256_file, write_table
from ground.storage import rename_file
from schemas.base import arrow_schema, to_table
from schemas.dataset import CONFIGS

SPLITS = ("train", "test")
DATA_DIR = "data"
CHECKSUMS = "checksums.sha256"


def split_of(question_id: str, test_fraction: float) -> str:
    """`test` for a fixed share of question ids (by hash), else `train`."""
    bucket = int.from_bytes(hashlib.sha256(question_id.encode()).digest()[:8], "big") / 2**64
    return "test" if bucket < test_fraction else "train"


@cache
def features(config: str) -> datasets.Features:
    return datasets.Features.from_arrow_schema(arrow_schema(CONFIGS[config]))


@cache
def shard_schema(config: str) -> pa.Schema:
    """The row model's Arrow schema with the `datasets` features embedded (what `load_dataset` reads)."""
    schema = arrow_schema(CONFIGS[config])
    return schema.with_metadata({**schema.metadata, **features(config).arrow_schema.metadata})


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}.parquet"


def shard_pattern(config: str, split: str) -> str:
    return f"{DATA_DIR}/{config}/{split}-*.parquet"


# configs whose rows hold no free-form (JSON-string) field: `model_dump` already is their Arrow row, which
# is much faster than the generic `schemas.base.to_row` walk (tests check the two agree)
PLAIN_CONFIGS = frozenset({"questions", "toolmind", "nanbeige", "turns"})


def rows_table(config: str, rows: Sequence[BaseModel]) -> pa.Table:
    """Rows of one config as an Arrow table with the shard schema."""
    if config in PLAIN_CONFIGS:
        return pa.Table.from_pylist([row.model_dump() for row in rows], schema=shard_schema(config))
    return to_table(CONFIGS[config], rows).cast(shard_schema(config))


class SplitWriter:
    """Streams one split of one config into numbered shards of at most `max_rows` rows and about
    `max_chars` characters of text (the caller's `chars` hint per row), so memory stays bounded when
    trajectories run to hundreds of turns.

    Shards are written atomically under provisional names (`_provisional-<split>-i`, which no `<split>-*`
    pattern loads) and renamed to `<split>-i-of-n` by `close`, when `n` is known (on object storage a
    rename is a copy and a delete; readers trust only the shards the dataset manifest lists). A build interrupted
    before `close` leaves only provisional files; one interrupted inside `close` can leave some shards
    under final names. Neither is a finished dataset: it has no manifest or checksums, and the next run
    of the dataset stage deletes its `data/` and builds it again.
    """

    def __init__(self, root: Path, config: str, split: str, max_rows: int, max_chars: int = 200_000_000):
        self.root, self.config, self.split = root, config, split
        self.max_rows, self.max_chars = max_rows, max_chars
        self.rows: list[BaseModel] = []
        self.chars = 0
        self.provisional: list[Path] = []
        self.count = 0
        self.num_bytes = 0  # Arrow bytes written: the split's `num_bytes` in the card, as `datasets` counts it

    def add(self, row: BaseModel, chars: int = 0) -> None:
        self.rows.append(row)
        self.chars += chars
        self.count += 1
        if len(self.rows) >= self.max_rows or self.chars >= self.max_chars:
            self._flush()

    def _flush(self) -> None:
        if not self.rows:
            return
        table = rows_table(self.config, self.rows)
        self.num_bytes += table.nbytes
        path = (
            self.root
            / DATA_DIR
            / self.config
            / f"_provisional-{self.split}-{len(self.provisional):05d}.parquet"
        )
        write_table(table, path)
        self.provisional.append(path)
        self.rows, self.chars = [], 0

    def close(self) -> list[str]:
        """Write what is buffered and give every shard its final name; returns paths relative to root."""
        self._flush()
        final = []
        for index, path in enumerate(self.provisional):
            relative = f"{DATA_DIR}/{self.config}/{shard_name(self.split, index, len(self.provisional))}"
            rename_file(path, self.root / relative)
            final.append(relative)
        return final


def dataset_info_yaml(config: str, split_rows: dict[str, int], split_bytes: dict[str, int]) -> dict:
    """The card's `dataset_info` entry for a config: declared features, rows and Arrow bytes per split
    (`datasets` ignores a `splits` entry that lacks either, with a warning on every load)."""
    info = datasets.DatasetInfo(
        features=features(config),
        config_name=config,
        splits=datasets.SplitDict(
            {s: datasets.SplitInfo(s, num_bytes=split_bytes[s], num_examples=n) for s, n in split_rows.items()}
        ),
    )
    return json.loads(json.dumps(info._to_yaml_dict()))


def write_checksums(root: Path, relative_paths: list[str]) -> str:
    """`sha256sum`-format listing of the published files, so `validate` catches a later corruption."""
    lines = [f"{sha256_file(root / path)}  {path}" for path in sorted(relative_paths)]
    atomic_write_text(root / CHECKSUMS, "\n".join(lines) + "\n")
    return CHECKSUMS
