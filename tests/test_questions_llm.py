"""The LLM question writer and shortcut check against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import threading

import pytest

import synth.questions as questions_module
from graph.walk_stage import run_walks
from ground.io import read_records
from llm.client import RoleReport, StageIncomplete, run_async
from schemas.config import LLMRole, QuestionConfig, WalkConfig
from schemas.questions import Path, Question
from schemas.wiki import SkippedRecord
from synth.question_plan import EntityInfo
from tests.servers import OpenAIServer, Reply
from tests.test_questions import MERKEL, MERKEL_FACTS
from tests.walk_graphs import fact, write_graph


def named(writer: LLMRole, **config) -> QuestionConfig:
    """A config whose start entities are named (the writer tests check how the name is used)."""
    return QuestionConfig(writer=writer, describe_start=0.0, **config)


def role(server: OpenAIServer, **overrides) -> LLMRole:
    return LLMRole(**{"base_url": server.base_url, "model": "test-model", "timeout_s": 5.0, "max_retries": 3,
                      "backoff_s": 0.01, **overrides})


def faithful_text(payload: dict) -> str:
    """A question that says what the writer was given: the start, each description, every relation."""
    subject = payload["start"].get("name") or payload["start"]["refer_to_it_as"]
    for hop in payload["chain"][:-1]:
        subject = f"{hop['refer_to_it_as']}, the {hop['relation_meaning']} of {subject},"
    return f"As of March 2026, what is the {payload['chain'][-1]['relation_meaning']} of {subject}?"


def written(body: dict) -> Reply:
    """A writer reply that names the start entity, describes the intermediates and hides the answer."""
    payload = json.loads(body["messages"][1]["content"])
    return Reply(content=json.dumps({"question": faithful_text(payload), "obfuscations": ["spouse -> a scientist"]}))


def is_writer(body: dict) -> bool:
    return "multi-hop search question" in body["messages"][0]["content"]


class Script:
    """Per-request behaviour: the first request of each prompt gets `first`, later ones get a valid reply."""

    def __init__(self, first=None, shortcut_answer: str = "Nobody knows"):
        self.first, self.shortcut_answer = first, shortcut_answer
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        if not is_writer(body):
            return Reply(content=json.dumps({"answer": self.shortcut_answer}))
        key = json.dumps(body["messages"][:2], sort_keys=True)  # a repair continues the same prompt
        with self.lock:
            fresh = key not in self.seen
            self.seen.add(key)
        if fresh and self.first is not None:
            return self.first
        return written(body)


@pytest.fixture(scope="module")
def graph_and_paths(tmp_path_factory):
    """One walk run shared by the module: the questions stage only reads it."""
    folder = tmp_path_factory.mktemp("merkel")
    # her alma mater: an anchor beyond the slice besides her birthplace (a place alone is none)
    facts = [*MERKEL_FACTS, fact("Angela Merkel", "almaMater", "Leipzig University")]
    graph_dir = write_graph(folder / "graph", MERKEL, facts)
    run_walks(graph_dir, folder / "paths", WalkConfig(hops=[2], walks_per_start=30, hub_quantile=1.0))
    return graph_dir, folder / "paths"


def run(tmp_path, graph_and_paths, config, out="q"):
    graph_dir, paths_dir = graph_and_paths
    manifest = questions_module.run_questions(graph_dir, paths_dir, tmp_path / out, config, tmp_path / "cache")
    kept = list(read_records(Question, tmp_path / out / "questions"))
    skipped = list(read_records(SkippedRecord, tmp_path / out / "skipped"))
    return manifest, kept, skipped


@pytest.mark.parametrize(
    ("case", "first", "overrides"),
    [
        ("valid_json", None, {}),
        ("invalid_then_valid", Reply(content="Sure! Here is your question: Where was ...?"), {}),
        ("rate_limited", Reply(status=429, headers={"Retry-After": "0.2"}, error="slow down"), {}),
        ("timeout", Reply(content='{"question": "late"}', delay_s=1.5), {"timeout_s": 0.4}),
    ],
)
def test_llm_writer_recovers_and_records_engine(tmp_path, graph_and_paths, case, first, overrides):
    graph_dir, paths_dir = graph_and_paths
    paths = list(read_records(Path, paths_dir / "paths"))
    script = Script(first=first)
    with OpenAIServer(script) as server:
        config = named(role(server, **overrides))
        ctx = questions_module._load_context(graph_dir, paths_dir, config)
        report = RoleReport()
        kept, skipped = run_async(lambda: questions_module.process_unit(ctx, paths, tmp_path / "cache", report))
        writer_requests = [r for r in server.requests if is_writer(r)]
    stats = report.flat_counts()
    assert len(kept) + len(skipped) == len(paths) > 0
    assert kept and all(q.engine == "openai:test-model" and q.model == "test-model" for q in kept)
    assert all(q.text.startswith("As of March 2026, what is the") and "Angela Merkel" in q.text for q in kept)
    assert all("style:llm" in q.obfuscations and "llm:spouse -> a scientist" in q.obfuscations for q in kept)
    expected = len(paths) if first is None else 2 * len(paths)  # one failed attempt, then the valid reply
    assert len(writer_requests) == stats["llm:question-writer:requests"] == expected
    fixed = "llm:question-writer:repairs" if case == "invalid_then_valid" else "llm:question-writer:retries"
    assert stats.get(fixed, 0) == expected - len(paths)
    answered = expected if case == "invalid_then_valid" else len(paths)  # a 429 or a timeout reports no usage
    assert stats["llm:question-writer:prompt_tokens"] == 10 * answered  # the test server reports 10 per reply
    prompt = json.loads(writer_requests[0]["messages"][1]["content"])
    assert prompt["as_of"] == "March 2026" and prompt["start"]["name"] == "Angela Merkel"
    assert writer_requests[0]["response_format"]["type"] == "json_schema"
    if case == "invalid_then_valid":  # the repair quotes the bad reply: never the identical request again
        assert any(r["messages"][-2]["content"].startswith("Sure! Here is") for r in writer_requests)


@pytest.mark.parametrize("bound", [1, 2])
def test_llm_requests_in_flight_stay_within_the_role_bound(tmp_path, graph_and_paths, bound):
    graph_dir, paths_dir = graph_and_paths
    paths = list(read_records(Path, paths_dir / "paths"))
    assert len(paths) > bound

    def slow(body: dict) -> Reply:
        reply = written(body)
        reply.delay_s = 0.2
        return reply

    with OpenAIServer(slow) as server:
        config = named(role(server, max_concurrency=bound, start_concurrency=bound))
        ctx = questions_module._load_context(graph_dir, paths_dir, config)
        kept, _ = run_async(lambda: questions_module.process_unit(ctx, paths, None))
    assert server.in_flight_peak == bound and len(server.requests) == len(paths)


def test_rerun_is_served_from_the_cache(tmp_path, graph_and_paths):
    with OpenAIServer(Script()) as server:
        config = named(role(server))
        first, kept_1, _ = run(tmp_path, graph_and_paths, config, out="first")
        sent = len(server.requests)
        second, kept_2, _ = run(tmp_path, graph_and_paths, config, out="second")
        assert len(server.requests) == sent > 0
    assert [q.text for q in kept_1] == [q.text for q in kept_2]
    assert first.engines == {"writer": "openai:test-model"}
    assert first.counts["llm:question-writer:requests"] == first.counts["paths:read"]
    assert "llm:question-writer:requests" not in second.counts
    assert second.counts["llm:question-writer:cache_hits"] == first.counts["paths:read"]


def test_shortcut_check_rejects_questions_a_model_answers_without_tools(tmp_path, graph_and_paths):
    with OpenAIServer(Script(shortcut_answer="Hosena")) as server:
        config = named(role(server), shortcut=role(server, temperature=1.0), shortcut_attempts=4)
        manifest, kept, skipped = run(tmp_path, graph_and_paths, config)
        shortcut_requests = [r for r in server.requests if not is_writer(r)]
    hosena = [s for s in skipped if s.reason == "shortcut"]
    assert hosena and all("answered without tools: Hosena" in s.detail for s in hosena)
    assert all(q.answer != "Hosena" for q in kept)
    assert manifest.counts["rejected:shortcut"] == len(hosena)
    assert manifest.engines["shortcut"] == "openai:test-model"
    # Four closed-book attempts per question that reached the check (duplicates are dropped afterwards).
    checked = len(kept) + len(hosena) + manifest.counts["rejected:duplicate"]
    assert len(shortcut_requests) == 4 * checked


def test_an_unusable_shortcut_reply_falls_back_to_the_offline_gates(tmp_path, graph_and_paths):
    # A small model behind the checker answers in prose every time: no question is rejected for it, each
    # falls back to the offline gates, counted per role and marked on the question.
    def prose(body: dict) -> Reply:
        if not is_writer(body):
            return Reply(content="Hmm, I believe it could be somewhere in Germany, but I cannot say for sure.")
        return written(body)

    with OpenAIServer(prose) as server:
        config = named(role(server), shortcut=role(server, max_repairs=1), shortcut_attempts=2)
        manifest, kept, skipped = run(tmp_path, graph_and_paths, config)
    assert kept and all("shortcut:offline" in q.obfuscations for q in kept)
    assert not {s.reason for s in skipped} & {"shortcut", "shortcut_check_failed"}
    checked = len(kept) + manifest.counts["rejected:duplicate"]
    assert manifest.counts["llm:shortcut-check:fallbacks"] == checked
    assert manifest.counts["llm:shortcut-check:gave_up_invalid"] == 2 * checked  # both attempts, repaired once
    assert "llm:question-writer:fallbacks" not in manifest.counts


def test_one_usable_shortcut_attempt_still_decides(tmp_path, graph_and_paths):
    # Of two attempts one stays prose and one answers correctly: the usable one rejects the question.
    seen: set[str] = set()
    lock = threading.Lock()

    def mixed(body: dict) -> Reply:
        if not is_writer(body):
            with lock:
                first = body["messages"][1]["content"] not in seen
                seen.add(body["messages"][1]["content"])
            return Reply(content="No idea, sorry.") if first else Reply(content=json.dumps({"answer": "Hosena"}))
        return written(body)

    with OpenAIServer(mixed) as server:
        config = named(role(server), shortcut=role(server, max_repairs=0, temperature=1.0), shortcut_attempts=2)
        manifest, kept, skipped = run(tmp_path, graph_and_paths, config)
    assert any(s.reason == "shortcut" for s in skipped)
    assert all(q.answer != "Hosena" for q in kept)
    assert manifest.counts["llm:shortcut-check:gave_up_invalid"] >= 1  # the prose attempts were unusable
    assert "llm:shortcut-check:fallbacks" not in manifest.counts


def test_leaking_llm_question_is_rejected(tmp_path, graph_and_paths):
    def leaky(body: dict) -> Reply:
        if not is_writer(body):
            return Reply(content=json.dumps({"answer": "no idea"}))
        payload = json.loads(body["messages"][1]["content"])
        return Reply(content=json.dumps({"question": f"Is it {payload['answer_to_hide']}? Where did Joachim Sauer go?"}))

    with OpenAIServer(leaky) as server:
        manifest, kept, skipped = run(tmp_path, graph_and_paths, named(role(server)))
    assert kept == [] and {s.reason for s in skipped} == {"answer_leak"}
    assert manifest.counts["rejected:answer_leak"] == manifest.counts["paths:read"]


def test_llm_question_copying_an_intermediate_description_is_rejected(tmp_path, graph_and_paths):
    graph_dir, paths_dir = graph_and_paths
    path = next(p for p in read_records(Path, paths_dir / "paths") if p.nodes[1] == "Joachim Sauer")

    lead = "Joachim Sauer is a German quantum chemist and professor emeritus at a university in Berlin."

    def copies(body: dict) -> Reply:
        assert lead in body["messages"][1]["content"]  # the writer sees the intermediate's description
        text = "As of March 2026, where was the German quantum chemist and professor emeritus at a university married to Angela Merkel born?"
        return Reply(content=json.dumps({"question": text}))

    with OpenAIServer(copies) as server:
        config = named(role(server))
        ctx = questions_module._load_context(graph_dir, paths_dir, config)
        ctx.entities["Joachim Sauer"] = EntityInfo("Infobox scientist", lead, [])
        kept, skipped = run_async(lambda: questions_module.process_unit(ctx, [path], None))
    assert kept == [] and skipped[0].reason == "evidence_leak"
    assert "german quantum chemist and professor emeritus at" in skipped[0].detail


def test_llm_question_without_the_as_of_date_is_rejected(tmp_path, graph_and_paths):
    def undated(body: dict) -> Reply:
        return Reply(content=json.dumps({"question": "Where was the spouse of Angela Merkel born?"}))

    with OpenAIServer(undated) as server:
        manifest, kept, skipped = run(tmp_path, graph_and_paths, named(role(server)))
    assert kept == [] and {s.reason for s in skipped} == {"missing_as_of"}  # a spouse can change


def test_killed_run_resumes_without_repeating_requests(tmp_path, graph_and_paths, monkeypatch):
    graph_dir, paths_dir = graph_and_paths
    with OpenAIServer(Script()) as server:
        config = named(role(server), paths_per_unit=1)
        original = questions_module.process_unit
        calls = {"n": 0}

        async def dies_on_third_unit(*args):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt("killed")
            return await original(*args)

        monkeypatch.setattr(questions_module, "process_unit", dies_on_third_unit)
        with pytest.raises(BaseException):  # noqa: B017 - Beam may wrap the interrupt
            questions_module.run_questions(graph_dir, paths_dir, tmp_path / "q", config, None)
        before = len(server.requests)
        assert before == 2
        monkeypatch.setattr(questions_module, "process_unit", original)
        manifest = questions_module.run_questions(graph_dir, paths_dir, tmp_path / "q", config, None)
        assert len(server.requests) == manifest.counts["paths:read"]  # no path was written twice
    kept = list(read_records(Question, tmp_path / "q" / "questions"))
    assert len({q.question_id for q in kept}) == len(kept) == manifest.counts["questions:kept"]


@pytest.mark.parametrize("text", [
    "As of March 2026, what is the name of your company?",  # a small base model's reply, once kept as "1967"
    "As of March 2026, where was Angela Merkel born?",  # names the start, but asks along another path
])
def test_an_llm_question_that_does_not_express_its_plan_is_rejected(tmp_path, graph_and_paths, text):
    def nonsense(body: dict) -> Reply:
        if not is_writer(body):
            return Reply(content=json.dumps({"answer": "no idea"}))
        return Reply(content=json.dumps({"question": text}))

    with OpenAIServer(nonsense) as server:
        manifest, kept, skipped = run(tmp_path, graph_and_paths, named(role(server)))
    assert kept == [] and manifest.counts["rejected:unfaithful"] == manifest.counts["paths:read"] > 0
    assert all(text in s.detail for s in skipped if s.reason == "unfaithful")


def test_an_outage_leaves_units_unfinished_and_a_rerun_finishes_them(tmp_path, graph_and_paths):
    down = {"on": True}

    def flaky(body: dict) -> Reply:
        return Reply(status=503, error="down") if down["on"] else Script()(body)

    with OpenAIServer(flaky) as server:
        config = named(role(server, max_retries=1), paths_per_unit=2)
        with pytest.raises(StageIncomplete, match="units unfinished after transient LLM failures"):
            run(tmp_path, graph_and_paths, config)
        assert not (tmp_path / "q" / "manifest.json").exists()
        down["on"] = False
        manifest, kept, skipped = run(tmp_path, graph_and_paths, config)
    assert kept and len(kept) + len(skipped) == manifest.counts["paths:read"]
    assert not any(s.reason == "writer_failed" for s in skipped)
    assert manifest.counts["llm:question-writer:server_errors"] > 0  # the failed attempts are reported too


@pytest.mark.parametrize("names_it", [False, True])
def test_a_described_start_is_never_sent_by_name_and_naming_it_is_rejected(tmp_path, graph_and_paths, names_it):
    def writer(body: dict) -> Reply:
        if not is_writer(body):
            return Reply(content=json.dumps({"answer": "no idea"}))
        assert "Angela Merkel" not in body["messages"][1]["content"]  # the writer only sees the description
        text = faithful_text(json.loads(body["messages"][1]["content"]))
        return Reply(content=json.dumps({"question": text.replace("?", ", Angela Merkel?") if names_it else text}))

    with OpenAIServer(writer) as server:
        config = QuestionConfig(writer=role(server), describe_start=1.0)
        manifest, kept, skipped = run(tmp_path, graph_and_paths, config)
    assert manifest.counts["paths:read"] > 0
    if names_it:
        assert kept == [] and manifest.counts["rejected:start_leak"] > 0
    else:
        assert kept and all("Angela Merkel" not in q.text and "a politician" in q.text for q in kept)
