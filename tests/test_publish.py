"""`hopsmith publish` against a real HTTP server on 127.0.0.1 speaking the Hub's upload API."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from huggingface_hub import constants

from cli.main import main
from pipeline.publish import files_to_publish
from tests.dataset_fixtures import build_fixture_dataset
from tests.servers import LoopbackServer, QuietHandler

SENTINEL = "hf_SENTINEL_publish_token_93b1e7"


class FakeHub(LoopbackServer):
    """The few Hub endpoints `create_repo` + `upload_folder` use; records every request, can refuse commits."""

    def __init__(self, refuse_commit: bool = False, garble_commit: bool = False):
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.refuse_commit = refuse_commit
        self.garble_commit = garble_commit
        self.validated_cards: list[str] = []
        super().__init__(self._handler())
        self.endpoint = self.url

    def _handler(self):
        hub = self

        class Handler(QuietHandler):

            def _send(self, status: int, body: dict) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                hub.requests.append(("GET", self.path, dict(self.headers), b""))
                self._send(200, {})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hub.requests.append(("POST", self.path, {"Authorization": self.headers.get("Authorization")}, body))
                if self.path == "/api/validate-yaml":
                    hub.validated_cards.append(json.loads(body)["content"])
                    return self._send(200, {"errors": [], "warnings": []})
                if self.path == "/api/repos/create":
                    return self._send(200, {"url": f"{hub.endpoint}/datasets/org/name"})
                if "/preupload/" in self.path:
                    files = json.loads(body)["files"]
                    return self._send(200, {"files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})
                if "/commit/" in self.path:
                    if hub.refuse_commit:
                        # a server that echoes the credential back must not make the CLI print it
                        return self._send(403, {"error": f"token {self.headers.get('Authorization')} cannot write"})
                    if hub.garble_commit:
                        # a reply the client cannot parse, quoting the credential: an error no `except` expects
                        return self._send(200, {"commitUrl": f"see {self.headers.get('Authorization')}",
                                                "commitOid": "a" * 40})
                    return self._send(200, {"commitUrl": f"{hub.endpoint}/datasets/org/name/commit/{'a' * 40}",
                                            "commitOid": "a" * 40})
                self._send(404, {"error": "not found"})

        return Handler

    def committed_files(self) -> dict[str, bytes]:
        files = {}
        for method, path, _, body in self.requests:
            if method == "POST" and "/commit/" in path:
                for line in body.decode().splitlines():
                    entry = json.loads(line)
                    if entry["key"] == "file":
                        files[entry["value"]["path"]] = base64.b64decode(entry["value"]["content"])
        return files


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return build_fixture_dataset(tmp_path_factory.mktemp("publish"))


def _publish(dataset: Path, hub: FakeHub, capfd, monkeypatch, *extra: str) -> tuple[int, str]:
    """The real CLI in-process against the fake Hub; returns (exit status, everything written to fd 1 and 2)."""
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)
    capfd.readouterr()
    status = main(["publish", str(dataset), "--repo-id", "org/name", *extra])
    out, err = capfd.readouterr()
    return status, out + err


def test_publish_uploads_every_file_with_the_token_from_the_environment(dataset, capfd, monkeypatch):
    with FakeHub() as hub:
        status, output = _publish(dataset, hub, capfd, monkeypatch, "--private")
    assert status == 0, output
    create = next(r for r in hub.requests if r[1] == "/api/repos/create")
    assert json.loads(create[3])["visibility"] == "private"
    assert {r[2].get("Authorization") for r in hub.requests if r[0] == "POST"} == {f"Bearer {SENTINEL}"}
    committed = hub.committed_files()
    expected = {str(path): (dataset / path).read_bytes() for path in files_to_publish(dataset)}
    assert committed == expected
    assert hub.validated_cards == [(dataset / "README.md").read_text()]
    assert "README.md" in committed and any(p.startswith("data/turns/") for p in committed)
    assert ".pending-key" not in committed
    assert SENTINEL not in output
    assert all(SENTINEL.encode() not in p.read_bytes() for p in dataset.rglob("*") if p.is_file())


def test_a_refused_upload_is_one_clear_line_without_the_token(dataset, capfd, monkeypatch):
    with FakeHub(refuse_commit=True) as hub:
        status, output = _publish(dataset, hub, capfd, monkeypatch)
    assert status == 2
    assert "hopsmith: error: the Hub refused the upload" in output and "Bearer ***" in output
    assert SENTINEL not in output


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_hub_reply_is_one_scrubbed_line(dataset, capfd, monkeypatch, debug):
    """A reply the Hub client fails on in a way nobody anticipated still prints no token, with or without
    `--debug` (which adds the full chained traceback)."""
    with FakeHub(garble_commit=True) as hub:
        status, output = _publish(dataset, hub, capfd, monkeypatch, *(["--debug"] if debug else []))
    assert status == 1, output
    assert SENTINEL not in output
    last = output.strip().splitlines()[-1]
    assert last.startswith("hopsmith: unexpected error: ")
    assert ("Traceback" in output) == debug
    assert [line for line in output.splitlines() if line.startswith("hopsmith:")] == [last]
