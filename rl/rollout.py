"""Online rollouts: the policy answers an `rl` prompt in the search environment, in the Nanbeige protocol.

Token in, token out: the ids the policy sampled are kept as they are (never decoded and re-encoded), and
the template and observation ids around them come from the same segment-wise renderer as the offline
data, so what the trainer scores is exactly what was sampled. Each rollout is also written down as a
canonical `Trajectory` record, so the stage 4 critic can judge it like any synthesized trajectory.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from pipeline.io import stable_hash
from pipeline.renders import ANSWER_TOOL, nanbeige_tool_response, parse_nanbeige_assistant
from rl.chat import IM_END, message_header, render_tokens
from schemas.dataset import RLPrompt
from schemas.trajectory import ToolCall, Trajectory, Turn
from synth.matching import match_answer

FRAMEWORK = "function_calling"  # the Nanbeige template is the hermes `<tool_call>` function-calling protocol
PARSE_ERROR = ("Error: no tool call found. Reply with <think>...</think>, then exactly one "
               "<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>, or the final answer in \\boxed{}.")

Execute = Callable[[str, dict], tuple[str, bool]]


@dataclass
class Rollout:
    """One sampled episode: its token sequence (loss mask on sampled tokens, turn ids) and its record."""

    trajectory: Trajectory
    input_ids: list[int]
    loss_mask: list[int]
    turn_ids: list[int]


def _extend(rollout_ids: list[int], mask: list[int], turn_ids: list[int], ids: list[int], trains: int, turn: int) -> None:
    rollout_ids += ids
    mask += [trains] * len(ids)
    turn_ids += [turn] * len(ids)


@torch.no_grad()
def sample_turn(model, tokenizer, context: list[int], max_new_tokens: int, temperature: float) -> tuple[list[int], bool]:
    """Sample one assistant message after `context`; returns its ids and whether it ended with `<|im_end|>`."""
    end_id = tokenizer.convert_tokens_to_ids(IM_END)
    input_ids = torch.tensor([context], device=model.device)
    output = model.generate(
        input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=max_new_tokens,
        do_sample=True, temperature=temperature, top_k=0, top_p=1.0, eos_token_id=end_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    generated = output[0, len(context):].tolist()
    if end_id in generated:
        return generated[: generated.index(end_id) + 1], True
    return generated, False


def rollout(model, tokenizer, execute: Execute, prompt: RLPrompt, rollout_index: int, *, max_turns: int,
            max_new_tokens: int, max_len: int, temperature: float, seed: int, policy_name: str = "rl-policy",
            environment: str = "") -> Rollout:
    """Run one episode: sample a turn, parse it, execute the call, feed the observation back, repeat."""
    messages = [{"role": m.role, "content": m.content} for m in prompt.prompt]
    rendered = render_tokens(tokenizer, messages)
    ids, mask, turn_ids = list(rendered.input_ids), [0] * len(rendered), [-1] * len(rendered)
    header = tokenizer.encode(message_header("assistant"), add_special_tokens=False)
    end_ids = tokenizer.encode(IM_END, add_special_tokens=False)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    turns: list[Turn] = []
    final_answer, stop_reason = None, "max_turns"
    for index in range(max_turns):
        if len(ids) + len(header) + max_new_tokens + len(end_ids) > max_len:
            break
        started = time.perf_counter()
        _extend(ids, mask, turn_ids, header, 0, -1)
        prompt_tokens = len(ids)
        sampled, ended = sample_turn(model, tokenizer, ids, max_new_tokens, temperature)
        _extend(ids, mask, turn_ids, sampled, 1, index)
        if not ended:  # cut at max_new_tokens: close the turn as the template would; the policy did not say it
            _extend(ids, mask, turn_ids, end_ids, 0, index)
        _extend(ids, mask, turn_ids, newline, 0, -1)
        content = tokenizer.decode(sampled[:-1] if ended else sampled, skip_special_tokens=False)
        view = parse_nanbeige_assistant(content)
        turn = Turn(index=index, reasoning=view.reasoning, raw_output=content, prompt_tokens=prompt_tokens,
                    completion_tokens=len(sampled))
        if view.kind == "final" or (view.kind == "call" and view.name == ANSWER_TOOL):
            answer = view.answer if view.kind == "final" else str(view.arguments.get("text", ""))
            if view.kind == "call":
                turn.tool_call = ToolCall(call_id=f"call_{index}", name=view.name, arguments=view.arguments)
            turn.final_answer = final_answer = answer
            stop_reason = "answered"
        elif view.kind == "call":
            turn.tool_call = ToolCall(call_id=f"call_{index}", name=view.name, arguments=view.arguments)
            turn.observation, turn.tool_error = execute(view.name, view.arguments)
        else:
            turn.parse_error = PARSE_ERROR
            turn.observation = PARSE_ERROR
        turn.seconds = time.perf_counter() - started
        turns.append(turn)
        if stop_reason == "answered":
            break
        feedback = render_tokens(tokenizer, [{"role": "user", "content": nanbeige_tool_response(turn.observation)}])
        _extend(ids, mask, turn_ids, feedback.input_ids, 0, -1)
    trajectory = Trajectory(
        trajectory_id=stable_hash(prompt.prompt_id, policy_name, seed, rollout_index),
        question_id=prompt.question_id, question=messages[-1]["content"], answer=prompt.answer,
        aliases=prompt.aliases, as_of=prompt.as_of, framework=FRAMEWORK, policy=policy_name, engine="rl-rollout",
        seed=seed, rollout=rollout_index, system_prompt=messages[0]["content"] if messages[0]["role"] == "system" else "",
        turns=turns, final_answer=final_answer, stop_reason=stop_reason,
        outcome=match_answer(final_answer, prompt.answer, prompt.aliases), environment=environment,
    )
    return Rollout(trajectory, ids, mask, turn_ids)
