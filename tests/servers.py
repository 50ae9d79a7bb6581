"""Real HTTP servers on 127.0.0.1 for tests and benchmarks: an OpenAI-compatible chat endpoint.

The server speaks the wire protocol (`POST /v1/chat/completions`, `POST /v1/responses` for a text reply,
`GET /v1/models`); what it answers comes
from a handler the test supplies, so a test can script 429s, slow answers, invalid JSON or tool calls.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """What every test server's handler shares: keep-alive HTTP/1.1 and no access log on stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


class LoopbackServer:
    """`with Sub(...) as server:` serves `handler_class` on 127.0.0.1 (a free port, `server.url`) for the block;
    subclasses build their handler class and pass it to `__init__`."""

    def __init__(self, handler_class: type[BaseHTTPRequestHandler]):
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@dataclass
class Reply:
    """What the server sends for one request."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    error: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 10
    model: str | None = None  # the model the server reports (default: the one requested)
    reasoning_content: str | None = None  # the reasoning a server's reasoning parser split off (vLLM, SGLang)


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning_content is not None:
        message["reasoning_content"] = reply.reasoning_content
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.get("id", f"call_{i}"),
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call["arguments"], str)
                    else json.dumps(call["arguments"]),
                },
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _response(reply: Reply, model: str) -> dict[str, Any]:
    """The Responses API's shape of a text reply (what `client.responses.create` returns)."""
    text = {"type": "output_text", "text": reply.content or "", "annotations": []}
    return {
        "id": "resp-test",
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "completed",
        "output": [{"type": "message", "id": "msg-test", "role": "assistant", "status": "completed", "content": [text]}],
        "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


class OpenAIServer:
    """`with OpenAIServer(handler) as server:` serves on `server.base_url` until the block ends.

    `handler(request_body) -> Reply` runs on the server's threads; `requests` records every body received.
    `in_flight_peak` records the most requests handled at once.
    """

    def __init__(self, handler: Callable[[dict[str, Any]], Reply]):
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.in_flight_peak = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _make_handler(self):
        server = self

        class Handler(QuietHandler):
            disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.in_flight += 1
                    server.in_flight_peak = max(server.in_flight_peak, server.in_flight)
                try:
                    reply = server.handler(body)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if reply.status != 200:
                    error = {"error": {"message": reply.error or "error", "type": "test", "code": reply.status}}
                    self._send(reply.status, error, reply.headers)
                    return
                shape = _response if self.path.rstrip("/").endswith("/responses") else _completion
                self._send(200, shape(reply, reply.model or body.get("model", "test-model")), reply.headers)

        return Handler

    def __enter__(self) -> OpenAIServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()
