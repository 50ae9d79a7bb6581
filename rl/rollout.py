"""One agent episode in the search environment, in the Nanbeige protocol: the loop both RL engines share.

`run_episode` takes a `sample(context_ids) -> (token_ids, logprobs)` coroutine, so the rl/ trainer (HF
`generate` on the policy) and the verl agent loop (verl's inference servers) run the very same turn loop,
token layout and Trajectory record. Token in, token out: sampled ids are kept as they are (never decoded
and re-encoded); template and observation ids come from the same segment-wise renderer as the offline
data. Layout, with the prompt ending in the first `<|im_start|>assistant\\n` header:

    response = turn_0 [<|im_end|>] \\n <|im_start|>user\\n<tool_response>..</tool_response><|im_end|>\\n
               <|im_start|>assistant\\n turn_1 ... turn_n [<|im_end|>] \\n

`response_mask` is 1 exactly on sampled tokens; the final `\\n` (mask 0) is where the verl layout puts
the outcome reward. `<|im_end|>` is added with mask 0 only when the policy was cut off before it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import torch

from ground.io import stable_hash
from pipeline.renders import ANSWER_TOOL, nanbeige_tool_response, parse_nanbeige_assistant
from rl.chat import IM_END, message_header, render_tokens
from schemas.critic import JudgedTrajectory
from schemas.dataset import RLPrompt
from schemas.trajectory import ToolCall, Trajectory, Turn
from synth.matching import match_answer

FRAMEWORK = "function_calling"  # the Nanbeige template is the hermes `<tool_call>` function-calling protocol
PARSE_ERROR = ("Error: no tool call found. Reply with <think>...</think>, then exactly one "
               "<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>, or the final answer in \\boxed{}.")

Execute = Callable[[str, dict], tuple[str, bool]]
Sample = Callable[[list[int]], Awaitable[tuple[list[int], list[float] | None]]]


@dataclass
class Episode:
    """An episode's tokens (prompt, response with its mask and logprobs), turn spans and turns."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    final_answer: str | None = None
    stop_reason: str = "max_turns"

    def extend(self, ids: list[int], sampled: bool, logprobs: list[float] | None = None) -> None:
        self.response_ids += ids
        self.response_mask += [int(sampled)] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)

    def turn_ids(self) -> list[int]:
        """Per response token: the turn it was sampled in, -1 elsewhere."""
        ids = [-1] * len(self.response_ids)
        for turn, (start, end) in enumerate(self.spans):
            ids[start:end] = [turn] * (end - start)
        return ids


def _turn_from_output(index: int, content: str, execute: Execute) -> tuple[Turn, bool]:
    """Parse one assistant message and run its call; returns the turn and whether it ends the episode.

    As in stage 3's episode loop (`synth.policies.base.run_episode`), an `answer` call ends the episode only
    when the environment accepts it; a malformed one (`{"answer": ..}`, an empty `text`) gets the
    environment's error back and the episode goes on, the rule the SFT data shows.
    """
    view = parse_nanbeige_assistant(content)
    turn = Turn(index=index, reasoning=view.reasoning, raw_output=content)
    if view.kind == "final":
        turn.final_answer = view.answer
        return turn, True
    if view.kind == "call":
        turn.tool_call = ToolCall(call_id=f"call_{index}", name=view.name, arguments=view.arguments)
        turn.observation, turn.tool_error = execute(view.name, view.arguments)
        if view.name == ANSWER_TOOL and not turn.tool_error:
            turn.final_answer = str(view.arguments["text"])
            return turn, True
    else:
        turn.parse_error = turn.observation = PARSE_ERROR
        turn.tool_error = True
    return turn, False


