"""LLMClient against a real OpenAI-compatible HTTP server on 127.0.0.1."""

import asyncio
import itertools
import json
import time

import pytest
from pydantic import BaseModel

from llm.client import LLMClient, LLMError, LLMUnavailable, RoleReport
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


def test_timeouts_are_retried_then_reported_as_transient():
    with OpenAIServer(lambda body: Reply(content="late", delay_s=1.0)) as server:
        with pytest.raises(LLMUnavailable, match="gave up after 2 attempts") as failure:
            _chat(_role(server, timeout_s=0.2, max_retries=1))
        assert failure.value.transient and len(server.requests) == 2


def test_retry_after_is_capped_and_counted():
    replies = _scripted(Reply(status=429, headers={"Retry-After": "86400"}, error="come back tomorrow"),
                        Reply(content="ok"))
    started = time.monotonic()
    with OpenAIServer(replies) as server:
        result, stats = _chat(_role(server, max_retry_after_s=0.3))
    assert result.content == "ok" and stats.retry_after_capped == 1 and stats.rate_limited == 1
    assert 0.3 <= time.monotonic() - started < 5


def test_a_dead_endpoint_stops_being_asked():
    async def go(role):
        client = LLMClient(role, None, name="down")
        try:
            return await asyncio.gather(*(client.chat(MESSAGES, cache_salt=str(i)) for i in range(6)),
                                        return_exceptions=True), client.stats
        finally:
            await client.aclose()

    with OpenAIServer(lambda body: Reply(status=503, error="down")) as server:
        results, stats = asyncio.run(go(_role(server, max_retries=1, max_consecutive_failures=2)))
    assert all(isinstance(r, LLMUnavailable) for r in results)
    assert len(server.requests) == 2 and stats.unavailable == 6


def _json(server, role, tmp_path, model=River, **kwargs):
    async def go():
        client = LLMClient(role, tmp_path, name="json")
        try:
            return await client.complete_json(MESSAGES, model, **kwargs), client.stats
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_invalid_json_is_repaired_not_resent_and_never_cached(tmp_path):
    replies = _scripted(Reply(content="not json"), Reply(content='{"name": 3}'),
                        Reply(content='Sure! ```json\n{"name": "Seine"}\n```'))
    with OpenAIServer(replies) as server:
        river, stats = _json(server, _role(server, max_repairs=2), tmp_path, seed=7, temperature=0.0)
        assert river == River(name="Seine") and stats.invalid_responses == 2 and stats.repairs == 2
        first, second, third = server.requests
        assert first["response_format"]["type"] == "json_schema"
        assert first["response_format"]["json_schema"]["schema"]["required"] == ["name"]
        # every retry differs: the bad reply quoted back with the parse error, another seed and temperature
        assert second["messages"][-2] == {"role": "assistant", "content": "not json"}
        assert "no JSON object" in second["messages"][-1]["content"]
        assert "name" in third["messages"][-1]["content"] and "string" in third["messages"][-1]["content"]
        assert len({json.dumps(r, sort_keys=True) for r in server.requests}) == 3
        assert (first["seed"], second["seed"]) == (7, 8) and second["temperature"] > first["temperature"]
        assert [s["reply"] for s in stats.invalid_samples] == ["not json", '{"name": 3}']
        again, stats = _json(server, _role(server), tmp_path, seed=7, temperature=0.0)
        assert again == river and stats.requests == 0


def test_unrepairable_replies_give_a_permanent_error():
    with OpenAIServer(lambda body: Reply(content="I am a river.")) as server:
        with pytest.raises(LLMError, match="no usable reply after 1 repairs") as failure:
            _json(server, _role(server, max_repairs=1), None)
    assert not failure.value.transient and len(server.requests) == 2


