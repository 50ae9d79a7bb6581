"""Stage 3 benchmark: trajectory collection against a slow LLM endpoint, and search latency on a big index.

Collection: a local OpenAI-compatible server answers every request after a fixed 200 ms; the policy's
endpoint allows at most C requests in flight, so the ideal rate is C / 0.2 requests a second. The whole
`run_trajectories` stage runs (Beam, environment, parsing, writing) over questions x frameworks with a
model that searches for a few turns and then answers. The server runs in its own process, as a real
endpoint would. Reported: the rate in the steady window (first request to last reply) and over the whole
stage including Beam start-up and writing, each against the ideal (target >= 0.9 for the steady rate).
Search: median and p99 latency of `search` calls on a bm25s index of generated documents (100k; 10k
with --quick), plus the index build time.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import tempfile
import time
from pathlib import Path

import numpy as np

from ground.io import write_manifest, write_records
from ground.version import code_version
from schemas.config import BeamOptions, IndexConfig, LLMRole, TrajectoryConfig
from schemas.environment import IndexedPage
from schemas.manifest import Manifest
from schemas.questions import Path as QPath
from schemas.questions import PathHop, Question
from schemas.wiki import Provenance
from synth.environment import SearchEnvironment, write_index
from synth.frameworks import FRAMEWORKS, get_framework
from synth.trajectories import run_trajectories
from tests.servers import OpenAIServer, Reply

LATENCY_S = 0.2
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "dor", "len", "tas", "qui", "bar", "fen", "gol"]


def _vocabulary(size: int, rng: np.random.Generator) -> np.ndarray:
    words = {"".join(rng.choice(SYLLABLES, size=rng.integers(2, 5))) for _ in range(size * 2)}
    return np.array(sorted(words)[:size], dtype=object)


def generated_pages(count: int, seed: int = 0, words_per_page: int = 80) -> list[IndexedPage]:
    """Pages with Zipf-distributed words from a pseudo-word vocabulary and distinct two-word titles."""
    rng = np.random.default_rng(seed)
    vocabulary = _vocabulary(20_000, rng)
    ranks = np.minimum(rng.zipf(1.3, size=(count, words_per_page)) - 1, len(vocabulary) - 1)
    pages = []
    for i in range(count):
        body = " ".join(vocabulary[ranks[i]])
        title = f"{vocabulary[i % len(vocabulary)].capitalize()} {i}"
        sentences = [body[j : j + 160] for j in range(0, len(body), 160)]
        pages.append(IndexedPage(title=title, page_id=i, revision_id=i, chunks=[". ".join(sentences) + "."]))
    return pages


def build_environment(pages: list[IndexedPage], folder: Path) -> tuple[SearchEnvironment, float]:
    started = time.perf_counter()
    write_index(pages, folder, IndexConfig())
    write_manifest(folder, Manifest(stage="index", key="bench", code_version=code_version(),
                                    config=IndexConfig().model_dump()))
    seconds = time.perf_counter() - started
    return SearchEnvironment.load(folder), seconds


def search_latency(count: int, folder: Path, queries: int = 400) -> dict[str, float]:
    pages = generated_pages(count)
    env, build_seconds = build_environment(pages, folder)
    rng = np.random.default_rng(1)
    times = []
    for q in range(queries):
        page = pages[int(rng.integers(len(pages)))]
        words = page.chunks[0].replace(".", "").split()
        query = page.title if q % 4 == 0 else " ".join(rng.choice(words, size=3))
        started = time.perf_counter()
        env.execute("search", {"query": query, "top_k": 5})
        times.append(time.perf_counter() - started)
    ms = np.array(times) * 1000
    return {"search_docs": count, "index_build_s": round(build_seconds, 2),
            "search_median_ms": round(float(np.median(ms)), 3), "search_p99_ms": round(float(np.percentile(ms, 99)), 3)}


def _questions(pages: list[IndexedPage], count: int) -> list[Question]:
    stamp = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    questions = []
    for i in range(count):
        head, tail = pages[i].title, pages[i + 1].title
        hop = PathHop(head=head, relation="links_to", tail=tail, value_type="entity",
                      provenance=Provenance(page_id=i, page_title=head, revision_id=i, timestamp=stamp))
        path = QPath(path_id=f"p{i}", start=head, nodes=[head, tail], hops=[hop], answer=tail, answer_type="entity", seed=0)
        questions.append(Question(question_id=f"q{i:05d}", text=f"Which page does {head} lead to?", answer=tail,
                                  as_of=stamp.date(), hops=1, path=path, engine="bench"))
    return questions


def _framework_of(body: dict) -> str:
    if body.get("tools"):
        return "function_calling"
    return "tagged" if "<tools>" in body["messages"][0]["content"] else "react"


class _SlowModel:
    """The model behind the server: searches for `turns - 1` turns, then answers; every reply takes 200 ms."""

    def __init__(self, answers: dict[str, str], turns: int, stats):
        self.answers, self.turns, self.stats = answers, turns, stats

    def __call__(self, body: dict) -> Reply:
        with self.stats.get_lock():
            if self.stats[0] == 0:
                self.stats[1] = time.time()
            self.stats[0] += 1
            self.stats[2] = time.time() + LATENCY_S  # when this reply leaves
        name = _framework_of(body)
        step = sum(m["role"] == "assistant" for m in body["messages"])
        question = body["messages"][1]["content"].removeprefix("Question: ").split("\n\n")[0]
        if step >= self.turns - 1:
            tool, arguments = "answer", {"text": self.answers[question]}
        else:
            tool, arguments = "search", {"query": f"{question.split()[3]} {step}", "top_k": 5}
        output = get_framework(name).render(f"Turn {step}.", tool, json.dumps(arguments), f"call_{step}")
        return Reply(content=output.content, tool_calls=output.tool_calls or None, delay_s=LATENCY_S)


def _serve(model: _SlowModel, address, stop) -> None:
    """Server process: the endpoint runs beside, not inside, the process that collects trajectories."""
    with OpenAIServer(model) as server:
        address.send((server.base_url, None))
        stop.wait()
        address.send((server.base_url, server.in_flight_peak))


def collection_throughput(concurrency: int, episodes: int, turns: int, folder: Path, workers: int = 1) -> dict[str, float]:
    """`workers` Beam worker processes share the C requests in flight (C / workers each)."""
    pages = generated_pages(500, seed=2)
    build_environment(pages, folder / "index")
    frameworks = sorted(FRAMEWORKS)
    questions = _questions(pages, -(-episodes // len(frameworks)))
    write_records(Question, questions, folder / "questions" / "questions" / "questions-00000.parquet")
    write_manifest(folder / "questions", Manifest(stage="questions", key="bench", code_version=code_version()))
    context = multiprocessing.get_context("fork")
    stats = context.Array("d", [0.0, 0.0, 0.0])  # requests, first request time, last reply time
    parent, child = context.Pipe()
    stop = context.Event()
    model = _SlowModel({q.text: q.answer for q in questions}, turns, stats)
    server = context.Process(target=_serve, args=(model, child, stop), daemon=True)
    server.start()
    try:
        base_url, _ = parent.recv()
        role = LLMRole(base_url=base_url, model="bench", max_concurrency=concurrency // workers, max_retries=3,
                       timeout_s=30)
        config = TrajectoryConfig(policies={name: role for name in frameworks}, frameworks=frameworks, rollouts=1,
                                  max_turns=turns, questions_per_unit=-(-len(questions) // workers))
        started, cpu_started = time.perf_counter(), time.process_time()
        manifest = run_trajectories(folder / "questions", folder / "index", folder / "out", config, cache_dir=None,
                                    beam=BeamOptions(direct_num_workers=workers))
        stage_seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        steady_seconds = stats[2] - stats[1]
        stop.set()
        _, peak = parent.recv()
    finally:
        server.join(timeout=10)
    requests = int(stats[0])
    ideal = concurrency / LATENCY_S
    return {
        "concurrency": concurrency,
        "workers": workers,
        "requests": requests,
        "in_flight_peak": peak,
        "trajectories": manifest.counts["trajectories"],
        "turns": manifest.counts["turns"],
        "answered": manifest.counts.get("stop:answered", 0),
        "failed_runs": manifest.counts.get("stop:error", 0),
        "collector_cpu_ms_per_request": round(cpu_seconds / max(requests, 1) * 1000, 2),
        "ideal_requests_per_s": ideal,
        "steady_requests_per_s": round(requests / steady_seconds, 2),
        "steady_ratio_to_ideal": round(requests / steady_seconds / ideal, 3),
        "stage_requests_per_s": round(requests / stage_seconds, 2),
        "stage_ratio_to_ideal": round(requests / stage_seconds / ideal, 3),
    }


def _report(result: dict) -> None:
    print(f"   collection: C={result['concurrency']} over {result['workers']} worker(s), {result['requests']} requests, "
          f"peak in flight {result['in_flight_peak']}: {result['steady_requests_per_s']}/s steady "
          f"({result['steady_ratio_to_ideal']:.0%} of ideal {result['ideal_requests_per_s']:.0f}/s; target >= 90%), "
          f"{result['stage_ratio_to_ideal']:.0%} over the whole stage; collector CPU "
          f"{result['collector_cpu_ms_per_request']} ms a request", flush=True)


def run(quick: bool = False) -> dict[str, float]:
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        concurrency, episodes, turns = (8, 24, 8) if quick else (16, 96, 12)
        for workers in (1,) if quick else (1, 2):
            collection = collection_throughput(concurrency, episodes, turns, root / f"collect{workers}", workers)
            _report(collection)
            results.update({f"{key}@{workers}w": value for key, value in collection.items()})
        search = search_latency(10_000 if quick else 100_000, root / "search")
        print(f"   search over {search['search_docs']} docs: median {search['search_median_ms']} ms, "
              f"p99 {search['search_p99_ms']} ms (index built in {search['index_build_s']} s)", flush=True)
    return {**results, **search}
