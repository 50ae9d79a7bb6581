"""Read pages' latest revisions from the MediaWiki Action API, politely, as plain iterators and as Beam.

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
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

import apache_beam as beam
import requests

from pipeline.errors import UserError
from schemas.base import utc
from schemas.wiki import Page, SkippedRecord

log = logging.getLogger(__name__)

SKIP_REASONS = {
    "missing_page": "the wiki has no page of that title",
    "invalid_title": "the title is empty, has illegal characters or an interwiki prefix",
    "missing_field": "no revision or no content came back (hidden revision, redirect without a target)",
    "invalid_field": "a returned field does not validate",
    "api_error": "the request failed for good (retries exhausted or a non-transient API error)",
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
    """A request that failed for good: retries exhausted or an API error other than maxlag."""


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
    timeout_s: float = 60.0
    follow_redirects: bool = True


def _slots(settings: ApiSettings) -> threading.BoundedSemaphore:
    """One in-flight bound per API per process, shared by every client (and Beam thread) in it."""
    with _SLOTS_LOCK:
        key = (settings.url, settings.max_in_flight)
        if key not in _SLOTS:
            _SLOTS[key] = threading.BoundedSemaphore(settings.max_in_flight)
        return _SLOTS[key]


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


def _batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
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
    """A client for one wiki. `sleep` is injectable so tests can observe waits without waiting."""

    def __init__(self, settings: ApiSettings, session: requests.Session | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        check_api_url(settings.url)
        self.settings = settings
        self.session = session or requests.Session()
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
        raise ApiError(f"gave up after {self.settings.max_retries + 1} attempts: {problem}")

    def _attempt(self, params: dict[str, Any], backoff: float) -> dict[str, Any] | tuple[str, float]:
        """One request: the body, or (problem, seconds to wait) when worth retrying; ApiError otherwise."""
        try:
            with _slots(self.settings):
                response = self.session.get(self.settings.url, params=params, timeout=self.settings.timeout_s)
        except requests.RequestException as error:
            return f"{type(error).__name__}: {error}", backoff
        retry_after = _retry_after(response)
        status = response.status_code
        if status in (429, 503):
            return f"HTTP {status}", backoff if retry_after is None else retry_after
        if status >= 500:
            return f"HTTP {status}", backoff
        if status >= 400:
            raise ApiError(f"HTTP {status} from {self.settings.url}")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return "response is not a JSON object", backoff
        error = body.get("error")
        if not error:
            if "warnings" in body:
                log.warning("API warnings: %s", body["warnings"])
            return body
        code, info = error.get("code"), error.get("info", "")
        if code not in RETRYABLE_API_ERRORS:
            raise ApiError(f"API error {code}: {info}")
        return f"{code}: {info}", retry_after if retry_after is not None else float(error.get("lag") or backoff)

    def query(self, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every response of an `action=query`, following continuation to the end."""
        continuation: dict[str, Any] = {}
        while True:
            body = self.get({"action": "query", **params, **continuation})
            yield body
            if "continue" not in body:
                return
            continuation = body["continue"]

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
        try:
            for body in self.query(params):
                for change in body.get("query", {}).get("recentchanges", []):
                    titles.setdefault(change["title"])
        except ApiError as error:
            raise UserError(f"listing recent changes from {self.settings.url} failed: {error}") from None
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
        pages: dict[str, dict[str, Any]] = {}
        renamed: dict[str, str] = {}
        try:
            for body in self.query(params):
                query = body.get("query", {})
                renamed.update({entry["from"]: entry["to"] for entry in query.get("normalized", [])})
                for page in query.get("pages", []):
                    if "title" not in page:
                        continue  # unusable; the title it answers is reported as missing below
                    merged = pages.setdefault(page["title"], {})
                    revisions = merged.get("revisions", []) + page.get("revisions", [])
                    merged.update(page, revisions=revisions)
                for entry in query.get("interwiki", []):
                    pages.setdefault(entry["title"], {"title": entry["title"], "interwiki": entry.get("iw")})
        except ApiError as error:
            return [_skip("api_error", title, str(error)) for title in titles]
        records = [self._record(page) for page in pages.values()]
        answered = set(pages)
        for title in titles:
            if renamed.get(title, title) not in answered:
                records.append(_skip("missing_page", title, "not in the API response"))
        return records

    def _record(self, page: dict[str, Any]) -> Page | SkippedRecord:
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
        except (KeyError, ValueError) as error:
            return _skip("invalid_field", title, str(error).splitlines()[0], page.get("pageid"))

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
            batches = _batched(wanted, TITLES_PER_REQUEST)
            for records in _ordered_parallel(self.fetch_batch, batches, self.settings.max_in_flight):
                for record in records:
                    seen.add(normalise_title(record.title))
                    if isinstance(record, Page) and record.redirect_to and self.settings.follow_redirects:
                        targets.append(record.redirect_to)
                    yield record
            wanted = targets
        if wanted := [t for t in wanted if normalise_title(t) not in seen]:
            log.warning("redirect chains deeper than %d left unfollowed: %s", MAX_REDIRECT_DEPTH, wanted[:5])


