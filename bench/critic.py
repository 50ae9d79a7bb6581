"""Stage 4 benchmark: offline critic cost as trajectories grow, and LLM judge throughput against a slow endpoint.

Scaling: a generated trajectory (search and open_page turns over pseudo-word pages, a few repeats) is judged
offline at N and 10 N turns; the ratio of per-turn times says whether judging stays near linear in the
length (every turn is compared with everything seen before it, so some growth is expected).
Judge throughput: a local OpenAI-compatible server (in its own process, as a real endpoint) answers each
request after a fixed latency; with at most C requests in flight the ideal rate is C / latency. Reported:
the rate of the LLM assessments alone, and of `judge_batch` (assessments, then the offline critic and
the records), each against that ideal.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import multiprocessing
import time

import numpy as np

from critic.judge import judge_batch
from critic.llm_judge import assess_trajectory
from critic.scoring import judge_turns
from llm.client import LLMClient
from schemas.config import JudgeConfig, LLMRole
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from tests.servers import OpenAIServer, Reply

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "dor", "len", "tas", "qui", "bar", "fen", "gol"]


def generated_trajectory(turns: int, seed: int = 0) -> Trajectory:
    """A long search trajectory: pages of Zipf-distributed pseudo-words, every 10th call a repeat."""
    rng = np.random.default_rng(seed)
    words = sorted({"".join(rng.choice(SYLLABLES, size=rng.integers(2, 4))) for _ in range(6000)})
    titles = [f"{w.capitalize()} {i}" for i, w in enumerate(words[:500])]

    def text(n: int) -> str:
        return " ".join(words[min(int(r) - 1, len(words) - 1)] for r in rng.zipf(1.4, size=n))

    history: list[Turn] = []
    for i in range(turns):
        if i % 10 == 9:
            previous = history[i - 3]
            call = previous.tool_call.model_copy(update={"call_id": f"c{i}"})
            observation = previous.observation
        elif i % 2 == 0:
            query = text(3)
            call = ToolCall(call_id=f"c{i}", name="search", arguments={"query": query})
            hits = [f"{k}. {titles[int(rng.integers(len(titles)))]}\n   {text(25)}." for k in range(1, 6)]
            observation = f"Results for {query!r}:\n" + "\n".join(hits)
        else:
            title = titles[int(rng.integers(len(titles)))]
            call = ToolCall(call_id=f"c{i}", name="open_page", arguments={"title": title})
            observation = f"{title} - page 1 of 1.\n\n{text(120)}."
        reasoning = f"The results mention {titles[i % len(titles)]}. I will look at {call.arguments.get('title', 'more')}."
        history.append(Turn(index=i, reasoning=reasoning, tool_call=call, observation=observation))
    return Trajectory(trajectory_id=f"bench-{turns}", question_id="q", question="Which pseudo word is it?",
                      answer="x", as_of=dt.date(2026, 1, 1), framework="tagged", policy="bench", engine="bench",
                      seed=seed, turns=history, stop_reason="max_turns",
                      outcome=Outcome(exact_match=False, f1=0.0, correct=False))


def per_turn_seconds(turns: int) -> float:
    trajectory = generated_trajectory(turns)
    started = time.perf_counter()
    judge_turns(trajectory, None, JudgeConfig())
    return (time.perf_counter() - started) / turns


class _SlowJudge:
    """The endpoint's model: one fixed valid assessment after a fixed latency (picklable for the fork)."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self.content = json.dumps({"sensible_next_step": 0.9, "sensible_rationale": "ok", "logical_soundness": 0.9,
                                   "soundness_rationale": "ok"})

    def __call__(self, body: dict) -> Reply:
        return Reply(content=self.content, delay_s=self.latency_s)


def _serve(model: _SlowJudge, channel, stop) -> None:
    """Server process: the endpoint runs beside, not inside, the process that judges."""
    with OpenAIServer(model) as server:
        channel.send(server.base_url)
        stop.wait()
        channel.send((len(server.requests), server.in_flight_peak))


def judge_throughput(trajectories: int, turns: int, concurrency: int, latency_s: float) -> dict[str, float]:
    batch = [generated_trajectory(turns, seed) for seed in range(trajectories)]
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    stop = context.Event()
    server = context.Process(target=_serve, args=(_SlowJudge(latency_s), child, stop), daemon=True)
    server.start()
    try:
        config = JudgeConfig(judge=LLMRole(base_url=parent.recv(), model="bench", max_concurrency=concurrency,
                                           api_key_env="UNSET"))

        async def assess_all():
            client = LLMClient(config.judge, None, name="judge")
            try:
                return await asyncio.gather(*(assess_trajectory(client, t, config) for t in batch))
            finally:
                await client.aclose()

        started = time.perf_counter()
        asyncio.run(assess_all())
        assess_seconds = time.perf_counter() - started
        started = time.perf_counter()
        judged, skipped = asyncio.run(judge_batch(batch, {}, config, None))
        batch_seconds = time.perf_counter() - started
    finally:
        stop.set()
        requests, peak = parent.recv()
        server.join(timeout=10)
    assert not skipped and len(judged) == trajectories
    per_pass, ideal = requests / 2, concurrency / latency_s
    return {"judge_requests": per_pass, "judge_ideal_per_s": ideal, "judge_peak_in_flight": peak,
            "judge_llm_rate_vs_ideal": round(per_pass / assess_seconds / ideal, 3),
            "judge_batch_rate_vs_ideal": round(per_pass / batch_seconds / ideal, 3)}


def run(quick: bool = False) -> dict[str, float]:
    short, long = (30, 300) if quick else (60, 600)
    short_s, long_s = per_turn_seconds(short), per_turn_seconds(long)
    results = {
        f"offline_ms_per_turn_{short}": round(short_s * 1000, 3),
        f"offline_ms_per_turn_{long}": round(long_s * 1000, 3),
        "offline_per_turn_ratio_long_vs_short": round(long_s / short_s, 2),
    }
    results.update(judge_throughput(trajectories=4 if quick else 16, turns=20, concurrency=8, latency_s=0.1))
    for name, value in results.items():
        print(f"   {name}: {value}")
    return results
