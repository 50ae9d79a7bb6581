"""One client for every LLM role: the `openai` client against any OpenAI-compatible endpoint.

Shared by the question writer, the shortcut checker, the agent policies and the judge, so retry, cache and
concurrency behave the same everywhere:
- an adaptive bound on requests in flight per role: it starts small, grows while the server answers in
  time and halves on every timeout, so a one-request-at-a-time local server is not swamped;
- retries with backoff on 429 (honouring `Retry-After` up to a cap), 5xx, timeouts and connection errors.
  When they are exhausted the request raises `LLMUnavailable`: transient, not finished work, so the stage
  leaves the unit unfinished and a rerun retries it. After `max_consecutive_failures` failed attempts in
  a row the role stops sending (the endpoint is down), so a stage ends promptly instead of timing out on
  every remaining request;
- JSON replies are asked for by JSON schema (`response_format` `json_schema`), falling back to
  `json_object` and then to plain text when the server refuses the format, and read from prose or code
  fences too. An unusable reply is never re-sent as the identical request: the retry carries a repair
  message quoting the parse error and a changed sampling seed and temperature (`repairs`);
- an on-disk cache keyed by model, messages, tools and parameters: a rerun sends no request twice.
  Only responses that passed validation are cached;
- per-role counts (requests, retries, repairs, invalid replies, timeouts, capped waits, ...) and a bounded
  sample of invalid replies, for the stage manifest and the run summary.
The API key is read from the environment variable the role names and never stored or logged.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import openai
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError

from ground.errors import StageIncomplete
from ground.io import atomic_write_text, stable_hash
from ground.storage import as_path
from schemas.config import LLMRole
from schemas.secrets import scrub

log = logging.getLogger(__name__)
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
INVALID_SAMPLES = 5  # invalid replies kept per role for inspection
INVALID_SAMPLE_CHARS = 600
REPAIR_QUOTE_CHARS = 1500
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
# Budgets per role when the role sets no max_tokens: a question, a closed-book answer, one agent turn, a score.
ROLE_MAX_TOKENS = {"question-writer": 256, "shortcut-check": 64, "judge": 256, "answer-judge": 128}
DEFAULT_MAX_TOKENS = 512
# Requests sent and finished episodes in this process, for the progress line of in-process runs.
LIVE: Counter = Counter()


class LLMError(RuntimeError):
    """A request that cannot succeed: the endpoint refused it, or every reply was unusable."""

    transient = False

    def __init__(self, message: str):
        super().__init__(scrub(message))  # it quotes server replies, which may echo the request's key


class LLMUnavailable(LLMError):
    """Timeouts, outages, 429/5xx after every retry: not finished work; a rerun retries the unit."""

    transient = True


class InvalidResponse(ValueError):
    """Raised by a validator when a response is unusable; a repair request follows."""


class _FormatRefused(Exception):
    """The server rejected the request's response_format (it does not support it)."""


@dataclass
class ChatResult:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    cached: bool = False
    seconds: float = 0.0
    # what a server with a reasoning parser (vLLM, SGLang) moved out of `content`: the model's <think> text
    reasoning: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "tool_calls": self.tool_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model": self.model,
            "reasoning": self.reasoning,
        }


@dataclass
class LLMStats:
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    repairs: int = 0
    invalid_responses: int = 0
    gave_up_invalid: int = 0
    timeouts: int = 0
    server_errors: int = 0
    connection_errors: int = 0
    rate_limited: int = 0
    retry_after_capped: int = 0
    format_fallbacks: int = 0
    unavailable: int = 0
    refused: int = 0
    fallbacks: int = 0  # replies replaced by the offline engine (a judge turn left to the offline critic)
    deduplicated: int = 0  # calls that awaited an identical request already in flight instead of sending it
    prompt_tokens: int = 0
    completion_tokens: int = 0
    invalid_samples: list[dict[str, str]] = field(default_factory=list)
    served_models: Counter = field(default_factory=Counter)

    def keep_invalid(self, reply: str, error: str) -> None:
        self.invalid_responses += 1
        if len(self.invalid_samples) < INVALID_SAMPLES:
            self.invalid_samples.append({"reply": reply[:INVALID_SAMPLE_CHARS], "error": error[:300]})

    def counts(self) -> dict[str, int]:
        """The integer counters (for manifests), without the samples."""
        return {name: value for name, value in vars(self).items() if isinstance(value, int)}


