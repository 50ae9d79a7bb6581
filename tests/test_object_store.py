"""A dump on an S3-compatible object store (moto's server on 127.0.0.1): extract reads it through Beam's
filesystems, checksums it streamed from the store, and writes the same shards as from the local file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.io import read_manifest, sha256_file

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")
pytestmark = pytest.mark.scale

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
FILES = ("enwiki-sample-pages-articles-multistream.xml.bz2", "enwiki-sample-pages-articles-multistream-index.txt.bz2")


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


def _shards(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.glob("*/*.parquet"))}


def test_extract_reads_a_dump_from_object_storage(bucket, tmp_path):
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["extract", "--dump", str(SAMPLE / FILES[0]), "--index", str(SAMPLE / FILES[1]), "--out", str(local)]) == 0
    assert main(["extract", "--dump", f"{bucket}/{FILES[0]}", "--index", f"{bucket}/{FILES[1]}", "--out", str(remote)]) == 0
    inputs = read_manifest(remote).inputs
    assert [i.path for i in inputs] == [f"{bucket}/{name}" for name in FILES]
    assert [i.sha256 for i in inputs] == [sha256_file(SAMPLE / name) for name in FILES]
    assert [i.bytes for i in inputs] == [(SAMPLE / name).stat().st_size for name in FILES]
    assert _shards(remote) == _shards(local) and _shards(local)
