"""Stage 3 end to end: offline scripted runs in every framework, resume, and LLM policies over real HTTP."""

from __future__ import annotations

import asyncio
import inspect
import json
import re

import pytest

from ground.io import read_records
from llm.client import LLMClient, LLMUnavailable
from schemas.config import IndexConfig, LLMRole, TrajectoryConfig
from schemas.questions import Question
from schemas.trajectory import Trajectory
from synth.environment import SearchEnvironment, build_index
from synth.frameworks import FRAMEWORKS, ContextWindow, get_framework
from synth.matching import match_answer
from synth.policies import ERROR_KINDS, LLMPolicy, ScriptedPolicy, run_episode
from synth.policies.searcher import UNIDENTIFIED_ANSWER, QuestionReading, Searcher
from synth.trajectories import run_trajectories
from tests.servers import OpenAIServer, Reply
from tests.trajectory_fixtures import QUESTIONS, make_graph, make_questions

HIGH_RATES = {
    "repeated_search": 0.08,
    "malformed_arguments": 0.08,
    "off_path_detour": 0.08,
    "unsupported_claim": 0.08,
    "premature_answer": 0.03,
}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    root = tmp_path_factory.mktemp("stage3")
    make_graph(root / "graph")
    build_index(root / "graph", root / "index", IndexConfig(chunk_chars=400))
    make_questions(root / "questions")
    return root


@pytest.fixture(scope="module")
def offline_run(snapshot):
    config = TrajectoryConfig(rollouts=3, error_rates=HIGH_RATES, questions_per_unit=2, seed=7)
    manifest = run_trajectories(snapshot / "questions", snapshot / "index", snapshot / "offline", config,
                                snapshot / "cache")
    return manifest, list(read_records(Trajectory, snapshot / "offline" / "trajectories")), config


def test_offline_runs_cover_every_question_framework_and_rollout(offline_run):
    manifest, trajectories, config = offline_run
    keys = {(t.question_id, t.framework, t.rollout) for t in trajectories}
    assert len(trajectories) == len(keys) == len(QUESTIONS) * len(FRAMEWORKS) * config.rollouts
    assert all(t.policy == "scripted" and t.engine == "offline" and t.model is None for t in trajectories)
    assert manifest.counts["trajectories"] == len(trajectories)
    assert manifest.engines == {f"policy:{name}": "offline" for name in config.frameworks}
    assert manifest.counts["questions_in"] == len(QUESTIONS)
    assert sum(v for k, v in manifest.counts.items() if k.startswith("stop:")) == len(trajectories)


def test_every_observation_is_a_real_tool_result(offline_run, snapshot):
    _, trajectories, _ = offline_run
    env = SearchEnvironment.load(snapshot / "index")  # a fresh load: observations depend on (index, call) only
    executed = 0
    for trajectory in trajectories:
        assert trajectory.environment == env.environment_id
        framework = get_framework(trajectory.framework)
        for turn in trajectory.turns:
            reparsed = framework.parse(framework.output_of(turn), f"call_{turn.index}")
            assert reparsed.tool_call == turn.tool_call and reparsed.parse_error == turn.parse_error
            if turn.tool_call is None:
                assert turn.observation is None and turn.parse_error
                continue
            assert (turn.observation, turn.tool_error) == env.execute(turn.tool_call.name, turn.tool_call.arguments)
            executed += 1
    assert executed > 100


def test_outcomes_are_computed(offline_run):
    _, trajectories, _ = offline_run
    for trajectory in trajectories:
        assert trajectory.outcome == match_answer(trajectory.final_answer, trajectory.answer, trajectory.aliases)
        if trajectory.stop_reason == "answered":
            assert trajectory.turns[-1].final_answer == trajectory.final_answer
    honest = [t for t in trajectories if all(turn.injected_error != "premature_answer" for turn in t.turns)]
    premature = [t for t in trajectories if t.turns[-1].injected_error == "premature_answer"]
    assert honest and all(t.outcome.correct and t.stop_reason == "answered" for t in honest)
    assert premature and not any(t.outcome.correct for t in premature)