def test_response_format_falls_back_when_the_server_refuses_it():
    def handler(body):
        kind = (body.get("response_format") or {}).get("type")
        if kind == "json_schema":  # as llama-cpp-python's server answers: a 500 naming the field
            return Reply(status=500, error="1 validation error: ('body', 'response_format', 'type') "
                                           "Input should be 'text' or 'json_object'")
        return Reply(content='{"name": "Rhine"}' if kind == "json_object" else "?")

    with OpenAIServer(handler) as server:
        river, stats = _json(server, _role(server), None)
    assert river.name == "Rhine" and stats.format_fallbacks == 1 and stats.invalid_responses == 0
    assert [r.get("response_format", {}).get("type") for r in server.requests] == ["json_schema", "json_object"]


def test_counts_and_samples_per_role_round_trip(tmp_path):
    with OpenAIServer(_scripted(Reply(content="x"), Reply(content='{"name": "Po"}'))) as server:
        async def go():
            client = LLMClient(_role(server), None, name="question-writer")
            try:
                await client.complete_json(MESSAGES, River)
            finally:
                await client.aclose()
            report = RoleReport()
            report.add_client(client)
            return report

        report = asyncio.run(go())
    report.save(tmp_path / "a.json")
    report.save(tmp_path / "b.json")
    total = RoleReport.load_all(tmp_path)
    flat = total.flat_counts()
    assert flat["llm:question-writer:requests"] == 4 and flat["llm:question-writer:repairs"] == 2
    assert flat["llm:question-writer:invalid_responses"] == 2
    assert total.models["question-writer"] == {"test-model": 4} and len(total.invalid["question-writer"]) == 2


def test_tool_choice_and_role_max_tokens_are_sent():
    with OpenAIServer(lambda body: Reply(content="ok")) as server:
        _chat(_role(server, tool_choice="required"), tools=[{"type": "function", "function": {"name": "f"}}])
        _chat(_role(server))
    assert server.requests[0]["tool_choice"] == "required" and "tool_choice" not in server.requests[1]
    assert server.requests[1]["max_tokens"] == 512


def test_concurrency_adapts_to_timeouts_and_is_bounded_per_role():
    counter = itertools.count()

    async def go(role):
        client = LLMClient(role, None, name="bounded")
        try:
            return await asyncio.gather(
                *(client.chat(MESSAGES, cache_salt=str(next(counter))) for _ in range(12))
            ), client
        finally:
            await client.aclose()

    with OpenAIServer(lambda body: Reply(content="x", delay_s=0.1)) as server:
        results, client = asyncio.run(go(_role(server, max_concurrency=3, start_concurrency=1)))
    assert len(results) == 12 and server.in_flight_peak == 3 and client._limit.limit == 3

    slow = itertools.count()
    with OpenAIServer(lambda body: Reply(content="x", delay_s=0.6 if next(slow) < 4 else 0.0)) as server:
        results, client = asyncio.run(go(_role(server, max_concurrency=4, start_concurrency=4, timeout_s=0.3)))
    assert len(results) == 12 and client.stats.timeouts == 4 and client._limit.lowest == 1


def test_identical_requests_in_flight_at_once_are_sent_once():
    """Two units asking the same thing at the same time share one request (the cache only helps later)."""

    async def go(role):
        client = LLMClient(role, None, name="test")
        try:
            same = await asyncio.gather(client.chat(MESSAGES), client.chat(MESSAGES),
                                        client.complete_json(MESSAGES, River), client.complete_json(MESSAGES, River))
            other = await client.chat(MESSAGES, cache_salt="rollout-1")
            return same, other, client.stats
        finally:
            await client.aclose()

    def reply(body):
        json_asked = "response_format" in body
        return Reply(content='{"name": "Thames"}' if json_asked else "Thames", delay_s=0.3)

    with OpenAIServer(reply) as server:
        (first, second, river, river_again), other, stats = asyncio.run(go(_role(server, start_concurrency=4)))
        assert first.content == second.content == other.content == "Thames"
        assert river == river_again == River(name="Thames") and river is not river_again
        assert stats.deduplicated == 2
        assert len(server.requests) == 3  # one chat, one JSON request, and the salted (different) request
