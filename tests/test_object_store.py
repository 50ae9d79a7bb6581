"""Stages on an S3-compatible object store (moto's server on 127.0.0.1), through Beam's filesystems.

Extract reads a dump from the store, checksummed streamed. Extract, walk and the whole dataset write their
outputs under `s3://` with the same bytes as a local run; a run killed mid-stage resumes there per work
unit to identical shards; an object no manifest lists (an uncommitted temporary shard, a foreign file) is
never read, and a rerun removes only what hopsmith wrote; the lock object guards the output folder.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from cli.main import main
from extract.units import UNIT_TABLES
from ground import storage
from ground.folder_lock import LOCK, FolderBusy, lock_folder, unlock_folder
from ground.io import WorkUnits, parquet_file, read_manifest, read_table, sha256_file
from ground.stage import begin_stage
from ground.storage import as_path, readable_folder, remove_tree
from pipeline.dataset import STAGE_FOLDERS
from pipeline.validate import validate_dataset
from schemas.wiki import Entity

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")
pytestmark = pytest.mark.scale

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
FILES = ("enwiki-sample-pages-articles-multistream.xml.bz2", "enwiki-sample-pages-articles-multistream-index.txt.bz2")
DUMP_ARGS = ["--dump", str(SAMPLE / FILES[0]), "--index", str(SAMPLE / FILES[1])]
SMALL_CONFIG = ROOT / "tests" / "data" / "dataset_small.toml"


@pytest.fixture
def bucket(monkeypatch):
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    for name, value in (("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}"), ("AWS_ACCESS_KEY_ID", "testing"),
                        ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    client.create_bucket(Bucket="wiki")
    for name in FILES:
        client.upload_file(str(SAMPLE / name), "wiki", name)
    yield "s3://wiki"
    server.stop()


def _modified(prefix: str) -> dict[str, object]:
    """Every object under `s3://wiki/<prefix>/` and when it was last written, straight from the store."""
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket="wiki", Prefix=f"{prefix}/")
    return {item["Key"].removeprefix(f"{prefix}/"): item["LastModified"] for page in pages
            for item in page.get("Contents", [])}


def _keys(prefix: str) -> list[str]:
    return sorted(_modified(prefix))


def _put(key: str, body: bytes) -> None:
    boto3.client("s3").put_object(Bucket="wiki", Key=key, Body=body)


def _committed(folder) -> dict[str, str]:
    """sha256 of every parquet file the stage's manifest lists (local folder or s3:// URL)."""
    manifest = read_manifest(folder)
    assert manifest is not None, f"{folder} is not finished"
    listed = sorted(path for paths in manifest.outputs.values() for path in paths if path.endswith(".parquet"))
    return {path: sha256_file(as_path(folder) / path) for path in listed}


def _shards(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.glob("*/*.parquet"))}


def test_extract_reads_a_dump_from_object_storage(bucket, tmp_path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["extract", *DUMP_ARGS, "--out", str(local)]) == 0
    assert main(["extract", "--dump", f"{bucket}/{FILES[0]}", "--index", f"{bucket}/{FILES[1]}", "--out", str(remote)]) == 0
    inputs = read_manifest(remote).inputs
    assert [i.path for i in inputs] == [f"{bucket}/{name}" for name in FILES]
    assert [i.sha256 for i in inputs] == [sha256_file(SAMPLE / name) for name in FILES]
    assert [i.bytes for i in inputs] == [(SAMPLE / name).stat().st_size for name in FILES]
    assert _shards(remote) == _shards(local) and _shards(local)


