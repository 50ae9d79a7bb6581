"""LLMClient against a real OpenAI-compatible HTTP server on 127.0.0.1."""

import asyncio
import itertools
import time

import pytest
from pydantic import BaseModel

from pipeline.llm import LLMClient, LLMError
from schemas.config import LLMRole
from tests.servers import OpenAIServer, Reply

MESSAGES = [{"role": "user", "content": "Name a river."}]


class River(BaseModel):
    name: str


def _role(server, **overrides):
    values = {"base_url": server.base_url, "model": "test-model", "max_retries": 3, "backoff_s": 0.01,
              "timeout_s": 5.0, "api_key_env": "HOPSMITH_TEST_KEY"}
    values.update(overrides)
    return LLMRole(**values)


def _chat(role, cache_dir=None, **kwargs):
    async def go():
        client = LLMClient(role, cache_dir, name="test")
        try:
            return await client.chat(MESSAGES, **kwargs), client.stats
        finally:
            await client.aclose()

    return asyncio.run(go())


def _scripted(*replies):
    queue = iter(replies)
    return lambda body: next(queue)


def test_offline_role_has_no_client():
    with pytest.raises(ValueError):
        LLMClient(LLMRole(), None)


def test_answer_is_cached_and_rerun_sends_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HOPSMITH_TEST_KEY", "sk-secret-sentinel")
    with OpenAIServer(lambda body: Reply(content="Thames")) as server:
        result, stats = _chat(_role(server), tmp_path)
        assert result.content == "Thames" and not result.cached and stats.requests == 1
        again, stats = _chat(_role(server), tmp_path)
        assert again.cached and again.content == "Thames" and stats.requests == 0
        assert len(server.requests) == 1
        salted, _ = _chat(_role(server), tmp_path, cache_salt="rollout-1")
        assert not salted.cached and len(server.requests) == 2
    for path in tmp_path.rglob("*.json"):
        assert "sk-secret-sentinel" not in path.read_text()


def test_429_honours_retry_after():
    stamps = []

    def handler(body):
        stamps.append(time.monotonic())
        if len(stamps) == 1:
            return Reply(status=429, headers={"Retry-After": "0.4"}, error="slow down")
        return Reply(content="ok")

    with OpenAIServer(handler) as server:
        result, stats = _chat(_role(server, backoff_s=0.0))
    assert result.content == "ok" and stats.retries == 1
    assert stamps[1] - stamps[0] >= 0.4


def test_server_error_is_retried_and_client_error_is_not():
    with OpenAIServer(_scripted(Reply(status=503), Reply(status=500), Reply(content="ok"))) as server:
        result, stats = _chat(_role(server))
        assert result.content == "ok" and stats.retries == 2
    with OpenAIServer(lambda body: Reply(status=400, error="bad request")) as server:
        with pytest.raises(LLMError, match="refused"):
            _chat(_role(server))
        assert len(server.requests) == 1


def test_timeouts_are_retried_then_reported():
    with OpenAIServer(lambda body: Reply(content="late", delay_s=1.0)) as server:
        with pytest.raises(LLMError, match="gave up after 2 attempts"):
            _chat(_role(server, timeout_s=0.2, max_retries=1))
        assert len(server.requests) == 2


def test_invalid_json_is_retried_and_never_cached(tmp_path):
    replies = _scripted(Reply(content="not json"), Reply(content='{"name": 3}'), Reply(content='```json\n{"name": "Seine"}\n```'))

    async def go(role):
        client = LLMClient(role, tmp_path, name="json")
        try:
            return await client.complete_json(MESSAGES, River), client.stats
        finally:
            await client.aclose()

    with OpenAIServer(replies) as server:
        river, stats = asyncio.run(go(_role(server)))
        assert river == River(name="Seine") and stats.invalid_responses == 2
        assert server.requests[0]["response_format"] == {"type": "json_object"}
        again, stats = asyncio.run(go(_role(server)))
        assert again == river and stats.requests == 0


def test_concurrency_is_bounded_per_role():
    counter = itertools.count()

    async def go(role):
        client = LLMClient(role, None, name="bounded")
        try:
            return await asyncio.gather(
                *(client.chat(MESSAGES, cache_salt=str(next(counter))) for _ in range(6))
            )
        finally:
            await client.aclose()

    with OpenAIServer(lambda body: Reply(content="x", delay_s=0.15)) as server:
        results = asyncio.run(go(_role(server, max_concurrency=2)))
    assert len(results) == 6 and server.in_flight_peak == 2
