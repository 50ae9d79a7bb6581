"""The dataset stage on hand-made upstream records: Hub layout, features, card, validate, publish, no leaks."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from cli.main import main
from ground.errors import UserError
from pipeline.card import parse_card_header
from pipeline.dataset import build_dataset, load_config
from pipeline.layout import CONFIGS, features, split_of
from pipeline.publish import publish
from pipeline.validate import validate_dataset
from schemas.config import DatasetConfig
from tests.dataset_fixtures import build_fixture_dataset, sample_records, write_upstream

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_fixture_dataset(tmp_path_factory.mktemp("run"))


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _cli(capfd, *args: str) -> tuple[int, str, str]:
    """Run the real `hopsmith` CLI in-process; returns (exit status, stdout, stderr)."""
    capfd.readouterr()
    status = main(list(args))
    out, err = capfd.readouterr()
    return status, out, err


def test_every_config_loads_with_its_declared_features(built, tmp_path):
    header = parse_card_header((built / "README.md").read_text())
    assert [c["config_name"] for c in header["configs"]] == list(CONFIGS)
    assert header["license"] == "cc-by-sa-4.0"
    for entry in header["configs"]:
        data_files = {f["split"]: str(built / f["path"]) for f in entry["data_files"]}
        loaded = datasets.load_dataset("parquet", data_files=data_files, cache_dir=str(tmp_path / "hf"))
        for split, dataset in loaded.items():
            assert dataset.features == features(entry["config_name"])
            info = next(i for i in header["dataset_info"] if i["config_name"] == entry["config_name"])
            assert {s["name"]: s["num_examples"] for s in info["splits"]}[split] == len(dataset)


def test_load_the_folder_by_config_name(built, tmp_path):
    toolmind = datasets.load_dataset(str(built), "toolmind", cache_dir=str(tmp_path / "hf"))
    assert set(toolmind) == {"train", "test"}
    default = datasets.load_dataset(str(built), cache_dir=str(tmp_path / "hf"))
    assert default["train"].features == toolmind["train"].features
    rl = datasets.load_dataset(str(built), "rl", cache_dir=str(tmp_path / "hf"))
    assert rl["train"].features == features("rl")
    row = toolmind["train"][0]
    assert set(row) == {"key", "id", "conversations"}
    assert {m["role"] for m in row["conversations"]} == {"system", "user", "assistant"}


def test_splits_follow_the_question_and_shards_are_named(built):
    test_questions = sum(split_of(f"q{i:03d}", 0.25) == "test" for i in range(12))
    assert 0 < test_questions < 12
    expected = []
    for split, rows in (("test", 3 * test_questions), ("train", 3 * (12 - test_questions))):
        count = -(-rows // 7)
        expected += [f"{split}-{i:05d}-of-{count:05d}.parquet" for i in range(count)]
    names = sorted(p.name for p in (built / "data/trajectories").glob("*.parquet"))
    assert names == expected
    for config, id_column in (("trajectories", None), ("rl", "question_id"), ("toolmind", "id")):
        for path in (built / "data" / config).glob("*.parquet"):
            split = path.name.split("-")[0]
            table = pq.read_table(path).to_pylist()
            ids = [r["trajectory"]["question_id"] if id_column is None else r[id_column] for r in table]
            assert {split_of(i, 0.25) for i in ids} == {split}


def test_training_renders_leave_out_incorrect_runs_with_a_reason(built):
    header_counts = {
        i["config_name"]: sum(s["num_examples"] for s in i["splits"])
        for i in parse_card_header((built / "README.md").read_text())["dataset_info"]
    }
    assert header_counts["trajectories"] == 36 and header_counts["toolmind"] == 24
    assert header_counts["questions"] == header_counts["rl"] == 12
    assert header_counts["turns"] == 12 * 4 + 12 * 4  # tagged: turns 0,1,4,5 kept; react: 0,1,3,4
    card = (built / "README.md").read_text()
    assert "| incorrect_outcome | 12 |" in card
    for plot in (
        "hop_count_distribution",
        "tool_calls_per_trajectory",
        "critic_pass_rate_per_criterion",
        "outcome_accuracy_per_framework",
    ):
        assert f"(plots/{plot}.png)" in card
        assert (built / "plots" / f"{plot}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_inputs_give_identical_files(built, tmp_path):
    again = build_fixture_dataset(tmp_path / "again")
    first, second = _digests(built), _digests(again)
    first.pop("manifest.json"), second.pop("manifest.json")  # it records wall-clock start and finish times
    assert first == second


def test_a_finished_build_is_skipped(built):
    before = (built / "manifest.json").read_text()
    out = built.parent
    dirs = write_upstream(out, *sample_records())  # same upstream keys: the dataset stage is finished
    build_dataset(DatasetConfig(out=str(out), test_fraction=0.25, max_rows_per_shard=7), dirs)
    assert (built / "manifest.json").read_text() == before


def test_validate_accepts_the_build_and_catches_corruption(built, tmp_path, capfd):
    assert validate_dataset(built).errors == []
    status, out, _ = _cli(capfd, "validate", str(built))
    assert status == 0 and out.startswith("ok: ")

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(built), str(copy)], check=True)
    shard = copy / "data/nanbeige/train-00000-of-00003.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    shard.write_bytes(bytes(data))
    report = validate_dataset(copy)
    assert any("nanbeige/train-00000-of-00003.parquet" in e for e in report.errors)
    status, out, _ = _cli(capfd, "validate", str(copy))
    assert status == 1 and "checksum mismatch" in out


def test_validate_catches_a_missing_shard_and_wrong_counts(built, tmp_path):
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(built), str(copy)], check=True)
    (copy / "data/trajectories/train-00001-of-00004.parquet").unlink()
    errors = " ".join(validate_dataset(copy).errors)
    assert "not numbered 0..n-1" in errors and "20 rows in the shards, the card says 27" in errors
    assert "listed in checksums.sha256 but missing" in errors


def test_validate_catches_rows_that_break_the_render(built, tmp_path):
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(built), str(copy)], check=True)
    (copy / "checksums.sha256").unlink()
    shard = copy / "data/toolmind/test-00000-of-00001.parquet"
    table = pq.read_table(shard)
    rows = table.to_pylist()
    rows[0]["conversations"] = rows[0]["conversations"][:3]  # an assistant call without its tool result
    rows[1] = dict(rows[2])  # and a duplicate key
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), shard)
    errors = validate_dataset(copy).errors
    assert any("must be followed by its result" in e for e in errors)
    assert any("duplicate id" in e for e in errors)


def test_publish_dry_run_lists_files_without_a_token(built, capfd, monkeypatch):
    sentinel = "hf_SENTINELtoken0123456789"
    monkeypatch.setenv("HF_TOKEN", sentinel)
    status, out, err = _cli(capfd, "publish", str(built), "--repo-id", "org/name", "--dry-run")
    assert status == 0, err
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert "README.md" in listed and "checksums.sha256" in listed
    assert (
        "data/toolmind/train-00000-of-00003.parquet" in listed
        and "plots/hop_count_distribution.png" in listed
    )
    assert ".pending-key" not in listed
    assert sentinel not in out + err


def test_publish_without_token_stops_clearly(built, monkeypatch, capfd):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(UserError, match="HF_TOKEN is not set"):
        publish(built, "org/name")
    monkeypatch.setenv("HF_TOKEN", "")
    status, _, err = _cli(capfd, "publish", str(built), "--repo-id", "org/name")
    assert status == 2 and "HF_TOKEN is not set" in err
    with pytest.raises(UserError, match="ORG/NAME"):
        publish(built, "no-slash", dry_run=True)


def test_config_file_and_overrides(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('seed = 5\nout = "x"\n[walk]\nseed = 9\n[trajectories]\nrollouts = 1\n')
    config = load_config(str(path), {"out": "y", "extract.dump": "d.xml.bz2", "seed": None})
    assert (config.out, config.seed, config.walk.seed, config.questions.seed) == ("y", 5, 9, 5)
    assert config.trajectories.rollouts == 1 and config.extract.dump == "d.xml.bz2"
    path.write_text("[walk]\nnot_a_field = 1\n")
    with pytest.raises(UserError, match="invalid dataset config"):
        load_config(str(path), {})
    with pytest.raises(UserError, match="not found"):
        load_config(str(tmp_path / "missing.toml"), {})
    shipped = load_config(str(ROOT / "configs/sample.toml"), {})
    assert shipped.out == "out"


def test_shards_are_also_bounded_by_text_size(tmp_path):
    from pipeline.layout import SplitWriter
    from tests.dataset_fixtures import make_question

    writer = SplitWriter(tmp_path, "questions", "train", max_rows=100, max_chars=1000)
    for index in range(5):
        writer.add(make_question(index), chars=400)
    files = writer.close()
    assert files == ["data/questions/train-00000-of-00002.parquet", "data/questions/train-00001-of-00002.parquet"]
    assert [pq.read_metadata(tmp_path / f).num_rows for f in files] == [3, 2]


def test_dataset_command_reports_a_missing_dump_in_one_line(tmp_path, capfd):
    status, out, err = _cli(capfd, "dataset", "--dump", str(tmp_path / "missing.xml.bz2"), "--out", str(tmp_path))
    assert status == 2
    assert err.strip().splitlines()[-1] == f"hopsmith: error: dump not found: {tmp_path / 'missing.xml.bz2'}"
    status, _, err = _cli(capfd, "validate", str(tmp_path / "nothing"))
    assert status == 2 and "has no README.md dataset card" in err


def test_an_interrupted_build_is_rebuilt_whole(tmp_path):
    """A build killed after writing some files (same key, no manifest) leaves no stale shard behind."""
    out = tmp_path / "out"
    dataset = build_fixture_dataset(out)
    expected = _digests(dataset)
    key = (dataset / "manifest.json").read_text().split('"key": "')[1].split('"')[0]
    (dataset / "manifest.json").unlink()
    (dataset / ".pending-key").write_text(key)
    for junk in ("data/toolmind/_provisional-train-00000.parquet", "data/toolmind/train-00000-of-00009.parquet"):
        (dataset / junk).write_bytes(b"partial")
    (dataset / "README.md").write_text("half a card")
    rebuilt = build_fixture_dataset(out)
    digests = _digests(rebuilt)
    expected.pop("manifest.json"), digests.pop("manifest.json")
    assert digests == expected
    assert validate_dataset(rebuilt).errors == []


def test_fast_row_conversion_agrees_with_the_schema_contract():
    from pipeline import renders
    from pipeline.layout import PLAIN_CONFIGS, rows_table
    from schemas.base import to_table
    from tests.dataset_fixtures import make_judged, make_question

    question = make_question(3, hops=4)
    judged = make_judged(question)
    samples = {
        "questions": [question],
        "toolmind": [renders.render_toolmind(judged)],
        "nanbeige": [renders.render_nanbeige(judged)],
        "turns": renders.render_turns(judged),
    }
    assert set(samples) == PLAIN_CONFIGS
    for config, rows in samples.items():
        assert rows_table(config, rows).equals(to_table(CONFIGS[config], rows).cast(rows_table(config, rows).schema))


def test_split_writer_interrupted_in_close_is_what_its_docstring_says(tmp_path, monkeypatch):
    """Before `close` only provisional names exist; a kill inside `close` can leave final names."""
    from pipeline import layout
    from tests.dataset_fixtures import make_question

    writer = layout.SplitWriter(tmp_path, "questions", "train", max_rows=1)
    for index in range(3):
        writer.add(make_question(index))
    folder = tmp_path / "data" / "questions"
    assert not list(folder.glob("train-*")) and len(list(folder.glob("_provisional-train-*"))) == 3
    renamed, real_replace = [], os.replace

    def killed_after_one(source, target):
        if renamed:
            raise KeyboardInterrupt
        renamed.append(target)
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", killed_after_one)  # what `close` renames with (ground.storage)
    with pytest.raises(KeyboardInterrupt):
        writer.close()
    assert [p.name for p in folder.glob("train-*")] == ["train-00000-of-00003.parquet"]
    assert "one interrupted inside `close` can leave some shards" in " ".join(layout.SplitWriter.__doc__.split())


def test_rows_and_card_name_the_models_the_servers_reported(tmp_path):
    """Records made by LLM roles: every training row and RL prompt names its engines and served models,
    and the card counts the records per role and served model (offline records name none)."""
    questions, judged = sample_records(4)
    questions[0] = questions[0].model_copy(update={"engine": "openai:writer-alias", "model": "writer-served"})
    for record in judged[:3]:  # the trajectories of question 0: an LLM policy and an LLM judge
        record.trajectory.engine, record.trajectory.model = "openai:policy-alias", "policy-served"
        for judgement in record.judgements:
            judgement.engine, judgement.model = "offline+openai:judge-alias", "judge-served"
    dirs = write_upstream(tmp_path, questions, judged)
    build_dataset(DatasetConfig(out=str(tmp_path), test_fraction=0.25), dirs)
    dataset = dirs["dataset"]
    rows = {config: [row for path in sorted((dataset / "data" / config).glob("*.parquet"))
                     for row in pq.read_table(path).to_pylist()] for config in ("nanbeige", "openai", "turns", "rl")}
    served = {"policy_engine": "openai:policy-alias", "policy_model": "policy-served",
              "judge_engine": "offline+openai:judge-alias", "judge_model": "judge-served"}
    for config in ("nanbeige", "openai", "turns"):
        mine = [row["produced_by"] for row in rows[config] if row["question_id"] == questions[0].question_id]
        others = [row["produced_by"] for row in rows[config] if row["question_id"] != questions[0].question_id]
        assert mine and all(p == served for p in mine), config
        assert others and all(p["policy_model"] is None and p["judge_model"] is None for p in others), config
    rl = {row["question_id"]: (row["writer_engine"], row["writer_model"]) for row in rows["rl"]}
    assert rl[questions[0].question_id] == ("openai:writer-alias", "writer-served")
    assert rl[questions[1].question_id] == (questions[1].engine, None)
    card = (dataset / "README.md").read_text()
    turns = sum(len(record.judgements) for record in judged[:3])
    assert (f"| judge: `judge-served` ({turns}); policy:function_calling: `policy-served` (1); policy:react: "
            "`policy-served` (1); policy:tagged: `policy-served` (1); writer: `writer-served` (1) |") in card
