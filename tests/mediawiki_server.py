"""A real HTTP server on 127.0.0.1 speaking enough of the MediaWiki Action API (formatversion=2 JSON).

It answers `action=query` with `prop=revisions|info` for `titles=` (normalisation, missing and invalid
titles, redirect flags, at most `contents_per_response` page contents per response with an
`rvcontinue` continuation) and `list=recentchanges` (namespace, time window, `rctoponly`, `rclimit`
pages with `rccontinue`). A test scripts failures with `fail_next` ("429", "maxlag", "500", API error
bodies); 429 and maxlag carry `Retry-After: retry_after`. Every request's parameters and headers are recorded.

Hostile behaviours, each a real misbehaving server: `reply_next(body)` answers with any JSON value (a
malformed reply); `loop=True` repeats one `continue` token forever; `drip_s` sends the reply one byte every
`drip_s` seconds (`drip_headers` drips the status line and headers too); `overflow_bytes` sends a reply of
that size without a Content-Length, streamed until the client hangs up.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.servers import QuietHandler

_INVALID_TITLE_CHARS = set("<>[]{}|#")


@dataclass
class WikiPage:
    title: str
    content: str
    pageid: int
    revid: int
    timestamp: str
    ns: int = 0

    @property
    def is_redirect(self) -> bool:
        return self.content.lstrip().upper().startswith("#REDIRECT")


@dataclass
class RecentChange:
    title: str
    timestamp: str
    ns: int = 0
    revid: int = 0


@dataclass
class _Json:
    """A scripted reply body sent as it is, whatever JSON value it is."""

    value: Any


@dataclass
class RecordedRequest:
    params: dict[str, str]
    headers: dict[str, str]
    received: float = 0.0  # time.monotonic() when it arrived


def _canonical(title: str) -> str:
    title = " ".join(title.replace("_", " ").split())
    return title[:1].upper() + title[1:]


class MediaWikiServer:
    """`with MediaWikiServer(pages) as wiki:` serves `wiki.url` (an api.php endpoint) until the block ends."""

    def __init__(self, pages: list[WikiPage], recent_changes: list[RecentChange] = (),
                 contents_per_response: int = 50, rc_limit: int = 500, retry_after: str = "0.1",
                 delay_s: float = 0.0, loop: bool = False, drip_s: float = 0.0, drip_headers: bool = False,
                 overflow_bytes: int = 0):
        self.pages = {page.title: page for page in pages}
        self.recent_changes = list(recent_changes)
        self.contents_per_response = contents_per_response
        self.rc_limit = rc_limit
        self.retry_after = retry_after
        self.delay_s = delay_s
        self.loop = loop
        self.drip_s = drip_s
        self.drip_headers = drip_headers
        self.overflow_bytes = overflow_bytes
        self.replies: list[Any] = []
        self.overflow_sent = 0
        self.requests: list[RecordedRequest] = []
        self.failures: list[str] = []
        self.in_flight = 0
        self.in_flight_peak = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/w/api.php"

    def fail_next(self, *kinds: str) -> None:
        """Answer the next requests with these failures, in order: "429", "maxlag", "500", "html" (a 200
        that is not JSON), or the API error bodies "ratelimited" (retryable) and "readonly" (not)."""
        self.failures.extend(kinds)

    def reply_next(self, *bodies: Any) -> None:
        """Answer the next requests with these JSON values as they are (HTTP 200)."""
        self.replies.extend(bodies)

    def answer(self, params: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            failure = self.failures.pop(0) if self.failures else None
            if failure is None and self.replies:
                return 200, _Json(self.replies.pop(0)), {}
        if failure == "429":
            return 429, {"error": {"code": "ratelimited"}}, {"Retry-After": self.retry_after}
        if failure == "500":
            return 500, {}, {}
        if failure == "html":  # what a proxy in front of the wiki may send
            return 200, b"<html><body>Upstream busy</body></html>", {}
        if failure in ("ratelimited", "readonly"):
            return 200, {"error": {"code": failure, "info": f"scripted {failure} error"}}, {}
        if failure == "maxlag":
            error = {"code": "maxlag", "info": "Waiting for db1: 7 seconds lagged", "lag": 7}
            return 200, {"error": error}, {"Retry-After": self.retry_after, "X-Database-Lag": "7"}
        if params.get("format") != "json" or params.get("formatversion") != "2":
            return 200, {"error": {"code": "badformat", "info": "this server speaks formatversion=2 JSON"}}, {}
        if params.get("action") != "query":
            return 200, {"error": {"code": "badvalue", "info": "only action=query"}}, {}
        if params.get("list") == "recentchanges":
            return 200, self._recent_changes(params), {}
        if "titles" in params:
            body = self._revisions(params)
            if self.loop:
                body["continue"] = {"rvcontinue": "0", "continue": "||"}
            return 200, body, {}
        return 200, {"error": {"code": "missingparam", "info": "titles or list required"}}, {}

    def _revisions(self, params: dict[str, str]) -> dict[str, Any]:
        raw = params["titles"]
        titles = raw[1:].split("\x1f") if raw.startswith("\x1f") else raw.split("|")
        if len(titles) > 50:
            return {"error": {"code": "toomanyvalues", "info": "Too many values supplied for titles (limit 50)"}}
        normalized, pages, with_content = [], [], 0
        start = int(params.get("rvcontinue", "0"))
        resume_at: int | None = None  # first page whose content did not fit in this response
        for position, title in enumerate(titles):
            if _INVALID_TITLE_CHARS & set(title):
                pages.append({"title": title, "invalidreason": "contains illegal characters", "invalid": True})
                continue
            canonical = _canonical(title)
            if canonical != title:
                normalized.append({"fromencoded": False, "from": title, "to": canonical})
            page = self.pages.get(canonical)
            if page is None:
                pages.append({"ns": 0, "title": canonical, "missing": True})
                continue
            entry: dict[str, Any] = {"pageid": page.pageid, "ns": page.ns, "title": page.title,
                                     "contentmodel": "wikitext", "lastrevid": page.revid}
            if page.is_redirect:
                entry["redirect"] = True
            if position >= start and with_content < self.contents_per_response:
                with_content += 1
                entry["revisions"] = [{
                    "revid": page.revid,
                    "parentid": page.revid - 1,
                    "timestamp": page.timestamp,
                    "slots": {"main": {"contentmodel": "wikitext", "contentformat": "text/x-wiki",
                                       "content": page.content}},
                }]
            elif position >= start and resume_at is None:
                resume_at = position
            pages.append(entry)
        body: dict[str, Any] = {"batchcomplete": True, "query": {"pages": pages}}
        if normalized:
            body["query"]["normalized"] = normalized
        if resume_at is not None:
            body = {"continue": {"rvcontinue": str(resume_at), "continue": "||"}, "query": body["query"]}
        return body

    def _recent_changes(self, params: dict[str, str]) -> dict[str, Any]:
        start, end = params["rcstart"], params["rcend"]  # rcdir=older: start is the newer bound
        namespaces = {int(ns) for ns in params.get("rcnamespace", "0").split("|")}
        changes = sorted(
            (c for c in self.recent_changes if end <= c.timestamp <= start and c.ns in namespaces),
            key=lambda c: c.timestamp, reverse=True,
        )
        if params.get("rctoponly"):
            latest: dict[str, RecentChange] = {}
            for change in changes:
                latest.setdefault(change.title, change)
            changes = list(latest.values())
        offset = int(params.get("rccontinue", "0"))
        limit = self.rc_limit if params.get("rclimit") in (None, "max") else int(params["rclimit"])
        page = changes[offset : offset + limit]
        body: dict[str, Any] = {"batchcomplete": True, "query": {"recentchanges": [
            {"type": "edit", "ns": c.ns, "title": c.title, "revid": c.revid, "timestamp": c.timestamp}
            for c in page
        ]}}
        if offset + limit < len(changes):
            body["continue"] = {"rccontinue": str(offset + limit), "continue": "-||"}
        return body

    def _make_handler(self):
        server = self

        class Handler(QuietHandler):

            def do_GET(self):
                query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
                params = {key: values[-1] for key, values in query.items()}
                with server._lock:
                    server.requests.append(RecordedRequest(params, dict(self.headers), time.monotonic()))
                    server.in_flight += 1
                    server.in_flight_peak = max(server.in_flight_peak, server.in_flight)
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    status, body, headers = server.answer(params)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if server.overflow_bytes:
                    self._overflow()
                    return
                raw = isinstance(body, bytes)
                payload = body if raw else json.dumps(body.value if isinstance(body, _Json) else body).encode()
                head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}",
                        f"Content-Type: {'text/html' if raw else 'application/json; charset=utf-8'}",
                        f"Content-Length: {len(payload)}", *(f"{k}: {v}" for k, v in headers.items())]
                message = ("\r\n".join(head) + "\r\n\r\n").encode() + payload
                if not server.drip_s:
                    self.wfile.write(message)
                    return
                start = 0 if server.drip_headers else message.index(b"\r\n\r\n") + 4
                self.wfile.write(message[:start])
                self._drip(message[start:])

            def _drip(self, data: bytes) -> None:
                try:
                    for position in range(len(data)):
                        self.wfile.write(data[position : position + 1])
                        self.wfile.flush()
                        time.sleep(server.drip_s)
                except OSError:  # the client gave up: what a deadline is for
                    self.close_connection = True

            def _overflow(self) -> None:
                self.close_connection = True
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
                chunk = b'{"query": {"pages": [' + b" " * (1 << 16)
                try:
                    for _ in range(server.overflow_bytes // len(chunk)):
                        self.wfile.write(chunk)
                        server.overflow_sent += len(chunk)
                except OSError:
                    pass

        return Handler

    def __enter__(self) -> MediaWikiServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