def test_each_error_kind_is_present_and_realistic(offline_run):
    _, trajectories, _ = offline_run
    turns = [(t, turn) for t in trajectories for turn in t.turns]
    kinds = {turn.injected_error for _, turn in turns} - {None}
    assert kinds == set(ERROR_KINDS)
    for trajectory, turn in turns:
        earlier = trajectory.turns[: turn.index]
        seen = " ".join(t.observation or "" for t in earlier)
        if turn.injected_error == "repeated_search":
            assert turn.tool_call.name == "search"
            assert any(t.tool_call is not None and t.tool_call.arguments == turn.tool_call.arguments for t in earlier)
        elif turn.injected_error == "malformed_arguments":
            assert turn.parse_error is not None or turn.tool_error
        elif turn.injected_error == "unsupported_claim":
            claimed = turn.reasoning.split("I believe ")[1].split(" is ", 1)[1].split(", which")[0]
            assert claimed not in seen and claimed not in trajectory.question
        elif turn.injected_error == "off_path_detour":
            target = turn.tool_call.arguments.get("title") or turn.tool_call.arguments.get("query")
            assert target not in {hop.head for q in QUESTIONS for hop in q.path.hops if q.question_id == trajectory.question_id}
        elif turn.injected_error == "premature_answer":
            assert turn.tool_call.name == "answer" and not trajectory.outcome.correct
    # an honest turn errs only when it opens a value by the name a row gave it and no page has that name;
    # it then searches for the name
    for trajectory, turn in turns:
        if turn.injected_error is None and (turn.tool_error or turn.parse_error):
            assert turn.tool_call.name == "open_page" and turn.observation.startswith("Error: no page titled")
            seen = " ".join(t.observation or "" for t in trajectory.turns[: turn.index])
            assert turn.tool_call.arguments["title"] in seen
            following = trajectory.turns[turn.index + 1] if turn.index + 1 < len(trajectory.turns) else None
            assert following is None or following.injected_error or following.tool_call.arguments == {
                "query": turn.tool_call.arguments["title"], "top_k": 5}


def test_honest_reasoning_quotes_observed_evidence(offline_run):
    _, trajectories, _ = offline_run
    checked = 0
    for trajectory in trajectories:
        for turn in trajectory.turns:
            queries = [str(t.tool_call.arguments.get("query")) for t in trajectory.turns[: turn.index + 1] if t.tool_call]
            for quote in re.findall(r'"([^"]+)"', turn.reasoning) if turn.injected_error is None else ():
                assert quote in " ".join(t.observation or "" for t in trajectory.turns[: turn.index]) or quote in queries
                checked += quote not in queries
    assert checked > 20


def test_a_rerun_resumes_without_redoing_units(offline_run, snapshot):
    _, trajectories, config = offline_run
    out = snapshot / "offline"
    parts = sorted((out / "parts" / "trajectories").glob("*.parquet"))
    assert len(parts) == 2
    kept_mtime = parts[0].stat().st_mtime_ns
    parts[1].unlink()  # a run killed after its first unit
    (out / "manifest.json").rename(out / ".pending-manifest")
    (out / ".pending-key").write_text(json.loads((out / ".pending-manifest").read_text())["key"])
    for shard in (out / "trajectories").glob("*.parquet"):
        shard.unlink()
    run_trajectories(snapshot / "questions", snapshot / "index", out, config, snapshot / "cache")
    assert parts[0].stat().st_mtime_ns == kept_mtime and parts[1].is_file()
    assert list(read_records(Trajectory, out / "trajectories")) == trajectories


# --- LLM policies over a real OpenAI-compatible server -------------------------------------------------

def _framework_of(body: dict) -> str:
    if body.get("tools"):
        return "function_calling"
    return "tagged" if "<tools>" in body["messages"][0]["content"] else "react"


def _broken(name: str) -> Reply:
    if name == "function_calling":
        return Reply(content="", tool_calls=[{"id": "call_bad", "name": "search", "arguments": '{"query": '}])
    return Reply(content="Let me think about where to start." if name == "react" else "<think>hmm</think><tool_call>{oops")


def _scripted_model(body: dict) -> Reply:
    """A model speaking each framework's protocol: broken output once, then search, open, answer."""
    name = _framework_of(body)
    question_text = body["messages"][1]["content"].removeprefix("Question: ")
    question = next(q for q in QUESTIONS if q.text == question_text)
    step = sum(m["role"] == "assistant" for m in body["messages"])
    plan = [
        None,
        ("search", {"query": question.path.start}),
        ("open_page", {"title": question.path.start}),
        ("answer", {"text": question.answer}),
    ]
    if plan[step] is None:
        return _broken(name)
    tool, arguments = plan[step]
    output = get_framework(name).render(f"Step {step}.", tool, json.dumps(arguments), f"call_srv_{step}")
    return Reply(content=output.content, tool_calls=output.tool_calls or None, prompt_tokens=len(json.dumps(body)) // 4,
                 delay_s=0.02)


def _without_seconds(trajectory: Trajectory) -> dict:
    """A record minus request latencies (a cached response took no time)."""
    record = trajectory.model_dump()
    for turn in record["turns"]:
        turn.pop("seconds")
    return record


