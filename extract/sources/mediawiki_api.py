"""Read pages' latest revisions from the MediaWiki Action API, politely, as plain iterators (Beam: `ReadFromApi`).

Two ways to choose pages: a list of titles, or the main-namespace pages changed in the last N days
(`list=recentchanges`, which only reaches back 30 days). Revisions come from
`prop=revisions|info&rvprop=ids|timestamp|content&rvslots=main&formatversion=2`, 50 titles a request.
Etiquette (https://www.mediawiki.org/wiki/API:Etiquette): a descriptive User-Agent with a contact,
`maxlag=5` on every request, `Retry-After` honoured on HTTP 429/503 and on `maxlag` errors, a few requests
in flight at most, and continuation by merging the whole `continue` object into the next request.
Redirect pages become `Page(redirect_to=...)` records, as in a dump, and their targets are fetched too
(chains followed), so extraction resolves redirects the same way for both sources. Titles that do not
exist, are invalid, or could not be fetched after bounded retries become SkippedRecords.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import importlib.metadata
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ground.errors import UserError
from schemas.base import utc
from schemas.wiki import Page, SkippedRecord, bounded_id, invalid_detail

log = logging.getLogger(__name__)

SKIP_REASONS = {
    "missing_page": "the wiki has no page of that title",
    "invalid_title": "the title is empty, has illegal characters or an interwiki prefix",
    "missing_field": "no revision or no content came back (hidden revision, redirect without a target)",
    "invalid_field": "a returned field does not validate",
    "api_error": "the request failed for good (a non-transient API error)",
    "api_unavailable": "the request kept failing (timeouts, 5xx, 429) until its retries ran out: transient, so the "
    "extract stage does not finish and a rerun fetches again",
    "api_deadline": "the server did not finish its reply within the request deadline (a stalled or dripping reply)",
    "api_oversized": "the reply was larger than the response size cap",
    "api_loop": "the server repeated a continuation or sent more replies to one query than the bound allows",
    "malformed_reply": "the reply's structure is not the API's (an entry without its title or `from`, "
    "`query` not an object, ...); the titles it concerned are skipped",
}
TITLES_PER_REQUEST = 50
RECENT_CHANGES_MAX_DAYS = 30
DEFAULT_CONTACT = "https://github.com/hopsmith"
MAX_REDIRECT_DEPTH = 5
RETRYABLE_API_ERRORS = ("maxlag", "ratelimited")
_REDIRECT_TARGET = re.compile(r"^\s*#[^\[\n]*\[\[\s*:?([^\]|#\n]+)")
_SLOTS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


class ApiError(Exception):
    """A request that failed for good; `reason` is the SKIP_REASONS key its titles are skipped with."""

    def __init__(self, message: str, reason: str = "api_error"):
        super().__init__(message)
        self.reason = reason


class MalformedReply(ApiError):
    """A reply whose shape is not the API's."""

    def __init__(self, message: str):
        super().__init__(message, "malformed_reply")


def user_agent() -> str:
    """`hopsmith/<version> (<contact>) requests/<version>`; the contact comes from HOPSMITH_CONTACT."""
    try:
        version = importlib.metadata.version("hopsmith")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    contact = os.environ.get("HOPSMITH_CONTACT") or DEFAULT_CONTACT
    return f"hopsmith/{version} ({contact}) requests/{requests.__version__}"


@dataclass(frozen=True)
class ApiSettings:
    """How to talk to one wiki's `api.php`. Picklable, so Beam workers build their own client from it."""

    url: str
    maxlag: int = 5
    max_in_flight: int = 3
    max_retries: int = 5
    backoff_s: float = 1.0
    max_wait_s: float = 300.0
    timeout_s: float = 60.0  # connect and per-read timeout
    deadline_s: float = 120.0  # the whole request, headers and body: a dripping server cannot hold it longer
    max_response_bytes: int = 64 << 20  # decoded reply size cap (a 50-title batch of large pages is ~10 MB)
    min_interval_s: float = 0.05  # pacing: at least this long between request starts, per API per process
    max_query_responses: int = 10_000  # replies one continued query may take (recent changes: 500 titles each)
    follow_redirects: bool = True