def test_extract_and_walk_write_to_object_storage_and_read_only_committed_shards(bucket, tmp_path):
    local, remote = tmp_path, f"{bucket}/run"
    for out in (str(local), remote):
        assert main(["extract", *DUMP_ARGS, "--out", f"{out}/graph"]) == 0
    graph = _committed(f"{remote}/graph")
    assert graph == _committed(local / "graph") and any(p.startswith("entities/") for p in graph)
    keys = _keys("run/graph")
    assert LOCK not in keys and ".pending-key" not in keys  # released and finished
    assert not [k for k in keys if k.endswith(".tmp") or k.startswith("parts/")]

    # objects no manifest lists: a second copy of an entity shard (read, it would duplicate every entity),
    # a temporary shard a killed writer left, a file of the user's
    shard = boto3.client("s3").get_object(Bucket="wiki", Key="run/graph/entities/part-00000-of-00004.parquet")
    _put("run/graph/entities/part-00000-of-00001.parquet", shard["Body"].read())
    _put("run/graph/relations/.part-00000-of-00004.parquet.0123abcd.tmp", b"half a shard")
    _put("run/graph/NOTES.txt", b"the user's own notes")
    entities = read_table(Entity, f"{remote}/graph/entities")
    assert entities.num_rows == read_manifest(f"{remote}/graph").counts["kept"]
    assert entities.num_rows == read_table(Entity, local / "graph" / "entities").num_rows

    for out in (str(local), remote):
        assert main(["walk", "--graph", f"{out}/graph", "--out", f"{out}/paths"]) == 0
    assert _committed(f"{remote}/paths") == _committed(local / "paths")

    # a rerun with another key starts afresh: it removes what the stage wrote, keeps the user's file
    run = begin_stage("extract", f"{remote}/graph", {"another": "config"})
    assert _keys("run/graph") == [".hopsmith.lock", ".pending-key", "NOTES.txt"]
    assert run.foreign == ("NOTES.txt",)
    unlock_folder(run.out_dir)
    assert LOCK not in _keys("run/graph")