def test_llm_policies_speak_each_protocol(snapshot):
    out = snapshot / "llm"
    with OpenAIServer(_scripted_model) as server:
        role = LLMRole(base_url=server.base_url, model="test-model", max_concurrency=4, max_retries=0)
        config = TrajectoryConfig(policies={name: role for name in FRAMEWORKS}, rollouts=2, questions_per_unit=1,
                                  units_in_flight=4)
        manifest = run_trajectories(snapshot / "questions", snapshot / "index", out, config, snapshot / "cache")
        requests = len(server.requests)
        assert 1 < server.in_flight_peak <= 4  # one endpoint: its bound holds across questions and frameworks
        trajectories = list(read_records(Trajectory, out / "trajectories"))
        # killed before any unit was written: the rerun is served from the LLM cache, zero new requests
        (out / ".pending-key").write_text(manifest.key)
        (out / "manifest.json").unlink()
        for part in (out / "parts" / "trajectories").glob("*.parquet"):
            part.unlink()
        run_trajectories(snapshot / "questions", snapshot / "index", out, config, snapshot / "cache")
        assert len(server.requests) == requests
        rerun = list(read_records(Trajectory, out / "trajectories"))
        assert [_without_seconds(t) for t in rerun] == [_without_seconds(t) for t in trajectories]
    assert len(trajectories) == len(QUESTIONS) * len(FRAMEWORKS) * 2 and requests == 4 * len(trajectories)
    assert {t.rollout for t in trajectories} == {0, 1}  # rollouts are separate requests, never one cached reply
    assert manifest.engines == {f"policy:{name}": "openai:test-model" for name in config.frameworks}
    env = SearchEnvironment.load(snapshot / "index")
    for trajectory in trajectories:
        assert (trajectory.policy, trajectory.engine, trajectory.model) == ("llm", "openai:test-model", "test-model")
        assert trajectory.stop_reason == "answered" and trajectory.outcome.correct
        first, *rest = trajectory.turns
        assert first.tool_call is None and first.parse_error and first.observation is None
        assert [t.tool_call.name for t in rest] == ["search", "open_page", "answer"]
        for turn in rest:
            assert (turn.observation, turn.tool_error) == env.execute(turn.tool_call.name, turn.tool_call.arguments)
            assert turn.prompt_tokens > 0 and turn.prompt_chars > 0
    bodies = {name: [b for b in server.requests if _framework_of(b) == name] for name in FRAMEWORKS}
    second = {name: next(b for b in bodies[name] if len(b["messages"]) == 4) for name in FRAMEWORKS}
    assert "could not be parsed" in second["react"]["messages"][3]["content"]
    assert second["function_calling"]["messages"][3]["role"] == "tool"
    assert second["function_calling"]["messages"][3]["tool_call_id"] == "call_bad"
    assert second["tagged"]["messages"][3]["content"].startswith("<tool_response>\nError: your output")
    assert all("tools" not in b for b in bodies["react"] + bodies["tagged"])


def test_an_endpoint_that_refuses_ends_the_run_with_error(snapshot):
    with OpenAIServer(lambda body: Reply(status=400, error="bad request")) as server:
        env = SearchEnvironment.load(snapshot / "index")

        async def episode():
            client = LLMClient(LLMRole(base_url=server.base_url, model="m", max_retries=0), None)
            try:
                return await run_episode(QUESTIONS[0], get_framework("react"), LLMPolicy(client, ContextWindow()),
                                         env, max_turns=5)
            finally:
                await client.aclose()

        trajectory = asyncio.run(episode())
    assert trajectory.stop_reason == "error" and trajectory.turns == [] and not trajectory.outcome.correct
    assert trajectory.error.startswith("LLMError: ") and "(400)" in trajectory.error


