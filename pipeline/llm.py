"""One client for every LLM role: the `openai` client against any OpenAI-compatible endpoint.

Shared by the question writer, the agent policies and the judge, so retry, cache and concurrency behave
the same everywhere:
- bounded concurrency (a semaphore per role),
- retries with backoff on 429 (honouring `Retry-After`), 5xx, timeouts, connection errors and responses
  that fail the caller's validation (e.g. invalid JSON),
- an on-disk cache keyed by model, messages, tools and parameters: a rerun sends no request twice.
  Only responses that passed validation are cached.
The API key is read from the environment variable the role names and never stored or logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import openai
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError

from pipeline.io import atomic_write_text, stable_hash
from pipeline.secrets import scrub
from schemas.config import LLMRole

log = logging.getLogger(__name__)
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class LLMError(RuntimeError):
    """A request that could not be completed after the configured retries (or a non-retryable error)."""


class InvalidResponse(ValueError):
    """Raised by a validator when a response is unusable; the request is retried."""


@dataclass
class ChatResult:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    cached: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "tool_calls": self.tool_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model": self.model,
        }


@dataclass
class LLMStats:
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    invalid_responses: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


_JSON_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_json_model(model: type[M], text: str) -> M:
    """Validate a JSON answer (optionally inside a ```json fence) against a pydantic model."""
    text = text.strip()
    fenced = _JSON_FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        raise InvalidResponse(f"response is not a valid {model.__name__}: {error.errors()[:2]}") from error


def _retry_after_seconds(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class LLMClient:
    """Async chat completions for one role with concurrency bound, retries and an on-disk cache.

    The underlying HTTP client belongs to one event loop: create the client inside the coroutine that
    uses it (see `run_async`) and close it with `aclose()`.
    """

    def __init__(self, role: LLMRole, cache_dir: str | os.PathLike | None = None, name: str = "llm"):
        if role.offline:
            raise ValueError(f"role {name!r} has no base_url: use its offline engine")
        self.role = role
        self.name = name
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.stats = LLMStats()
        self._semaphore: asyncio.Semaphore | None = None
        self._client = openai.AsyncOpenAI(
            base_url=role.base_url,
            api_key=os.environ.get(role.api_key_env) or "EMPTY",
            max_retries=0,
            timeout=role.timeout_s,
        )

    @property
    def engine(self) -> str:
        return f"openai:{self.role.model}"

    def _request(self, messages, tools, response_format, temperature, max_tokens, seed) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.role.model,
            "messages": messages,
            "temperature": self.role.temperature if temperature is None else temperature,
            "max_tokens": max_tokens or self.role.max_tokens,
        }
        if tools:
            request["tools"] = tools
        if response_format:
            request["response_format"] = response_format
        if seed is not None:
            request["seed"] = seed
        if self.role.extra_body:
            request["extra_body"] = self.role.extra_body
        return request

    def _cache_path(self, key: str) -> Path | None:
        return self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        cache_salt: str = "",
        validate: Callable[[ChatResult], Any] | None = None,
    ) -> ChatResult:
        """One chat completion. `validate` may raise InvalidResponse to have the request retried."""
        request = self._request(messages, tools, response_format, temperature, max_tokens, seed)
        key = stable_hash(self.role.base_url, request, cache_salt, length=40)
        cache_path = self._cache_path(key)
        if cache_path is not None and cache_path.is_file():
            self.stats.cache_hits += 1
            return ChatResult(**json.loads(cache_path.read_text()), cached=True)
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.role.max_concurrency)
        last_error: Exception | None = None
        for attempt in range(self.role.max_retries + 1):
            if attempt:
                self.stats.retries += 1
            wait: float | None = None
            try:
                async with self._semaphore:
                    result = await self._send(request)
                if validate is not None:
                    validate(result)
                if cache_path is not None:
                    atomic_write_text(cache_path, json.dumps(result.to_json(), ensure_ascii=False))
                return result
            except InvalidResponse as error:
                self.stats.invalid_responses += 1
                last_error = error
            except openai.RateLimitError as error:
                last_error, wait = error, _retry_after_seconds(error)
            except openai.APIStatusError as error:
                if error.status_code < 500:
                    raise LLMError(f"{self.name}: endpoint refused the request ({error.status_code})") from error
                last_error, wait = error, _retry_after_seconds(error)
            except (openai.APITimeoutError, openai.APIConnectionError) as error:
                last_error = error
            if attempt < self.role.max_retries:
                if wait is None:
                    wait = self.role.backoff_s * (2**attempt) * (0.5 + random.random() / 2)
                log.info("%s: retry %d after %s (%.2fs)", self.name, attempt + 1, type(last_error).__name__, wait)
                await asyncio.sleep(wait)
        failure = f"{self.name}: gave up after {self.role.max_retries + 1} attempts: {last_error}"
        raise LLMError(scrub(failure, self._client.api_key))

    async def _send(self, request: dict[str, Any]) -> ChatResult:
        self.stats.requests += 1
        started = time.perf_counter()
        # The request is already a plain JSON body: posting it skips the SDK's per-request TypedDict transform,
        # which costs ~10 ms of CPU for a long agent prompt and caps throughput at high concurrency.
        body = {key: value for key, value in request.items() if key != "extra_body"} | request.get("extra_body", {})
        response = await self._client.post("/chat/completions", body=body, cast_to=ChatCompletion)
        choice = response.choices[0]
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in (choice.message.tool_calls or [])
        ]
        usage = response.usage
        result = ChatResult(
            content=choice.message.content or "",
            tool_calls=calls,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            model=response.model or (self.role.model or ""),
            seconds=time.perf_counter() - started,
        )
        self.stats.prompt_tokens += result.prompt_tokens
        self.stats.completion_tokens += result.completion_tokens
        return result

    async def complete_json(self, messages: list[dict[str, Any]], model: type[M], **kwargs: Any) -> M:
        """A chat completion whose content must validate as `model`; invalid JSON is retried."""
        result = await self.chat(
            messages,
            response_format={"type": "json_object"},
            validate=lambda r: parse_json_model(model, r.content),
            **kwargs,
        )
        return parse_json_model(model, result.content)

    async def aclose(self) -> None:
        await self._client.close()


def run_async(coroutine_factory: Callable[[], Any]) -> Any:
    """Run an async job from synchronous code (a Beam DoFn, the CLI) on a fresh event loop."""
    return asyncio.run(coroutine_factory())