def prompt_ids(tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """The prompt messages rendered segment-wise, ending in the first assistant header."""
    header = tokenizer.encode(message_header("assistant"), add_special_tokens=False)
    return render_tokens(tokenizer, messages).input_ids + header


async def run_episode(sample: Sample, tokenizer, execute: Execute, prompt: list[int], *, max_turns: int,
                      max_response_tokens: int, max_observation_chars: int | None = None) -> Episode:
    """Sample turns until a final answer, `max_turns`, or the response budget runs out."""
    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    end_ids = encode(IM_END)
    newline = encode("\n")
    episode = Episode(prompt_ids=list(prompt))
    ended = True
    reserve = len(end_ids) + len(newline)  # room to close the last turn
    for index in range(max_turns):
        budget = max_response_tokens - len(episode.response_ids) - reserve
        if budget <= 0:
            break
        started = time.perf_counter()
        tokens, logprobs = await sample(episode.prompt_ids + episode.response_ids)
        tokens = list(tokens[:budget])
        ended = bool(tokens) and tokens[-len(end_ids):] == end_ids
        start = len(episode.response_ids)
        episode.extend(tokens, sampled=True, logprobs=logprobs[: len(tokens)] if logprobs else None)
        episode.spans.append((start, len(episode.response_ids)))
        content = tokenizer.decode(tokens[: -len(end_ids)] if ended else tokens, skip_special_tokens=False)
        turn, final = _turn_from_output(index, content, execute)
        if max_observation_chars is not None and turn.observation and len(turn.observation) > max_observation_chars:
            turn.observation = turn.observation[:max_observation_chars] + "...(truncated)"
        turn.prompt_tokens, turn.completion_tokens = len(episode.prompt_ids) + start, len(tokens)
        turn.seconds = time.perf_counter() - started
        episode.turns.append(turn)
        if final:
            episode.final_answer, episode.stop_reason = turn.final_answer, "answered"
            break
        feedback = ([] if ended else end_ids) + newline + render_tokens(
            tokenizer, [{"role": "user", "content": nanbeige_tool_response(turn.observation)}]).input_ids + \
            encode(message_header("assistant"))
        if len(episode.response_ids) + len(feedback) + reserve > max_response_tokens:
            break
        episode.extend(feedback, sampled=False)
        ended = True
    episode.extend(([] if ended else end_ids) + newline, sampled=False)
    return episode


def episode_trajectory(episode: Episode, messages: list[dict[str, str]], prompt: RLPrompt, *, trajectory_id: str,
                       policy: str, engine: str, seed: int, rollout_index: int, environment: str) -> Trajectory:
    """The episode as a canonical stage 3 record, so the stage 4 critic judges it like synthesized data."""
    return Trajectory(
        trajectory_id=trajectory_id, question_id=prompt.question_id, question=messages[-1]["content"],
        answer=prompt.answer, aliases=prompt.aliases, as_of=prompt.as_of, framework=FRAMEWORK, policy=policy,
        engine=engine, seed=seed, rollout=rollout_index,
        system_prompt=messages[0]["content"] if messages[0]["role"] == "system" else "",
        turns=episode.turns, final_answer=episode.final_answer, stop_reason=episode.stop_reason,
        outcome=match_answer(episode.final_answer, prompt.answer, prompt.aliases), environment=environment,
    )


def mask_failed_turns(episode: Episode, judged: JudgedTrajectory, failed_turns: str) -> tuple[list[int], list[float]]:
    """The response mask and the rewards of the turns that train, in order (the verl reward layout).

    Under `mask`, a turn the critic failed stays in context with its tokens masked out of the loss.
    """
    mask = list(episode.response_mask)
    rewards = []
    by_turn = {j.turn_index: j for j in judged.judgements}
    for turn, (start, end) in zip(episode.turns, episode.spans, strict=True):
        judgement = by_turn[turn.index]
        if end == start:
            continue
        if failed_turns == "mask" and not judgement.verdict:
            mask[start:end] = [0] * (end - start)
        else:
            rewards.append(judgement.reward)
    return mask, rewards


def hf_sampler(model, tokenizer, max_new_tokens: int, temperature: float) -> Sample:
    """Sampling from a transformers causal LM, stopping at `<|im_end|>`."""
    end_id = tokenizer.convert_tokens_to_ids(IM_END)

    async def sample(context: list[int]) -> tuple[list[int], None]:
        with torch.no_grad():
            input_ids = torch.tensor([context], device=model.device)
            output = model.generate(
                input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=max_new_tokens,
                do_sample=True, temperature=temperature, top_k=0, top_p=1.0, eos_token_id=end_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        generated = output[0, len(context):].tolist()
        return (generated[: generated.index(end_id) + 1] if end_id in generated else generated), None

    return sample


@dataclass
class Rollout:
    """One sampled episode for the rl/ trainer: full token sequence, loss mask, turn ids, and its record."""

    trajectory: Trajectory
    input_ids: list[int]
    loss_mask: list[int]
    turn_ids: list[int]


def rollout(model, tokenizer, execute: Execute, prompt: RLPrompt, rollout_index: int, *, max_turns: int,
            max_new_tokens: int, max_len: int, temperature: float, seed: int, policy_name: str = "rl-policy",
            environment: str = "") -> Rollout:
    """Run one episode with the policy itself as the sampler."""
    messages = [{"role": m.role, "content": m.content} for m in prompt.prompt]
    context = prompt_ids(tokenizer, messages)
    episode = asyncio.run(run_episode(hf_sampler(model, tokenizer, max_new_tokens, temperature), tokenizer, execute,
                                      context, max_turns=max_turns, max_response_tokens=max_len - len(context)))
    trajectory = episode_trajectory(
        episode, messages, prompt, trajectory_id=stable_hash(prompt.prompt_id, policy_name, seed, rollout_index),
        policy=policy_name, engine="rl-rollout", seed=seed, rollout_index=rollout_index, environment=environment)
    return Rollout(trajectory, episode.prompt_ids + episode.response_ids,
                   [0] * len(episode.prompt_ids) + episode.response_mask,
                   [-1] * len(episode.prompt_ids) + episode.turn_ids())