@pytest.mark.parametrize("framework_name", ["tagged"])
def test_a_600_turn_run_keeps_the_prompt_bounded(snapshot, framework_name):
    """A model that never answers, over HTTP; the server measures every request body it receives.

    (Every framework's bound at 600 turns is also checked without HTTP in test_frameworks.)
    """
    framework = get_framework(framework_name)

    def searcher(body: dict) -> Reply:
        step = len(server.requests)
        arguments = {"query": f"Chicago plan number {step % 60}", "top_k": 5}
        output = framework.render("Keep looking.", "search", json.dumps(arguments), f"c{step}")
        return Reply(content=output.content, tool_calls=output.tool_calls or None)

    env = SearchEnvironment.load(snapshot / "index")
    window = ContextWindow(keep_last_observations=5, keep_last_turns=20)
    with OpenAIServer(searcher) as server:

        async def episode():
            client = LLMClient(LLMRole(base_url=server.base_url, model="m"), None)
            try:
                return await run_episode(QUESTIONS[0], framework, LLMPolicy(client, window), env, max_turns=600)
            finally:
                await client.aclose()

        trajectory = asyncio.run(episode())
        sizes = [len(json.dumps(body)) for body in server.requests]
    assert len(trajectory.turns) == 600 and trajectory.stop_reason == "max_turns"
    assert len(sizes) == 600
    assert max(sizes) < 24_000  # fixed bound: system + question + note + 20 turns, 5 observations in full
    assert max(sizes[-300:]) < 1.1 * max(sizes[60:120])  # no growth once the window is full
    assert max(turn.prompt_chars for turn in trajectory.turns) < 24_000
    assert all(not turn.tool_error and "Results for" in turn.observation for turn in trajectory.turns)