@dataclass
class RoleReport:
    """LLM counters and invalid-reply samples of one or more clients, keyed by role name; JSON-able."""

    counts: dict[str, Counter] = field(default_factory=dict)
    invalid: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    models: dict[str, Counter] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)  # why units were left for a rerun (bounded sample)
    unfinished_units: int = 0

    def note_unfinished(self, failure: BaseException) -> None:
        self.unfinished_units += 1
        if len(self.unfinished) < INVALID_SAMPLES:
            self.unfinished.append(str(failure)[:300])

    def add_client(self, client: LLMClient) -> None:
        self.counts.setdefault(client.name, Counter()).update(client.stats.counts())
        samples = self.invalid.setdefault(client.name, [])
        samples.extend(client.stats.invalid_samples[: INVALID_SAMPLES - len(samples)])
        self.models.setdefault(client.name, Counter()).update(client.stats.served_models)

    def merge(self, other: RoleReport) -> None:
        for role, counts in other.counts.items():
            self.counts.setdefault(role, Counter()).update(counts)
        for role, samples in other.invalid.items():
            mine = self.invalid.setdefault(role, [])
            mine.extend(samples[: INVALID_SAMPLES - len(mine)])
        for role, models in other.models.items():
            self.models.setdefault(role, Counter()).update(models)
        self.unfinished_units += other.unfinished_units
        self.unfinished.extend(other.unfinished[: INVALID_SAMPLES - len(self.unfinished)])

    def flat_counts(self) -> dict[str, int]:
        """`llm:<role>:<counter>` -> value, the form stage manifests carry."""
        return {f"llm:{role}:{name}": value for role, counts in sorted(self.counts.items())
                for name, value in sorted(counts.items()) if value}

    def to_json(self) -> dict[str, Any]:
        return {"counts": {r: dict(c) for r, c in self.counts.items()}, "invalid": self.invalid,
                "models": {r: dict(c) for r, c in self.models.items()}, "unfinished": self.unfinished,
                "unfinished_units": self.unfinished_units}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RoleReport:
        return cls({r: Counter(c) for r, c in data.get("counts", {}).items()}, dict(data.get("invalid", {})),
                   {r: Counter(c) for r, c in data.get("models", {}).items()}, list(data.get("unfinished", [])),
                   int(data.get("unfinished_units", 0)))

    def save(self, path: Path) -> None:
        text = json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True, indent=1)
        atomic_write_text(path, scrub(text))  # samples and failures quote replies, which may echo a key

    @classmethod
    def load_all(cls, folder: Path) -> RoleReport:
        total = cls()
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            total.merge(cls.from_json(json.loads(path.read_text())))
        return total


def report_folder(stage_dir: str | os.PathLike) -> Path:
    """Where a stage's workers leave their LLM reports (one file per worker batch and run)."""
    return as_path(stage_dir) / "parts" / "llm"


def save_report(stage_dir: str | os.PathLike, report: RoleReport) -> None:
    """Leave one batch's LLM report for the stage's manifest; every attempt's requests are counted."""
    if report.counts or report.unfinished_units:
        report.save(report_folder(stage_dir) / f"{time.time_ns()}-{os.getpid()}-{id(report)}.json")


def stage_report(stage: str, stage_dir: str | os.PathLike, unfinished: int, planned: int) -> RoleReport:
    """The stage's LLM report, also written as `llm_report.json` (counts, invalid-reply samples, models).

    Raises `StageIncomplete` when units were left unfinished by transient failures: the stage then writes
    no manifest, keeps its finished units, and a rerun retries the rest.
    """
    report = RoleReport.load_all(report_folder(stage_dir))
    if report.counts:
        report.save(as_path(stage_dir) / "llm_report.json")
    if unfinished:
        reasons = "; ".join(dict.fromkeys(report.unfinished)) or "transient LLM failures"
        raise StageIncomplete(
            f"{stage}: {unfinished} of {planned} work units unfinished after transient LLM failures ({reasons}). "
            "Finished units are kept; rerun the same command to retry the rest."
        )
    return report


