"""The policy interface and the one episode loop every framework and policy runs through.

A Policy starts an Agent per episode; the agent produces one model output per turn. The loop parses it
with the framework, executes the call in the environment, and records a canonical Turn. Unparseable
output is a recorded failed turn, and so is a final answer that only echoes our own prompt. An endpoint
that refuses a request ends the run with stop reason "error" and the turns so far (kept in the
`trajectories` config, never in the training configs); a transient failure (timeouts, an outage:
`LLMUnavailable`) is not finished work and propagates, so the stage leaves the unit for a rerun. `Turn.seconds` is the policy's own time for the turn (the request
latency of an LLM, zero for the offline policy and for cached responses), so offline runs are
reproducible record for record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import openai

from ground.io import stable_hash
from llm.client import LIVE, LLMError, LLMUnavailable
from schemas.questions import Question
from schemas.trajectory import StopReason, Trajectory, Turn
from synth.environment import SearchEnvironment
from synth.frameworks import Framework
from synth.frameworks.base import ANSWER_TOOL, ModelOutput, echoes
from synth.matching import match_answer


@dataclass
class PolicyOutput:
    output: ModelOutput
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_chars: int = 0
    seconds: float = 0.0
    injected_error: str | None = None
    model: str | None = None  # the model the server reported


class Agent(Protocol):
    async def act(self, turns: list[Turn]) -> PolicyOutput: ...


class Policy(Protocol):
    name: str
    engine: str
    model: str | None

    def start(self, question: Question, framework: Framework, seed: int, rollout: int) -> Agent: ...


def trajectory_id(question_id: str, framework: str, policy: str, model: str | None, rollout: int, seed: int) -> str:
    return stable_hash(question_id, framework, policy, model, rollout, seed)


def episode_seed(base_seed: int, question_id: str, framework: str, rollout: int) -> int:
    return int(stable_hash(base_seed, question_id, framework, rollout, length=8), 16)


async def run_episode(
    question: Question,
    framework: Framework,
    policy: Policy,
    env: SearchEnvironment,
    *,
    max_turns: int,
    max_parse_failures: int = 3,
    seed: int = 0,
    rollout: int = 0,
) -> Trajectory:
    """Solve one question with one framework and policy; always returns a Trajectory."""
    agent = policy.start(question, framework, seed, rollout)
    turns: list[Turn] = []
    stop: StopReason = "max_turns"
    final_answer: str | None = None
    error: str | None = None
    failures_in_a_row = 0
    served_model = policy.model
    prompt = framework.prompt_text(question.text)
    while len(turns) < max_turns:
        try:
            step = await agent.act(turns)
        except LLMUnavailable:
            raise  # not finished work: the unit stays unfinished and a rerun retries it
        except (LLMError, openai.APIError) as failure:  # the endpoint refused, or a reply the SDK cannot read
            stop, error = "error", f"{type(failure).__name__}: {failure}"[:500]
            break
        served_model = step.model or served_model
        call_id = f"call_{len(turns)}"
        parsed = framework.parse(step.output, call_id)
        if parsed.tool_call is not None and parsed.tool_call.name == ANSWER_TOOL and step.injected_error is None:
            text = str(parsed.tool_call.arguments.get("text", ""))
            if echoes(text, prompt):
                parsed.tool_call, parsed.parse_error = None, f"the answer {text[:60]!r} only repeats the prompt"
        turn = Turn(
            index=len(turns),
            reasoning=parsed.reasoning,
            raw_output=framework.raw_output(step.output),
            tool_call=parsed.tool_call,
            parse_error=parsed.parse_error,
            prompt_tokens=step.prompt_tokens,
            completion_tokens=step.completion_tokens,
            prompt_chars=step.prompt_chars,
            seconds=step.seconds,
            injected_error=step.injected_error,
        )
        if parsed.tool_call is not None:
            turn.observation, turn.tool_error = env.execute(parsed.tool_call.name, parsed.tool_call.arguments)
            failures_in_a_row = 0
        else:
            failures_in_a_row += 1
        turns.append(turn)
        if parsed.tool_call is not None and parsed.tool_call.name == ANSWER_TOOL and not turn.tool_error:
            turn.final_answer = final_answer = str(parsed.tool_call.arguments["text"])
            stop = "answered"
            break
        if failures_in_a_row >= max_parse_failures:
            stop = "parse_failures"
            break
    LIVE["episodes"] += 1
    return Trajectory(
        trajectory_id=trajectory_id(question.question_id, framework.name, policy.name, policy.model, rollout, seed),
        question_id=question.question_id,
        question=question.text,
        answer=question.answer,
        aliases=question.aliases,
        as_of=question.as_of,
        framework=framework.name,
        policy=policy.name,
        model=served_model,
        engine=policy.engine,
        seed=seed,
        rollout=rollout,
        system_prompt=framework.system_prompt(question.as_of),
        turns=turns,
        final_answer=final_answer,
        stop_reason=stop,
        outcome=match_answer(final_answer, question.answer, question.aliases),
        environment=env.environment_id,
        error=error,
    )