def test_commands(snapshot, tmp_path, capsys):
    from cli.main import build_parser, main
    from cli.trajectories import config_from_args

    common = ["--questions", str(snapshot / "questions"), "--index", str(snapshot / "index")]
    out = tmp_path / "cli"
    assert main(["trajectories", *common, "--out", str(out), "--frameworks", "react", "--rollouts", "1",
                 "--error-rate", "premature_answer=0.5", "--cache", str(tmp_path / "cache")]) == 0
    assert "trajectories: 4 runs of 4 questions" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["error_rates"]["premature_answer"] == 0.5
    assert manifest["config"]["error_rates"]["repeated_search"] == TrajectoryConfig().error_rates["repeated_search"]

    assert main(["trajectories", *common, "--out", str(tmp_path / "x"), "--error-rate", "typo=0.1"]) == 2
    assert "unknown error kinds ['typo']" in capsys.readouterr().err
    assert main(["trajectories", *common, "--out", str(tmp_path / "x"), "--llm-base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--llm-base-url needs --llm-model" in capsys.readouterr().err
    assert main(["index", "--graph", str(tmp_path / "missing"), "--out", str(tmp_path / "i")]) == 2
    assert "no finished stage 1 output" in capsys.readouterr().err

    args, _ = build_parser().parse_known_args(
        ["trajectories", "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m", "--llm-frameworks", "tagged",
         "--llm-api-key-env", "MY_KEY", "--max-turns", "600", "--keep-last", "3"])
    config = config_from_args(args)
    assert set(config.policies) == {"tagged"} and config.policies["tagged"].api_key_env == "MY_KEY"
    assert (config.max_turns, config.keep_last_observations) == (600, 3)


def test_the_searcher_holds_no_gold_path_and_ranks_candidates_by_the_question(snapshot):
    """The acting searcher is built from the question's reading alone (its words, relations and answer kind):
    no path entity the question does not name, no value, no answer, no index. Given a row with several values
    ("Subdivision name: United States", "Subdivision name1: Illinois") it reads each value's page and goes on
    from the one that fits the question's description ("the state whose largest city ...")."""
    from tests.trajectory_fixtures import QUESTIONS

    assert list(inspect.signature(Searcher).parameters) == ["reading", "style", "top_k"]
    question = next(q for q in QUESTIONS if q.question_id == "q-capital")
    reading = repr(QuestionReading.of(question))
    hidden = [n for n in question.path.nodes if n.split(",")[0] not in question.text]
    assert hidden and not any(name in reading for name in hidden + [question.answer])
    env = SearchEnvironment.load(snapshot / "index")
    trajectory = asyncio.run(run_episode(question, get_framework("function_calling"), ScriptedPolicy(env, {}), env,
                                         max_turns=60))
    opened = [t.tool_call.arguments["title"] for t in trajectory.turns if t.tool_call.name == "open_page"]
    assert opened.index("Illinois") < opened.index("United States")  # both candidates read, in the row's order
    assert "Of these, Illinois fits the question's description best." in " ".join(t.reasoning for t in trajectory.turns)
    assert trajectory.final_answer == "Springfield" and trajectory.outcome.correct


def test_the_searcher_reformulates_then_gives_up_saying_why(snapshot):
    """A start no search finds: each new query is built from the question's keywords, never the question
    pasted, and the run ends with no answer and the reason, not a guess."""
    from tests.trajectory_fixtures import _hop, _question

    question = _question("q-lost", "Which plugh did the frobnicated xyzzy quux approve?",
                         [_hop("Chicago", "council_plan", value="plan number 42", value_type="string")], "plan number 42")
    env = SearchEnvironment.load(snapshot / "index")
    trajectory = asyncio.run(run_episode(question, get_framework("function_calling"), ScriptedPolicy(env, {}), env,
                                         max_turns=60))
    queries = [t.tool_call.arguments["query"] for t in trajectory.turns if t.tool_call.name == "search"]
    assert len(queries) == len(set(queries)) >= 2
    assert all(q != question.text and "which" not in q.split() for q in queries)
    assert any("I will reformulate the query as" in t.reasoning for t in trajectory.turns)
    last = trajectory.turns[-1]
    assert trajectory.final_answer == UNIDENTIFIED_ANSWER and not trajectory.outcome.correct
    assert "No search found a page that fits" in last.reasoning and "I have no supported answer." in last.reasoning
    assert not any("plan number 42" in t.reasoning or "Chicago" in t.reasoning for t in trajectory.turns)


def test_parts_are_streamed_into_numbered_shards(offline_run, snapshot, tmp_path, monkeypatch):
    import synth.trajectories as stage
    from ground.io import WorkUnits

    manifest, trajectories, config = offline_run
    units = stage.plan_units(read_records(Question, snapshot / "questions" / "questions"), config)
    monkeypatch.setattr(stage, "SHARD_RECORDS", 10)
    outputs, counts = stage.merge_parts(units, WorkUnits(snapshot / "offline", ["trajectories"]), tmp_path)
    shards = -(-len(trajectories) // 10)
    assert outputs == [f"trajectories/trajectories-{i:05d}-of-{shards:05d}.parquet" for i in range(shards)]
    assert list(read_records(Trajectory, tmp_path / "trajectories")) == trajectories
    assert counts == {k: v for k, v in manifest.counts.items() if not k.startswith("questions_")}


@pytest.mark.parametrize(("framework_name", "reply"), [
    ("tagged", ", then"),  # a base model continuing our own format reminder
    ("function_calling", "I need to find out more about this before I can give the answer."),
])
def test_an_echo_or_a_ramble_is_never_the_final_answer(snapshot, framework_name, reply):
    with OpenAIServer(lambda body: Reply(content=reply)) as server:
        env = SearchEnvironment.load(snapshot / "index")

        async def episode():
            client = LLMClient(LLMRole(base_url=server.base_url, model="m", max_retries=0), None)
            try:
                return await run_episode(QUESTIONS[0], get_framework(framework_name), LLMPolicy(client, ContextWindow()),
                                         env, max_turns=5, max_parse_failures=3)
            finally:
                await client.aclose()

        trajectory = asyncio.run(episode())
    assert trajectory.final_answer is None and trajectory.stop_reason == "parse_failures"
    assert all(turn.parse_error for turn in trajectory.turns) and trajectory.model == "m"


def test_an_outage_is_not_an_error_trajectory(snapshot):
    with OpenAIServer(lambda body: Reply(status=503, error="down")) as server:
        env = SearchEnvironment.load(snapshot / "index")

        async def episode():
            client = LLMClient(LLMRole(base_url=server.base_url, model="m", max_retries=1, backoff_s=0.01), None)
            try:
                return await run_episode(QUESTIONS[0], get_framework("react"), LLMPolicy(client, ContextWindow()),
                                         env, max_turns=5)
            finally:
                await client.aclose()

        with pytest.raises(LLMUnavailable):
            asyncio.run(episode())


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_reasoning_a_server_split_off_stays_the_turns_reasoning(snapshot, name):
    """vLLM and SGLang with a reasoning parser return the model's <think> text as `reasoning_content`,
    apart from `content`: the turn keeps it as its reasoning, as when the server leaves it in place."""
    framework = get_framework(name)
    question = QUESTIONS[0]

    def reasoning_model(body: dict) -> Reply:
        output = framework.render("", "search", json.dumps({"query": question.path.start}), "call_0")
        content = output.content.replace("<think>\n\n</think>\n\n", "")  # what the parser left in content
        return Reply(content=content, tool_calls=output.tool_calls or None,
                     reasoning_content="The start entity's page has the first hop.")

    with OpenAIServer(reasoning_model) as server:
        env = SearchEnvironment.load(snapshot / "index")

        async def episode():
            client = LLMClient(LLMRole(base_url=server.base_url, model="m", max_retries=0), None)
            try:
                return await run_episode(question, framework, LLMPolicy(client, ContextWindow()), env, max_turns=1)
            finally:
                await client.aclose()

        trajectory = asyncio.run(episode())
    turn = trajectory.turns[0]
    assert turn.tool_call is not None and turn.tool_call.name == "search", turn
    assert "The start entity's page has the first hop." in turn.reasoning