_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)\s*```", re.DOTALL)


def json_object_in(text: str) -> dict[str, Any] | None:
    """A JSON object from model text: plain, inside a ``` fence, or the first balanced {...} in prose."""
    text = text.strip()
    fenced = _FENCE.search(text)
    candidates = [fenced.group(1).strip()] if fenced else []
    candidates.append(text)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
        start = candidate.find("{")
        if start < 0:
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(candidate[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_json_model(model: type[M], text: str) -> M:
    """Validate a JSON answer (plain, fenced, or inside prose) against a pydantic model."""
    value = json_object_in(text)
    if value is None:
        raise InvalidResponse(f"no JSON object in the reply (expected {model.__name__})")
    try:
        return model.model_validate(value)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in error.errors()[:3])
        raise InvalidResponse(f"the JSON object is not a valid {model.__name__} ({problems})") from error


def response_format(kind: str, model: type[BaseModel]) -> dict[str, Any] | None:
    if kind == "json_schema":
        return {"type": "json_schema",
                "json_schema": {"name": model.__name__, "schema": model.model_json_schema(), "strict": False}}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


def repair_messages(reply: str, error: str, model: type[BaseModel]) -> list[dict[str, str]]:
    """What follows an unusable reply: the reply itself, and the parse error with the expected shape."""
    fields = ", ".join(f'"{name}"' for name in model.model_fields)
    return [
        {"role": "assistant", "content": reply[:REPAIR_QUOTE_CHARS] or "(empty reply)"},
        {"role": "user", "content": f"Your reply could not be used: {error}. Reply again with one JSON object "
                                    f"only, with the keys {fields}, and nothing else."},
    ]


def _retry_after_seconds(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class AdaptiveLimit:
    """Requests in flight: additive increase after a round of answers in time, halved on a timeout."""

    def __init__(self, start: int, maximum: int):
        self.maximum = maximum
        self.limit = max(1, min(start, maximum))
        self.lowest = self.limit
        self.in_flight = 0
        self._successes = 0
        self._changed = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1

    async def release(self, answered: bool, timed_out: bool) -> None:
        async with self._changed:
            self.in_flight -= 1
            if timed_out:
                self.limit, self._successes = max(1, self.limit // 2), 0
                self.lowest = min(self.lowest, self.limit)
            elif answered:
                self._successes += 1
                if self._successes >= self.limit and self.limit < self.maximum:
                    self.limit, self._successes = self.limit + 1, 0
            self._changed.notify_all()


class LLMClient:
    """Async chat completions for one role with an adaptive in-flight bound, retries and an on-disk cache.

    The underlying HTTP client belongs to one event loop: create the client inside the coroutine that
    uses it (see `run_async`) and close it with `aclose()`.
    """

    def __init__(self, role: LLMRole, cache_dir: str | os.PathLike | None = None, name: str = "llm"):
        if role.offline:
            raise ValueError(f"role {name!r} has no base_url: use its offline engine")
        self.role = role
        self.name = name
        self.cache_dir = as_path(cache_dir) if cache_dir else None
        self.stats = LLMStats()
        self.max_tokens = role.max_tokens or ROLE_MAX_TOKENS.get(name, DEFAULT_MAX_TOKENS)
        self._limit: AdaptiveLimit | None = None
        self._format = RESPONSE_FORMATS.index(role.structured_output)
        self._failures_in_a_row = 0
        self._in_flight: dict[str, asyncio.Future] = {}
        self._client = openai.AsyncOpenAI(
            base_url=role.base_url,
            api_key=os.environ.get(role.api_key_env) or "EMPTY",
            max_retries=0,
            timeout=role.timeout_s,
        )

    @property
    def engine(self) -> str:
        return f"openai:{self.role.model}"

    @property
    def served_model(self) -> str | None:
        """The model the server reported most often (falls back to the configured name)."""
        common = self.stats.served_models.most_common(1)
        return common[0][0] if common else self.role.model

    def _request(self, messages, tools, response_format, temperature, max_tokens, seed) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.role.model,
            "messages": messages,
            "temperature": self.role.temperature if temperature is None else temperature,
            "max_tokens": max_tokens or self.max_tokens,
        }
        if tools:
            request["tools"] = tools
            if self.role.tool_choice is not None:
                request["tool_choice"] = self.role.tool_choice
        if response_format:
            request["response_format"] = response_format
        if seed is not None:
            request["seed"] = seed
        if self.role.extra_body:
            request["extra_body"] = self.role.extra_body
        return request

    def _request_key(self, request: dict[str, Any], salt: str) -> str:
        return stable_hash(self.role.base_url, request, salt, length=40)

    def _cache_path(self, key: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / key[:2] / f"{key}.json"

    async def _once(self, key: str, produce: Callable[[], Awaitable[T]]) -> T:
        """Identical calls in flight at the same time send one request; the others await its outcome.

        The cache only helps once a reply is stored, so without this concurrent units asking the same
        thing (identical judge turns, identical writer plans) would each pay for a request.
        """
        if (waiting := self._in_flight.get(key)) is not None:
            self.stats.deduplicated += 1
            return copy.deepcopy(await asyncio.shield(waiting))
        outcome = asyncio.get_running_loop().create_future()
        self._in_flight[key] = outcome
        try:
            result = await produce()
        except asyncio.CancelledError:
            outcome.cancel()
            raise
        except Exception as error:
            outcome.set_exception(error)
            outcome.exception()  # retrieved: waiters re-raise it, asyncio logs no "never retrieved"
            raise
        else:
            outcome.set_result(result)
            return result
        finally:
            del self._in_flight[key]

    def _cached(self, path: Path | None) -> ChatResult | None:
        if path is None or not path.is_file():
            return None
        self.stats.cache_hits += 1
        return ChatResult(**json.loads(path.read_text()), cached=True)

    def _store(self, path: Path | None, result: ChatResult) -> None:
        if path is not None:
            atomic_write_text(path, json.dumps(result.to_json(), ensure_ascii=False))

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        cache_salt: str = "",
    ) -> ChatResult:
        """One chat completion (cached); transient failures are retried, then raise `LLMUnavailable`."""
        request = self._request(messages, tools, None, temperature, max_tokens, seed)
        key = self._request_key(request, cache_salt)
        cache_path = self._cache_path(key)
        if (hit := self._cached(cache_path)) is not None:
            return hit

        async def send() -> ChatResult:
            result = await self._send_with_retries(request)
            self._store(cache_path, result)
            return result

        return await self._once(key, send)

    async def complete_json(
        self,
        messages: list[dict[str, Any]],
        model: type[M],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        cache_salt: str = "",
    ) -> M:
        """A reply that validates as `model`: asked for by schema, repaired (never re-sent as is) when unusable.

        Raises `LLMError` when every repair failed too, `LLMUnavailable` on transient failures.
        """
        key = self._request_key(
            self._request(messages, None, {"json": model.__name__}, temperature, max_tokens, seed), cache_salt)
        cache_path = self._cache_path(key)
        if (hit := self._cached(cache_path)) is not None:
            try:
                return parse_json_model(model, hit.content)
            except InvalidResponse:
                pass  # a cache entry of an older schema: ask again
        return await self._once(
            key, lambda: self._complete_json_uncached(messages, model, temperature, max_tokens, seed, cache_path))

    async def _complete_json_uncached(self, messages, model: type[M], temperature, max_tokens, seed,
                                      cache_path: Path | None) -> M:
        """Ask, and repair unusable replies, until one validates as `model` or the repairs run out."""
        conversation = list(messages)
        base_temperature = self.role.temperature if temperature is None else temperature
        repairs = 0
        last_error = ""
        while True:
            request = self._request(
                conversation, None, response_format(RESPONSE_FORMATS[self._format], model),
                base_temperature + 0.3 * repairs, max_tokens, None if seed is None else seed + repairs,
            )
            try:
                result = await self._send_with_retries(request)
            except _FormatRefused:
                self._format += 1
                self.stats.format_fallbacks += 1
                log.info("%s: the server refused that response_format; now %s", self.name,
                         RESPONSE_FORMATS[self._format])
                continue
            try:
                parsed = parse_json_model(model, result.content)
            except InvalidResponse as error:
                last_error = str(error)
                self.stats.keep_invalid(result.content, last_error)
                if repairs >= self.role.max_repairs:
                    break
                repairs += 1
                self.stats.repairs += 1
                conversation = [*messages, *repair_messages(result.content, last_error, model)]
                continue
            self._store(cache_path, result)
            return parsed
        self.stats.gave_up_invalid += 1
        raise LLMError(f"{self.name}: no usable reply after {repairs} repairs: {last_error}")

    def _check_breaker(self) -> None:
        if self._failures_in_a_row >= self.role.max_consecutive_failures:
            self.stats.unavailable += 1
            raise LLMUnavailable(f"{self.name}: endpoint unavailable ({self._failures_in_a_row} attempts in a row "
                                 "failed); not sending more")

    async def _send_with_retries(self, request: dict[str, Any]) -> ChatResult:
        if self._limit is None:
            self._limit = AdaptiveLimit(self.role.start_concurrency, self.role.max_concurrency)
        last_error: Exception | None = None
        for attempt in range(self.role.max_retries + 1):
            if attempt:
                self.stats.retries += 1
            wait: float | None = None
            timed_out, last_error = False, None
            self._check_breaker()
            await self._limit.acquire()
            try:
                self._check_breaker()
                result = await self._send(request)
                self._failures_in_a_row = 0
                return result
            except openai.RateLimitError as error:
                self.stats.rate_limited += 1
                last_error, wait = error, _retry_after_seconds(error)
            except openai.APIStatusError as error:
                # A server that does not know the format says so with a 400 or 422, or (llama-cpp-python)
                # a 500 whose message names the field.
                if "response_format" in request and (error.status_code in (400, 422)
                                                     or "response_format" in str(error)):
                    raise _FormatRefused() from error
                if error.status_code < 500:
                    self.stats.refused += 1
                    raise LLMError(f"{self.name}: endpoint refused the request ({error.status_code})") from error
                self.stats.server_errors += 1
                last_error, wait = error, _retry_after_seconds(error)
            except openai.APITimeoutError as error:
                self.stats.timeouts += 1
                last_error, timed_out = error, True
            except openai.APIConnectionError as error:
                self.stats.connection_errors += 1
                last_error = error
            finally:
                if last_error is not None:
                    self._failures_in_a_row += 1
                await self._limit.release(last_error is None, timed_out)
            if attempt < self.role.max_retries:
                if wait is None:
                    wait = self.role.backoff_s * (2**attempt) * (0.5 + random.random() / 2)
                elif wait > self.role.max_retry_after_s:
                    self.stats.retry_after_capped += 1
                    log.warning("%s: server asked to wait %.0fs; waiting %.0fs (max_retry_after_s)", self.name,
                                wait, self.role.max_retry_after_s)
                    wait = self.role.max_retry_after_s
                log.info("%s: retry %d after %s (%.2fs)", self.name, attempt + 1, type(last_error).__name__, wait)
                await asyncio.sleep(wait)
        self.stats.unavailable += 1
        failure = f"{self.name}: gave up after {self.role.max_retries + 1} attempts: {last_error}"
        raise LLMUnavailable(scrub(failure, self._client.api_key))

    async def _send(self, request: dict[str, Any]) -> ChatResult:
        self.stats.requests += 1
        LIVE["requests"] += 1
        started = time.perf_counter()
        # The request is already a plain JSON body: posting it skips the SDK's per-request TypedDict transform,
        # which costs ~10 ms of CPU for a long agent prompt and caps throughput at high concurrency.
        body = {key: value for key, value in request.items() if key != "extra_body"} | request.get("extra_body", {})
        response = await self._client.post("/chat/completions", body=body, cast_to=ChatCompletion)
        message = response.choices[0].message if response.choices else None  # no choice: an empty reply
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in ((message.tool_calls if message else None) or [])
        ]
        usage = response.usage
        served = response.model or (self.role.model or "")
        self.stats.served_models[served] += 1
        result = ChatResult(
            content=(message.content if message else None) or "",
            tool_calls=calls,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            model=served,
            seconds=time.perf_counter() - started,
            reasoning=(getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None) or ""
                       if message else ""),
        )
        self.stats.prompt_tokens += result.prompt_tokens
        self.stats.completion_tokens += result.completion_tokens
        return result

    async def aclose(self) -> None:
        await self._client.close()


def run_async(coroutine_factory: Callable[[], Any]) -> Any:
    """Run an async job from synchronous code (a Beam DoFn, the CLI) on a fresh event loop.

    On Ctrl-C the job's task is cancelled, which cancels every request in flight (their connections are
    closed), and KeyboardInterrupt propagates at once. The result leaves the task through a box, not as the
    task's own result: Python 3.11's `asyncio.run` formats the task's repr, result included, on every call
    from the main thread (`signal.getsignal` on its SIGINT handler), which for a unit's records cost seconds.
    """
    box: list[Any] = []

    async def boxed() -> None:
        box.append(await coroutine_factory())

    asyncio.run(boxed())
    return box[0]