def _skip(reason: str, title: str, detail: str, page_id: int | None = None) -> SkippedRecord:
    return SkippedRecord(title=title, stage="read", reason=reason, detail=detail, page_id=page_id)


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


class _FetchBatchFn(beam.DoFn):
    """Fetch one batch of titles (a work unit) with a client built on the worker."""

    def __init__(self, settings: ApiSettings):
        self.settings = settings
        self.api: MediaWikiApi | None = None

    def setup(self):
        self.api = MediaWikiApi(self.settings)

    def process(self, titles: list[str]):
        for record in self.api.fetch_pages(titles):
            name = "pages" if isinstance(record, Page) else f"skipped.{record.reason}"
            beam.metrics.Metrics.counter("hopsmith.read", name).inc()
            yield record


def _recent_batches(days: int, settings: ApiSettings, now: dt.datetime | None) -> Iterator[list[str]]:
    return _batched(MediaWikiApi(settings).recent_titles(days, now), TITLES_PER_REQUEST)


def _record_key(record: Page | SkippedRecord) -> str:
    """Records of the same page (a redirect target reached from two batches) share a key."""
    if isinstance(record, Page):
        return f"page:{record.page_id}"
    return f"skip:{normalise_title(record.title)}:{record.reason}"


def _first_by_content(records: Iterable[Page | SkippedRecord]) -> Page | SkippedRecord:
    return min(records, key=lambda record: record.model_dump_json())


class ReadFromApi(beam.PTransform):
    """PBegin -> PCollection of Page | SkippedRecord from the Action API: `titles`, or `recent_days`.

    Titles are batched 50 to a request; batches are the work units, reshuffled across workers. Each
    worker process keeps at most `settings.max_in_flight` requests in flight. Records of a page reached
    from several batches (a shared redirect target) are kept once.
    """

    def __init__(self, settings: ApiSettings, titles: Iterable[str] = (), recent_days: int | None = None,
                 now: dt.datetime | None = None):
        super().__init__()
        check_api_url(settings.url)
        self.settings = settings
        self.titles = list(dict.fromkeys(titles))
        self.recent_days = check_recent_days(recent_days) if recent_days is not None else None
        if bool(self.titles) == (self.recent_days is not None):
            raise UserError("the API source needs either titles or a number of recent days, not both")
        self.now = now

    def expand(self, pbegin):
        if self.titles:
            batches = pbegin | "TitleBatches" >> beam.Create(list(_batched(self.titles, TITLES_PER_REQUEST)))
        else:
            batches = (
                pbegin
                | "RecentDays" >> beam.Create([self.recent_days])
                | "ListRecentChanges" >> beam.FlatMap(_recent_batches, self.settings, self.now)
            )
        return (
            batches
            | "SpreadBatches" >> beam.Reshuffle()
            | "FetchRevisions" >> beam.ParDo(_FetchBatchFn(self.settings))
            | "KeyByPage" >> beam.WithKeys(_record_key)
            | "OnePerPage" >> beam.CombinePerKey(_first_by_content)
            | "DropKeys" >> beam.Values()
        )