def test_killed_extract_resumes_on_object_storage(bucket, tmp_path):
    args = ["extract", *DUMP_ARGS, "--streams-per-unit", "1"]
    fresh, resumed = tmp_path / "fresh", f"{bucket}/resumed"
    assert main([*args, "--out", str(fresh)]) == 0
    units = read_manifest(fresh).work_units["units"]

    process = subprocess.Popen([sys.executable, "-m", "cli.main", *args, "--out", resumed],
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while process.poll() is None and not _finished_units("resumed") and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert read_manifest(resumed) is None, "the run finished before it could be killed"
    lock = json.loads(boto3.client("s3").get_object(Bucket="wiki", Key=f"resumed/{LOCK}")["Body"].read())
    assert lock["pid"] == process.pid  # the killed run's lock stays, and is stale: its process is gone
    parts = WorkUnits(resumed, UNIT_TABLES)
    done = {p.stem for p in parts.table_folder("stats").glob("*.parquet") if parts.is_done(p.stem)}
    assert 1 <= len(done) < units and done == _finished_units("resumed")
    _put("resumed/parts/entities/.bytes-000000000000000-end.parquet.dead0001.tmp", b"an upload cut short")

    assert main([*args, "--out", resumed]) == 0
    assert read_manifest(resumed).work_units == {"units": units, "extracted": units - len(done), "reused": len(done)}
    assert _committed(resumed) == _committed(fresh)
    assert not [k for k in _keys("resumed") if k.endswith(".tmp") or k.startswith("parts/") or k == LOCK]


def _finished_units(folder: str) -> set[str]:
    """Extract units whose part exists in every table (listed straight from the store)."""
    by_table: dict[str, set[str]] = {table: set() for table in UNIT_TABLES}
    for key in _keys(f"{folder}/parts"):
        table, _, name = key.partition("/")
        if table in by_table and name.endswith(".parquet") and not name.startswith("."):
            by_table[table].add(name.removesuffix(".parquet"))
    return set.intersection(*by_table.values())


def _committed_parts(prefix: str) -> dict[str, object]:
    """The part files under the prefix, without the temporary ones (`.NAME.<uuid>.tmp`) an upload leaves."""
    return {key: when for key, when in _modified(prefix).items() if not key.startswith(".")}


def _small_config(tmp_path: Path) -> Path:
    """The end-to-end tests' small config, with one question per trajectory unit (so there are several)."""
    path = tmp_path / "small.toml"
    path.write_text(SMALL_CONFIG.read_text() + "questions_per_unit = 1\n")  # the file ends in [trajectories]
    return path


@pytest.mark.timeout(900)  # three runs of the whole pipeline, two of them on S3
def test_killed_dataset_run_resumes_on_object_storage_to_identical_shards(bucket, tmp_path, capsys):
    config = _small_config(tmp_path)
    local, remote = tmp_path / "local", f"{bucket}/ds"
    assert main(["dataset", "--config", str(config), "--out", str(local)]) == 0
    _put("small.toml", config.read_bytes())
    config = f"{bucket}/small.toml"  # the config file too may lie on the store

    process = subprocess.Popen([sys.executable, "-m", "cli.main", "dataset", "--config", config,
                                "--out", remote], env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = "ds/trajectories/parts/trajectories"
    deadline = time.monotonic() + 400
    while process.poll() is None and not _committed_parts(parts) and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert read_manifest(f"{remote}/trajectories") is None, "the run finished before it could be killed"
    finished = _committed_parts(parts)
    assert finished

    assert main(["dataset", "--config", config, "--out", remote]) == 0
    after = _modified(parts)
    assert not [key for key in after if key.endswith(".tmp")]  # an upload the kill cut short is removed
    assert len(after) > len(finished) and {k: after[k] for k in finished} == finished  # finished units kept
    for stage, folder in STAGE_FOLDERS.items():
        assert _committed(f"{remote}/{folder}") == _committed(local / folder), stage
    for name in ("README.md", "checksums.sha256"):
        assert as_path(f"{remote}/dataset/{name}").read_bytes() == (local / "dataset" / name).read_bytes()
    report = validate_dataset(f"{remote}/dataset")
    assert report.errors == [] and report.rows == validate_dataset(local / "dataset").rows

    # the report commands read a run on the store as they read a local one
    for command in (["question-report", "{out}", "--json"], ["graph-stats", "{out}/graph", "--json"],
                    ["critic-report", "--judged", "{out}/judged", "--json", "{out}/critic-report.json"]):
        printed = {}
        for out in (str(local), remote):
            capsys.readouterr()
            assert main([part.format(out=out) for part in command]) == 0, command
            printed[out] = capsys.readouterr().out
        assert printed[remote] == printed[str(local)].replace(str(local), remote) and printed[remote], command
    written = as_path(f"{remote}/critic-report.json").read_text()
    assert written == (local / "critic-report.json").read_text().replace(str(local), remote)


def test_lock_object_guards_an_output_folder_on_object_storage(bucket):
    folder, key = f"{bucket}/locked", f"locked/{LOCK}"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        _put(key, json.dumps({"run_id": "other", "host": socket.gethostname(), "pid": sleeper.pid}).encode())
        with pytest.raises(FolderBusy, match="in use by another hopsmith run"):
            lock_folder(folder)  # its run is alive
    finally:
        sleeper.kill()
        sleeper.wait()
    lock_folder(folder)  # its process is gone: the lock is stale, taken over
    assert json.loads(as_path(f"{folder}/{LOCK}").read_text())["pid"] == os.getpid()
    unlock_folder(folder)
    assert _keys("locked") == []

    _put(key, json.dumps({"run_id": "far", "host": "another-host", "pid": 1}).encode())
    with pytest.raises(FolderBusy, match=f"delete {folder}/{LOCK}"):  # no way to tell from here: refused
        lock_folder(folder)


def test_listings_match_by_folder_one_level_at_a_time(bucket, monkeypatch):
    for key in ("out/shard-1/a.parquet", "out/shard-1/sub/b.parquet", "out/shard-1/sub/deep/c.parquet",
                "out/shard-10/d.parquet", "out/shard-1.parquet", "out/shard-1x", "out/"):
        _put(key, b"x")
    folder = as_path(f"{bucket}/out/shard-1")
    assert folder.is_dir() and not as_path(f"{bucket}/out/shard-2").is_dir()
    assert [p.name for p in folder.rglob("*.parquet")] == ["a.parquet", "b.parquet", "c.parquet"]

    def whole_prefix(self, limit=None):
        raise AssertionError(f"listed all of {self} for one level")

    with monkeypatch.context() as patch:
        patch.setattr(type(folder), "_objects", whole_prefix)  # S3 listings of one level use the delimiter
        assert [str(p) for p in folder.iterdir()] == [f"{bucket}/out/shard-1/a.parquet", f"{bucket}/out/shard-1/sub"]
        assert [p.name for p in as_path(f"{bucket}/out").iterdir()] == ["shard-1", "shard-1.parquet", "shard-10",
                                                                       "shard-1x"]
        assert folder.glob("*.parquet") == [folder / "a.parquet"]
        assert folder.glob("*/*.parquet") == [folder / "sub" / "b.parquet"]
        assert as_path(f"{bucket}/out").glob("shard-1*/*.parquet") == [folder / "a.parquet",
                                                                        as_path(f"{bucket}/out/shard-10/d.parquet")]
        assert as_path(f"{bucket}/nothing").glob("*") == [] and list(as_path(f"{bucket}/nothing").iterdir()) == []

    remove_tree(folder)
    assert _keys("out") == ["", "shard-1.parquet", "shard-10/d.parquet", "shard-1x"]


def test_readable_folder_downloads_once_per_manifest_and_stays_bounded(bucket, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    downloads = []
    fetch = storage._download
    monkeypatch.setattr(storage, "_download", lambda path, local: (downloads.append(str(path)), fetch(path, local)))
    _put("index/manifest.json", b'{"key": "one"}')
    _put("index/bm25_body/data.npy", b"first")
    folder = as_path(f"{bucket}/index/bm25_body")
    first = readable_folder(folder)
    assert (first / "data.npy").read_bytes() == b"first" and first.parent == tmp_path / storage.DOWNLOAD_CACHE
    assert readable_folder(folder) == first and len(downloads) == 1  # unchanged: a hit, nothing downloaded

    _put("index/bm25_body/data.npy", b"second")  # the stage rebuilt: new files, then its new manifest
    _put("index/manifest.json", b'{"key": "two"}')
    second = readable_folder(folder)
    assert second != first and (second / "data.npy").read_bytes() == b"second" and len(downloads) == 2
    assert first.is_dir()  # within the budget: the older entry stays

    monkeypatch.setenv(storage.CACHE_BYTES_ENV, "8")  # room for one entry: the least recently used goes
    readable_folder(as_path(f"{bucket}/index"))
    assert not first.is_dir() and not second.is_dir() and len(downloads) == 3
    assert [p.name for p in (tmp_path / storage.DOWNLOAD_CACHE).iterdir()] == [
        p.name for p in [readable_folder(as_path(f"{bucket}/index"))]] and len(downloads) == 3

    _put("loose/file.bin", b"no stage wrote me")  # no manifest covers it: downloaded on every call
    assert readable_folder(as_path(f"{bucket}/loose")) != readable_folder(as_path(f"{bucket}/loose"))
    assert len(downloads) == 5


def _upload(folder: Path, prefix: str) -> None:
    client = boto3.client("s3")
    for file in sorted(folder.rglob("*")):
        if file.is_file():
            client.upload_file(str(file), "wiki", f"{prefix}/{file.relative_to(folder).as_posix()}")


@pytest.fixture
def rl_dataset(bucket, tmp_path, monkeypatch):
    """The RL tests' dataset folder and search index, local and uploaded under `s3://wiki/rl-run/`."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the download cache too
    from synth.environment import build_index
    from tests.rl_fixtures import make_dataset
    from tests.trajectory_fixtures import make_graph

    root = tmp_path / "rl-run"
    index = build_index(make_graph(tmp_path / "graph"), root / "index")
    make_dataset(root / "dataset", environment=index.key)
    _upload(root, "rl-run")
    return root, f"{bucket}/rl-run"


def test_rl_trains_from_and_into_object_storage_and_resumes_there(rl_dataset, tmp_path, monkeypatch):
    pytest.importorskip("accelerate")
    from rl import train
    from rl.train import run_rl
    from tests.rl_fixtures import fast_config

    root, remote = rl_dataset
    local = run_rl(root / "dataset", tmp_path / "rl", fast_config(index_dir=str(root / "index")))
    config = fast_config()  # the index: beside the dataset, on the store
    manifest = run_rl(f"{remote}/dataset", f"{remote}/out", config)
    assert manifest.counts == local.counts and manifest.counts["online_steps"] == 1
    assert [i.sha256 for i in manifest.inputs] == [i.sha256 for i in local.inputs] and manifest.inputs
    assert manifest.inputs[0].path.startswith(f"{remote}/dataset/data/trajectories/")
    weights = "checkpoint/model.safetensors"
    assert sha256_file(f"{remote}/out/{weights}") == sha256_file(tmp_path / "rl" / weights)
    keys = _keys("rl-run/out")
    assert {"manifest.json", "metrics-offline.jsonl", "phases/offline/done.json", "tokenizer/tokenizer.json"} <= set(keys)
    assert not [k for k in keys if k.startswith(".")]  # no lock, no pending marker, no temporary

    # killed during the online phase: no manifest, the offline phase finished on the store
    boto3.client("s3").delete_object(Bucket="wiki", Key="rl-run/out/manifest.json")
    _put("rl-run/out/.pending-key", f"{manifest.key}\n".encode())
    for key in keys:
        if key.startswith(("phases/online/", "checkpoint/", "metrics-online")):
            boto3.client("s3").delete_object(Bucket="wiki", Key=f"rl-run/out/{key}")
    before = _modified("rl-run/out/phases/offline")
    monkeypatch.setattr(train, "train_offline", lambda *args: pytest.fail("the finished offline phase ran again"))
    resumed = run_rl(f"{remote}/dataset", f"{remote}/out", config)
    assert resumed.counts == manifest.counts and _modified("rl-run/out/phases/offline") == before
    assert sha256_file(f"{remote}/out/{weights}") == sha256_file(tmp_path / "rl" / weights)


def test_export_verl_reads_a_dataset_on_object_storage(rl_dataset, tmp_path, capsys):
    root, remote = rl_dataset
    index = str(root / "index")
    assert main(["rl", "export-verl", "--shards", str(root / "dataset"), "--out", str(tmp_path / "verl"),
                 "--index", index]) == 0
    assert main(["rl", "export-verl", "--shards", f"{remote}/dataset", "--out", f"{remote}/verl"]) == 2
    assert "--run-dir" in capsys.readouterr().err  # verl reads local files: where will the export lie?
    assert main(["rl", "export-verl", "--shards", f"{remote}/dataset", "--out", f"{remote}/verl", "--index", index,
                 "--run-dir", str(tmp_path / "verl")]) == 0
    exported = sorted(p.relative_to(tmp_path / "verl").as_posix() for p in (tmp_path / "verl").rglob("*")
                      if p.is_file() and p.name != "manifest.json" and not p.name.startswith("."))
    assert "data/train.parquet" in exported and "questions.parquet" in exported
    assert [k for k in _keys("rl-run/verl") if k != "manifest.json"] == exported
    for name in exported:  # the same bytes: parquet rows, configs naming the run folder, launch script
        assert sha256_file(f"{remote}/verl/{name}") == sha256_file(tmp_path / "verl" / name), name

    # the index beside the dataset on the store by default: verl's tools download it from there
    assert main(["rl", "export-verl", "--shards", f"{remote}/dataset", "--out", f"{remote}/verl-2",
                 "--run-dir", "/data/verl"]) == 0
    rows = parquet_file(f"{remote}/verl-2/data/train.parquet").read().to_pylist()
    assert {r["extra_info"]["tools_kwargs"]["search"]["create_kwargs"]["index_dir"] for r in rows} == {
        f"{remote}/index"}
    config = yaml.safe_load(as_path(f"{remote}/verl-2/hopsmith_turn_grpo.yaml").read_text())
    assert config["data"]["train_files"] == "/data/verl/data/train.parquet"


@pytest.fixture
def gcs_bucket(monkeypatch):
    """gcp-storage-emulator on 127.0.0.1 with the sample dump in `gs://wiki`, reached through Beam's GCS
    filesystem (google-cloud-storage honours STORAGE_EMULATOR_HOST; without credentials Beam connects
    anonymously)."""
    emulator = pytest.importorskip("gcp_storage_emulator.server")
    pytest.importorskip("apache_beam.io.gcp.gcsio")  # Beam's GCS filesystem: google-cloud-storage
    from google.cloud import storage as gcs

    logging.getLogger("gcp_storage_emulator").setLevel(logging.ERROR)  # a warning per response otherwise
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket="wiki")
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # google-auth never probes a metadata server
    bucket = gcs.Client.create_anonymous_client().bucket("wiki")
    for name in FILES:
        bucket.blob(name).upload_from_filename(str(SAMPLE / name))
    yield "gs://wiki"
    server.stop()


def test_extract_and_walk_on_gcs_through_an_emulator(gcs_bucket, tmp_path, monkeypatch):
    local, remote = tmp_path, f"{gcs_bucket}/run"
    dumps = {str(local): DUMP_ARGS,
             remote: ["--dump", f"{gcs_bucket}/{FILES[0]}", "--index", f"{gcs_bucket}/{FILES[1]}"]}
    for out, dump in dumps.items():
        assert main(["extract", *dump, "--out", f"{out}/graph"]) == 0
        assert main(["walk", "--graph", f"{out}/graph", "--out", f"{out}/paths"]) == 0
    assert [i.sha256 for i in read_manifest(f"{remote}/graph").inputs] == [sha256_file(SAMPLE / n) for n in FILES]
    graph = _committed(f"{remote}/graph")
    assert graph == _committed(local / "graph") and any(p.startswith("entities/") for p in graph)
    assert _committed(f"{remote}/paths") == _committed(local / "paths")
    folder = as_path(f"{remote}/graph")
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp") or "parts" in str(p)]

    def whole_prefix(self, limit=None):
        raise AssertionError(f"listed all of {self} for one level")

    monkeypatch.setattr(type(folder), "_objects", whole_prefix)  # one level: a delimiter listing on GCS too
    assert "entities" in [p.name for p in folder.iterdir()] and folder.glob("entities/*.parquet")


def test_damaged_objects_of_a_finished_stage_are_named_and_rebuilt(bucket, tmp_path, caplog):
    """On object storage as on a disk: a reader names a truncated shard, a parquet object fetched whole or a
    downloaded index file whose checksum differs is refused, and a rerun of the stage rebuilds it."""
    from ground.errors import DamagedOutput
    from ground.io import file_digest, forget_verified, read_records
    from schemas.environment import IndexedPage
    from synth.environment import build_index
    from tests.trajectory_fixtures import make_graph

    remote = f"{bucket}/damaged"
    graph = make_graph(tmp_path / "graph")
    _upload(graph, "damaged/graph")
    build_index(f"{remote}/graph", f"{remote}/index")
    manifest = read_manifest(f"{remote}/index")
    shard = next(name for name in manifest.files if name.startswith("pages/"))
    body = next(name for name in manifest.files if name.startswith("bm25_body/"))
    data = boto3.client("s3").get_object(Bucket="wiki", Key=f"damaged/index/{shard}")["Body"].read()

    _put(f"damaged/index/{shard}", data[: len(data) // 2])
    with pytest.raises(DamagedOutput, match=f"stage 'index': {remote}/index/{shard} has"):
        list(read_records(IndexedPage, f"{remote}/index/pages"))
    flipped = data[:100] + bytes([data[100] ^ 1]) + data[101:]
    _put(f"damaged/index/{shard}", flipped)
    with pytest.raises(DamagedOutput, match="does not match its manifest's checksum"):
        list(read_records(IndexedPage, f"{remote}/index/pages"))
    _put(f"damaged/index/{body}", b"not an index")
    with pytest.raises(DamagedOutput, match=f"stage 'index': {remote}/index/{body}"):
        readable_folder(as_path(f"{remote}/index/bm25_body"))

    forget_verified()  # a new run (as a new process would be)
    with caplog.at_level(logging.WARNING, logger="ground.stage"):
        rebuilt = build_index(f"{remote}/graph", f"{remote}/index")
    assert f"{remote}/index/{body}" in caplog.text and f"{remote}/index/{shard}" in caplog.text
    assert rebuilt.key == manifest.key and rebuilt.files == manifest.files
    assert file_digest(f"{remote}/index/{shard}") == manifest.files[shard]
