"""The `few_shot` option of a policy role: a worked episode shown as chat turns in the framework's protocol."""

from __future__ import annotations

import json

import pytest

from ground.errors import UserError
from schemas.config import LLMRole, TrajectoryConfig
from synth.environment import SearchEnvironment
from synth.frameworks import FRAMEWORKS, get_framework
from synth.policies.llm import FEW_SHOT_EPISODE, few_shot_turns
from synth.trajectories import make_policies, run_trajectories
from tests.servers import OpenAIServer, Reply
from tests.trajectory_fixtures import QUESTIONS, make_snapshot

EPISODE = json.loads(FEW_SHOT_EPISODE.read_text(encoding="utf-8"))
TEXT_FRAMEWORKS = [name for name in FRAMEWORKS if get_framework(name).text_protocol]


@pytest.mark.parametrize("name", TEXT_FRAMEWORKS)
def test_the_example_is_written_in_the_protocol_it_teaches(name):
    """Every reply of the example parses back, by the framework's own parser, to the call it shows; the
    turns alternate and end with the model's answer, so the real question follows as the next user turn."""
    framework = get_framework(name)
    turns = list(few_shot_turns(name))
    assert [m["role"] for m in turns] == ["user", "assistant"] + ["user", "assistant"] * (len(EPISODE["steps"]) - 1)
    assert EPISODE["question"] in turns[0]["content"]
    replies = [m for m in turns if m["role"] == "assistant"]
    for index, (reply, step) in enumerate(zip(replies, EPISODE["steps"], strict=True)):
        parsed = framework.parse(framework.output_of(_turn(reply["content"])), f"call_{index}")
        assert parsed.parse_error is None, (name, reply)
        assert (parsed.tool_call.name, parsed.tool_call.arguments) == (step["tool"], step["arguments"])
        assert step["reasoning"] in parsed.reasoning
    observations = [m["content"] for m in turns[2::2]]
    assert all(step["observation"] in text for step, text in zip(EPISODE["steps"], observations, strict=False))


def _turn(raw_output: str):
    from schemas.trajectory import Turn

    return Turn(index=0, raw_output=raw_output)


def test_native_function_calling_cannot_be_shown_as_text(tmp_path):
    with pytest.raises(ValueError, match="natively"):
        get_framework("function_calling").example_messages(EPISODE["question"], EPISODE["steps"])
    snapshot = make_snapshot(tmp_path / "snapshot")
    role = LLMRole(base_url="http://127.0.0.1:9/v1", model="m", few_shot=True)
    config = TrajectoryConfig(frameworks=["function_calling"], policies={"function_calling": role})
    with pytest.raises(UserError, match="few_shot is for text protocols"):
        make_policies(config, SearchEnvironment.load(snapshot / "index"), None)


def test_a_few_shot_role_sends_the_example_before_the_question_and_others_do_not(tmp_path):
    """One endpoint, two roles differing only in `few_shot`: they share one client (one bound on requests in
    flight), and only the few-shot role's requests carry the example, between the system prompt and the
    question; the reply is parsed as usual."""
    snapshot = make_snapshot(tmp_path / "snapshot")
    framework = get_framework("react")
    bodies = []

    def model(body):
        bodies.append(body)
        return Reply(content=framework.render("Look it up.", "answer", '{"text": "x"}', "c").content)

    with OpenAIServer(model) as server:
        plain = LLMRole(base_url=server.base_url, model="m", max_retries=0)
        shown = plain.model_copy(update={"few_shot": True})
        config = TrajectoryConfig(frameworks=["react", "tagged"], policies={"react": shown, "tagged": plain},
                                  max_turns=1, max_questions=1)
        policies, clients = make_policies(config, SearchEnvironment.load(snapshot / "index"), None)
        assert len(clients) == 1 and policies["react"].few_shot and not policies["tagged"].few_shot
        run_trajectories(snapshot / "questions", snapshot / "index", tmp_path / "out", config, None)
    example = list(few_shot_turns("react"))
    by_framework = {("react" if b["messages"][0]["content"].startswith("You are a research agent") else "tagged"): b
                    for b in bodies}
    react, tagged = by_framework["react"]["messages"], by_framework["tagged"]["messages"]
    assert react[1:1 + len(example)] == example
    assert react[1 + len(example)]["content"] == tagged[1]["content"]  # the question, after the example
    assert tagged[1]["content"] in {framework.user_prompt(q.text) for q in QUESTIONS}
    assert len(react) == 2 + len(example) and len(tagged) == 2
    assert EPISODE["question"] not in json.dumps(tagged)
