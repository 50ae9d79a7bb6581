"""`hopsmith rl export-verl --pass-band LO HI` on the shipped sample's dataset (`make dataset` as shipped): the
questions the offline searcher never solves (rate 0) stay out of the `rl` config under the default band, yet
a band that holds them makes them prompts, chosen from the `questions` config by their recorded rate. The
`rl` rows carry the rate, and an `rl` shard written before they did still reads."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cli.main import main
from ground.io import write_records
from rl.data import read_prompts
from rl.export_verl import export_verl
from schemas.dataset import PASS_RATE_FIELDS, RLPrompt
from tests.rl_fixtures import make_dataset


def parquet_rows(folder: Path) -> list[dict]:
    return [row for path in sorted(folder.glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


@pytest.fixture(scope="module")
def sample(sample_dataset_run):
    """The dataset folder, its index, and each question's (split, recorded pass rate), read off the shards."""
    dataset = sample_dataset_run / "dataset"
    recorded = {}
    for path in sorted((dataset / "data" / "questions").glob("*.parquet")):
        for row in pq.read_table(path, columns=["question_id", "pass_rate"]).to_pylist():
            recorded[row["question_id"]] = (path.name.split("-")[0], row["pass_rate"])
    return dataset, sample_dataset_run / "index", recorded


def exported_ids(out: Path) -> dict[str, set[str]]:
    """split -> question ids of a verl export (splits with rows)."""
    ids = {path.stem: {row["extra_info"]["question_id"] for row in pq.read_table(path).to_pylist()}
           for path in sorted((out / "data").glob("*.parquet"))}
    return {split: found for split, found in ids.items() if found}


def in_band(recorded: dict, low: float, high: float, strict: bool = False) -> dict[str, set[str]]:
    selected: dict[str, set[str]] = {}
    for qid, (split, rate) in recorded.items():
        if (low < rate < high) if strict else (low <= rate <= high):
            selected.setdefault(split, set()).add(qid)
    return selected


def test_a_pass_band_makes_the_never_solved_questions_prompts_which_the_default_leaves_out(sample, tmp_path):
    dataset, index, recorded = sample
    never = {qid for qid, (_, rate) in recorded.items() if rate == 0}
    assert never and len(never) < len(recorded)  # the sample has never-solved questions, and others
    common = ["rl", "export-verl", "--shards", str(dataset), "--index", str(index), "--model", "/m"]
    assert main([*common, "--out", str(tmp_path / "default")]) == 0
    default = exported_ids(tmp_path / "default")
    assert default == in_band(recorded, 0.0, 1.0, strict=True)  # the `rl` config as built: 0 < rate < 1
    assert not never & set().union(*default.values())
    assert main([*common, "--out", str(tmp_path / "all"), "--pass-band", "0", "1"]) == 0
    everything = exported_ids(tmp_path / "all")
    assert everything == in_band(recorded, 0.0, 1.0) and never <= set().union(*everything.values())
    assert main([*common, "--out", str(tmp_path / "hard"), "--pass-band", "0", "0.5"]) == 0
    assert exported_ids(tmp_path / "hard") == in_band(recorded, 0.0, 0.5)
    assert main([*common, "--out", str(tmp_path / "bad"), "--pass-band", "0.9", "0.1"]) == 2  # reversed


def test_rl_rows_carry_the_rate_and_a_banded_prompt_is_the_rl_configs_row(sample):
    dataset, _, recorded = sample
    built = read_prompts(dataset)
    assert built and all(p.pass_rate == recorded[p.question_id][1] for p in built)
    assert {(p.pass_rate_policy, p.pass_rate_rollouts) for p in built} == {("offline:function_calling", 4)}
    banded = {p.question_id: p for p in read_prompts(dataset, split="test", pass_band=(0.0, 1.0))}
    assert set(banded) == in_band(recorded, 0.0, 1.0)["test"]
    for prompt in built:  # the same render, environment included, whichever config it came from
        if prompt.question_id in banded:
            assert banded[prompt.question_id] == prompt


def test_an_rl_shard_written_before_the_rate_columns_still_reads_and_exports(sample, tmp_path):
    _, index, _ = sample
    current = make_dataset(tmp_path / "current")
    older = make_dataset(tmp_path / "older")
    shard = older / "data" / "rl" / "train-00000-of-00001.parquet"
    table = pq.read_table(shard)
    pq.write_table(table.drop_columns(list(PASS_RATE_FIELDS)), shard)
    assert not set(PASS_RATE_FIELDS) & set(pq.read_table(shard).column_names)
    prompts = read_prompts(older)
    assert prompts == read_prompts(current) and {p.pass_rate for p in prompts} == {None}
    manifest = export_verl(older, tmp_path / "verl", index_dir=index)
    assert manifest.counts["rows:train"] == len(prompts)
    # its `questions` config has no rate column: a band cannot select there, and says so
    assert main(["rl", "export-verl", "--shards", str(older), "--index", str(index), "--out", str(tmp_path / "b"),
                 "--pass-band", "0", "1"]) == 2
    write_records(RLPrompt, prompts, tmp_path / "again.parquet")  # and what it read writes as today's layout
    assert set(PASS_RATE_FIELDS) <= set(pq.read_table(tmp_path / "again.parquet").column_names)