def _slots(settings: ApiSettings) -> threading.BoundedSemaphore:
    """One in-flight bound per API per process, shared by every client (and Beam thread) in it."""
    with _SLOTS_LOCK:
        key = (settings.url, settings.max_in_flight)
        if key not in _SLOTS:
            _SLOTS[key] = threading.BoundedSemaphore(settings.max_in_flight)
        return _SLOTS[key]


class _Pacer:
    """Spaces request starts to one API at least `interval` seconds apart, across the threads of a process."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next_start = 0.0

    def wait(self, interval: float) -> None:
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_start)
            self.next_start = start + interval
        if start > now:
            time.sleep(start - now)


_PACERS: dict[str, _Pacer] = {}


def _pacer(url: str) -> _Pacer:
    with _SLOTS_LOCK:
        return _PACERS.setdefault(url, _Pacer())


class _Watchdog:
    """Shuts the request's socket down when its deadline passes, so a reply that drips bytes (each read
    within the per-read timeout) still ends: the blocked read fails and the request is reported as late."""

    def __init__(self, seconds: float):
        self.fired = False
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._done = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def attach(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                self._shutdown()

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                self.fired = True
                self._shutdown()

    def _shutdown(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> _Watchdog:
        _WATCHED.current = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()
        _WATCHED.current = None


_WATCHED = threading.local()


class _WatchedConnection:
    """Hands the connection's socket to the thread's running `_Watchdog` before waiting for the reply."""

    def getresponse(self, *args, **kwargs):
        watchdog = getattr(_WATCHED, "current", None)
        if watchdog is not None:
            watchdog.attach(self.sock)
        return super().getresponse(*args, **kwargs)


class _WatchedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = type("WatchedHTTPConnection", (_WatchedConnection, urllib3.connection.HTTPConnection), {})


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = type("WatchedHTTPSConnection", (_WatchedConnection, urllib3.connection.HTTPSConnection), {})


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter whose connections can be cut by a `_Watchdog`."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


def _read_capped(response: requests.Response, cap: int) -> bytes:
    """The decoded body, or ApiError(api_oversized) as soon as it passes `cap` bytes (never held whole)."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > cap:
        raise ApiError(f"reply of {int(declared)} bytes declared, over the {cap}-byte cap", "api_oversized")
    body = bytearray()
    for chunk in response.iter_content(1 << 16):
        body += chunk
        if len(body) > cap:
            raise ApiError(f"reply passed the {cap}-byte cap", "api_oversized")
    return bytes(body)


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the other form allowed by RFC 9110: an HTTP date
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (utc(when) - dt.datetime.now(dt.UTC)).total_seconds())


def batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _ordered_parallel(function: Callable, items: Iterable, workers: int) -> Iterator:
    """`map(function, items)` on `workers` threads, in order, with at most 2*workers results pending."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: list[Future] = []
        for item in items:
            pending.append(pool.submit(function, item))
            if len(pending) >= 2 * workers:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()


def _multi_value(values: list[str]) -> str:
    """A multi-value parameter: `a|b`, or `\x1fa\x1fb` when a value holds `|` (MediaWiki's alternative)."""
    if any("|" in value for value in values):
        return "\x1f" + "\x1f".join(values)
    return "|".join(values)


def normalise_title(title: str) -> str:
    """The API's canonical form for comparison: underscores as spaces, trimmed, first letter upper-cased."""
    title = " ".join(title.replace("_", " ").split())
    return title[:1].upper() + title[1:]


class MediaWikiApi:
    """A client for one wiki. `sleep` (retry waits) is injectable so tests can observe waits without waiting;
    pacing between requests (`min_interval_s`) always sleeps for real."""

    def __init__(self, settings: ApiSettings, session: requests.Session | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        check_api_url(settings.url)
        self.settings = settings
        self.session = session or requests.Session()
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, _DeadlineAdapter())
        self.session.headers["User-Agent"] = user_agent()
        self.sleep = sleep

    def get(self, params: dict[str, Any]) -> dict[str, Any]:
        """One API call with etiquette parameters and bounded retries; the decoded JSON body."""
        params = {"format": "json", "formatversion": "2", "maxlag": str(self.settings.maxlag), **params}
        problem = ""
        for attempt in range(self.settings.max_retries + 1):
            outcome = self._attempt(params, backoff=self.settings.backoff_s * 2**attempt)
            if isinstance(outcome, dict):
                return outcome
            problem, wait = outcome
            if attempt < self.settings.max_retries:
                log.info("API request failed (%s); retrying in %.1f s", problem, wait)
                self.sleep(min(wait, self.settings.max_wait_s))
        reason = "api_deadline" if "deadline" in problem else "api_unavailable"
        raise ApiError(f"gave up after {self.settings.max_retries + 1} attempts: {problem}", reason)

    def _attempt(self, params: dict[str, Any], backoff: float) -> dict[str, Any] | tuple[str, float]:
        """One request: the body, or (problem, seconds to wait) when worth retrying; ApiError otherwise.
        The request as a whole (connect, headers, body) ends within `deadline_s`, its body within
        `max_response_bytes`."""
        settings = self.settings
        try:
            with _slots(settings):
                _pacer(settings.url).wait(settings.min_interval_s)
                with _Watchdog(settings.deadline_s) as watchdog:
                    try:
                        with self.session.get(settings.url, params=params, timeout=settings.timeout_s,
                                              stream=True) as response:
                            status, retry_after = response.status_code, _retry_after(response)
                            payload = _read_capped(response, settings.max_response_bytes) if status < 400 else b""
                    except requests.RequestException:
                        if watchdog.fired:
                            return f"no complete reply within the {settings.deadline_s:g}s deadline", backoff
                        raise
        except requests.RequestException as error:
            return f"{type(error).__name__}: {error}", backoff
        if status in (429, 503):
            return f"HTTP {status}", backoff if retry_after is None else retry_after
        if status >= 500:
            return f"HTTP {status}", backoff
        if status >= 400:
            raise ApiError(f"HTTP {status} from {settings.url}")
        try:
            body = json.loads(payload)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return "response is not a JSON object", backoff
        error = body.get("error")
        if not error:
            if "warnings" in body:
                log.warning("API warnings: %s", str(body["warnings"])[:500])
            return body
        if not isinstance(error, dict):
            raise ApiError(f"API error (not an object): {str(error)[:200]}")
        code, info = error.get("code"), error.get("info", "")
        if code not in RETRYABLE_API_ERRORS:
            raise ApiError(f"API error {code}: {info}")
        return f"{code}: {info}", retry_after if retry_after is not None else _seconds(error.get("lag"), backoff)

    def query(self, params: dict[str, Any], max_responses: int | None = None) -> Iterator[dict[str, Any]]:
        """Every response of an `action=query`, following continuation to the end. A continuation the
        server gave before (it would loop forever), or more than `max_responses` replies, is ApiError."""
        limit = max_responses or self.settings.max_query_responses
        continuation: dict[str, Any] = {}
        seen: set[str] = set()
        for _ in range(limit):
            body = self.get({"action": "query", **params, **continuation})
            yield body
            if "continue" not in body:
                return
            continuation = body["continue"]
            if not isinstance(continuation, dict):
                raise MalformedReply(f"`continue` is {type(continuation).__name__}, not an object")
            token = json.dumps(continuation, sort_keys=True)
            if token in seen:
                raise ApiError(f"the server repeated the continuation {token[:120]}: it would loop", "api_loop")
            seen.add(token)
        raise ApiError(f"more than {limit} replies to one query", "api_loop")

    def recent_titles(self, days: int, now: dt.datetime | None = None) -> list[str]:
        """Main-namespace titles changed in the last `days` days (at most 30), newest first, each once."""
        check_recent_days(days)
        end = utc(now or dt.datetime.now(dt.UTC))
        params = {
            "list": "recentchanges",
            "rcnamespace": "0",
            "rcprop": "title|timestamp|ids",
            "rctype": "edit|new",
            "rctoponly": "1",
            "rclimit": "max",
            "rcdir": "older",
            "rcstart": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "rcend": (end - dt.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        titles: dict[str, None] = {}
        unnamed = 0
        try:
            for body in self.query(params):
                for change in _entries(_query_of(body), "recentchanges"):
                    title = change.get("title") if isinstance(change, dict) else None
                    if isinstance(title, str) and title:
                        titles.setdefault(title)
                    else:
                        unnamed += 1
        except ApiError as error:
            raise UserError(f"listing recent changes from {self.settings.url} failed: {error}") from None
        if unnamed:
            log.warning("recent changes: %d entries without a title could not be fetched", unnamed)
        return list(titles)

    def fetch_batch(self, titles: list[str]) -> list[Page | SkippedRecord]:
        """Latest revisions of up to 50 titles, merged across continuation; one record per title."""
        if len(titles) > TITLES_PER_REQUEST:
            raise ValueError(f"at most {TITLES_PER_REQUEST} titles a request, got {len(titles)}")
        params = {
            "prop": "revisions|info",
            "rvprop": "ids|timestamp|content",
            "rvslots": "main",
            "titles": _multi_value(titles),
        }
        wanted = {normalise_title(title) for title in titles}
        pages: dict[str, dict[str, Any]] = {}
        renamed: dict[str, str] = {}
        problems: list[str] = []
        try:
            for body in self.query(params, max_responses=2 * TITLES_PER_REQUEST + 1):
                query = _query_of(body)
                for entry in _entries(query, "normalized"):
                    if _has_strings(entry, "from", "to"):
                        renamed[entry["from"]] = entry["to"]
                    else:
                        problems.append(f"normalized entry {str(entry)[:80]}")
                for page in _entries(query, "pages"):
                    asked = _has_strings(page, "title") and (
                        normalise_title(page["title"]) in wanted or page["title"] in renamed.values())
                    if not asked:
                        problems.append(f"page entry {str(page)[:80]}")
                        continue
                    merged = pages.setdefault(page["title"], {})
                    more = page.get("revisions")
                    revisions = merged.get("revisions", []) + (more if isinstance(more, list) else [])
                    merged.update(page, revisions=revisions)
                for entry in _entries(query, "interwiki"):
                    if _has_strings(entry, "title"):
                        pages.setdefault(entry["title"], {"title": entry["title"], "interwiki": entry.get("iw") or "?"})
                    else:
                        problems.append(f"interwiki entry {str(entry)[:80]}")
        except ApiError as error:
            return [_skip(error.reason, title, str(error)) for title in titles]
        records = [self._record(page) for page in pages.values()]
        answered = set(pages)
        for title in titles:
            if renamed.get(title, title) in answered:
                continue
            if problems:
                detail = f"not answered; the reply had {len(problems)} malformed entries, e.g. {problems[0]}"
                records.append(_skip("malformed_reply", title, detail))
            else:
                records.append(_skip("missing_page", title, "not in the API response"))
        return records

    def _record(self, page: dict[str, Any]) -> Page | SkippedRecord:
        try:
            return self._page_record(page)
        except (AttributeError, TypeError, KeyError) as error:  # a field of the wrong shape
            detail = f"{type(error).__name__}: {error}"[:200]
            return _skip("malformed_reply", page["title"], detail, page.get("pageid"))

    def _page_record(self, page: dict[str, Any]) -> Page | SkippedRecord:
        title = page["title"]
        if page.get("missing"):
            return _skip("missing_page", title, "the page does not exist")
        if page.get("invalid"):
            return _skip("invalid_title", title, page.get("invalidreason", ""))
        if page.get("interwiki"):
            return _skip("invalid_title", title, f"interwiki prefix {page['interwiki']}")
        revisions = page.get("revisions") or []
        if not revisions:
            return _skip("missing_field", title, "no revision returned", page.get("pageid"))
        revision = max(revisions, key=lambda r: r.get("timestamp", ""))
        main = revision.get("slots", {}).get("main", {})
        content = main.get("content")
        if content is None or main.get("texthidden"):
            return _skip("missing_field", title, "revision content hidden or absent", page.get("pageid"))
        redirect_to = None
        if page.get("redirect"):
            match = _REDIRECT_TARGET.match(content)
            if match is None:
                return _skip("missing_field", title, "redirect without a target link", page.get("pageid"))
            redirect_to = normalise_title(match.group(1))
        try:
            return Page(
                page_id=page["pageid"],
                title=title,
                ns=page["ns"],
                revision_id=revision["revid"],
                timestamp=revision["timestamp"],
                text=content,
                redirect_to=redirect_to,
                source=self.settings.url,
            )
        except KeyError as error:
            return _skip("missing_field", title, f"no {error} in the reply", page.get("pageid"))
        except ValueError as error:
            return _skip("invalid_field", title, invalid_detail(error), page.get("pageid"))

    def fetch_pages(self, titles: Iterable[str]) -> Iterator[Page | SkippedRecord]:
        """Records for `titles` (each once), then for redirect targets not yet fetched, chains included."""
        seen: set[str] = set()
        wanted = []
        for title in titles:
            if title.strip():
                wanted.append(title)
            else:
                yield _skip("invalid_title", title, "empty title")
        for _ in range(MAX_REDIRECT_DEPTH + 1):
            wanted = [t for t in dict.fromkeys(wanted) if normalise_title(t) not in seen]
            if not wanted:
                return
            seen.update(normalise_title(t) for t in wanted)
            targets = []
            batches = batched(wanted, TITLES_PER_REQUEST)
            for records in _ordered_parallel(self.fetch_batch, batches, self.settings.max_in_flight):
                for record in records:
                    seen.add(normalise_title(record.title))
                    if isinstance(record, Page) and record.redirect_to and self.settings.follow_redirects:
                        targets.append(record.redirect_to)
                    yield record
            wanted = targets
        if wanted := [t for t in wanted if normalise_title(t) not in seen]:
            log.warning("redirect chains deeper than %d left unfollowed: %s", MAX_REDIRECT_DEPTH, wanted[:5])


def _seconds(value: object, default: float) -> float:
    try:
        return max(0.0, float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default


def _query_of(body: dict[str, Any]) -> dict[str, Any]:
    """The reply's `query` object (absent: empty), or MalformedReply when it is a list, null, ..."""
    query = body.get("query", {})
    if not isinstance(query, dict):
        raise MalformedReply(f"`query` is {type(query).__name__}, not an object")
    return query


def _entries(query: dict[str, Any], key: str) -> list:
    value = query.get(key, [])
    if not isinstance(value, list):
        raise MalformedReply(f"`query.{key}` is {type(value).__name__}, not a list")
    return value


def _has_strings(entry: object, *keys: str) -> bool:
    return isinstance(entry, dict) and all(isinstance(entry.get(key), str) and entry[key] for key in keys)


def _skip(reason: str, title: str, detail: str, page_id: object = None) -> SkippedRecord:
    return SkippedRecord(title=title, stage="read", reason=reason, detail=detail, page_id=bounded_id(page_id))


def check_api_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"--api needs an http(s) URL of the wiki's api.php, got {url!r}")
    return url


def check_recent_days(days: int) -> int:
    if not 1 <= days <= RECENT_CHANGES_MAX_DAYS:
        raise UserError(
            f"--recent-days must be between 1 and {RECENT_CHANGES_MAX_DAYS}: list=recentchanges only "
            f"reaches back {RECENT_CHANGES_MAX_DAYS} days (got {days}); use a dump for older changes"
        )
    return days
