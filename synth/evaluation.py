"""`hopsmith eval`: how hard the questions are for a given solver, measured over the run's own search index.

A policy (the offline searcher, the naive searcher below, or an LLM role) solves every question `k` times
through the same episode loop as stage 3 (`synth.trajectories.solve_questions`). Each question becomes a
`QuestionResult` whose rollouts carry BrowseComp-Plus's run fields (tool call counts, status, retrieved doc
ids, final output), graded by `synth.matching`. `summarize` reads only those records, so a test can
recompute every figure from them, and `run_file` writes a rollout as BrowseComp-Plus's run JSON.

Doc ids are page ids (strings). A question's evidence pages are its path's pages that the index holds
(every hop's head and entity tail); its gold page is the page that states the answer (the answer's own page
for an entity answer, else the last hop's head).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ground.io import atomic_write_text, stable_hash
from llm.client import LLMClient, run_async
from schemas.config import LLMRole, TrajectoryConfig
from schemas.evaluation import OutputItem, QuestionResult, RolloutResult
from schemas.questions import Question
from schemas.trajectory import Trajectory, Turn
from synth.environment import SearchEnvironment, environment_of
from synth.frameworks import Framework
from synth.matching import normalized_text
from synth.policies import Policy, PolicyOutput
from synth.report import question_shape
from synth.trajectories import make_policies, solve_questions

POLICIES = ("offline", "naive", "llm")
_RESULT_LINE = re.compile(r"^\d+\. (.+)$", re.MULTILINE)
_VERDICT = re.compile(r"correct:\s*(yes|no)\b", re.IGNORECASE)
JUDGE_PROMPT = """Judge whether the response to the question below is correct, given the correct answer. The
response is correct when it names the same thing as the correct answer (another spelling or a fuller name
is fine); it is not when it differs, hedges between several answers or gives none.

Question: {question}
Correct answer: {answer}
Response: {response}

End with one line: "correct: yes" or "correct: no"."""


class NaivePolicy:
    """A one-shot baseline that reads nothing but the question and what its tools return: it searches the
    question's text, opens the best-ranked page the question does not name, and answers with that page's
    title. It solves a question only when plain retrieval already lands on the answer's page."""

    name = "naive"
    engine = "offline"
    model = None

    def __init__(self, top_k: int = 5):
        self.top_k = top_k

    def start(self, question: Question, framework: Framework, seed: int, rollout: int) -> NaiveAgent:
        return NaiveAgent(question.text, framework, self.top_k)


@dataclass
class NaiveAgent:
    text: str
    framework: Framework
    top_k: int
    choice: str = field(default="")

    async def act(self, turns: list[Turn]) -> PolicyOutput:
        call_id = f"call_{len(turns)}"
        if not turns:
            return self._say("Search the question as asked.", "search", {"query": self.text, "top_k": self.top_k}, call_id)
        if len(turns) == 1:
            titles = _RESULT_LINE.findall(turns[0].observation or "")
            named = self.text.casefold()
            self.choice = next((t for t in titles if t.casefold() not in named), titles[0] if titles else "")
            if self.choice:
                return self._say("Open the best result the question does not name.", "open_page",
                                 {"title": self.choice}, call_id)
        return self._say("Answer with the page found.", "answer", {"text": self.choice or "unknown"}, call_id)

    def _say(self, reasoning: str, tool: str, arguments: dict, call_id: str) -> PolicyOutput:
        return PolicyOutput(output=self.framework.render(reasoning, tool, json.dumps(arguments), call_id))


@dataclass(frozen=True)
class EvalSettings:
    """What solves the questions: `policy` (offline, naive or llm; llm needs `role`), in one framework."""

    policy: str = "offline"
    framework: str = "function_calling"
    rollouts: int = 4
    max_turns: int = 30
    seed: int = 0
    top_k: int = 5
    max_questions: int | None = None
    role: LLMRole | None = None

    def trajectory_config(self) -> TrajectoryConfig:
        policies = {self.framework: self.role} if self.policy == "llm" and self.role is not None else {}
        return TrajectoryConfig(frameworks=[self.framework], policies=policies, rollouts=self.rollouts,
                                max_turns=self.max_turns, search_top_k=self.top_k, error_rates={}, seed=self.seed)


def make_policy(settings: EvalSettings, env: SearchEnvironment, cache_dir: str | Path | None) -> tuple[Policy, list[LLMClient]]:
    """The policy under test; the offline and LLM ones are stage 3's own (the offline one without injected errors)."""
    if settings.policy not in POLICIES:
        raise ValueError(f"unknown eval policy {settings.policy!r}; known: {', '.join(POLICIES)}")
    if settings.policy == "llm" and settings.role is None:
        raise ValueError("the llm eval policy needs a role with an endpoint")
    if settings.policy == "naive":
        return NaivePolicy(settings.top_k), []
    policies, clients = make_policies(settings.trajectory_config(), env, cache_dir)
    return policies[settings.framework], clients


def solve(questions: list[Question], env: SearchEnvironment, settings: EvalSettings,
          cache_dir: str | Path | None = None) -> list[Trajectory]:
    """Every rollout of every question, in (question, rollout) order."""

    async def job() -> list[Trajectory]:
        policy, clients = make_policy(settings, env, cache_dir)
        try:
            return await solve_questions(questions, env, settings.trajectory_config(), {settings.framework: policy})
        finally:
            for client in clients:
                await client.aclose()

    return run_async(job)


def _docid(env: SearchEnvironment, title: str | None) -> str | None:
    page = env.resolve(title) if title else None
    return None if page is None else str(page.page_id)


def evidence_docids(question: Question, env: SearchEnvironment) -> list[str]:
    """The path's pages the index holds, in path order."""
    titles = []
    for hop in question.path.hops:
        titles.append(hop.head)
        if hop.value_type == "entity" and hop.tail:
            titles.append(hop.tail)
    return list(dict.fromkeys(d for d in (_docid(env, t) for t in titles) if d is not None))


def gold_docids(question: Question, env: SearchEnvironment) -> list[str]:
    """The page that states the answer: the answer's own page, or (a literal, or an entity the corpus has no
    page of) the final hop's head, whose infobox states it."""
    last = question.path.hops[-1]
    titles = [last.tail, last.head] if last.value_type == "entity" and last.tail else [last.head]
    docid = next((d for d in (_docid(env, title) for title in titles) if d is not None), None)
    return [docid] if docid is not None else []


def retrieved_docids(trajectory: Trajectory, env: SearchEnvironment) -> list[str]:
    """Pages listed by the run's searches or opened by its page calls, first-seen order. A search is
    re-executed (observations are a pure function of index and call) rather than parsed back from text."""
    seen: dict[str, None] = {}
    for turn in trajectory.turns:
        call = turn.tool_call
        if call is None or turn.tool_error:
            continue
        if call.name == "search":
            for hit in env.search(str(call.arguments["query"]), int(call.arguments.get("top_k", 5))):
                seen.setdefault(_docid(env, hit.title) or "", None)
        elif call.name in ("open_page", "find_in_page"):
            seen.setdefault(_docid(env, str(call.arguments["title"])) or "", None)
    seen.pop("", None)
    return list(seen)


def shows_answer(observation: str | None, golds: Iterable[str]) -> bool:
    """Whether an observation contains the answer or an alias (normalised, on word boundaries)."""
    if not observation:
        return False
    text = f" {normalized_text(observation)} "
    return any(g and f" {g} " in text for g in (normalized_text(a) for a in golds))


def calls_before(turns: list[Turn]) -> list[str]:
    return [t.tool_call.name for t in turns if t.tool_call is not None]


def rollout_result(trajectory: Trajectory, evidence: list[str], env: SearchEnvironment) -> RolloutResult:
    calls = calls_before(trajectory.turns)
    golds = [trajectory.answer, *trajectory.aliases]
    seen_at = next((t.index for t in trajectory.turns if shows_answer(t.observation, golds)), None)
    answer_turn = next((t.index for t in trajectory.turns if t.final_answer is not None), None)
    first_search = next((t.index for t in trajectory.turns if t.tool_call is not None and t.tool_call.name == "search"), None)
    retrieved = retrieved_docids(trajectory, env)
    searches_seen = None if seen_at is None else calls_before(trajectory.turns[: seen_at + 1]).count("search")
    return RolloutResult(
        rollout=trajectory.rollout,
        tool_call_counts=dict(sorted(Counter(calls).items())),
        status="completed" if trajectory.stop_reason == "answered" else trajectory.stop_reason,
        retrieved_docids=retrieved,
        result=[OutputItem(output=trajectory.final_answer or "")],
        final_answer=trajectory.final_answer,
        correct=trajectory.outcome.correct,
        f1=trajectory.outcome.f1,
        turns=len(trajectory.turns),
        searches=calls.count("search"),
        evidence_recall=len(set(retrieved) & set(evidence)) / len(evidence) if evidence else None,
        turns_to_answer_seen=None if seen_at is None else seen_at + 1,
        searches_to_answer_seen=searches_seen,
        answered_before_search=answer_turn is not None and (first_search is None or first_search > answer_turn),
    )


def question_result(question: Question, trajectories: list[Trajectory], env: SearchEnvironment) -> QuestionResult:
    evidence = evidence_docids(question, env)
    rollouts = [rollout_result(t, evidence, env) for t in sorted(trajectories, key=lambda t: t.rollout)]
    first = trajectories[0]
    return QuestionResult(
        query_id=question.question_id, query=question.text, hops=question.hops, shape=question_shape(question),
        final_relation=question.path.hops[-1].relation, evidence_docids=evidence,
        gold_docids=gold_docids(question, env), policy=first.policy, framework=first.framework,
        engine=first.engine, model=first.model, rollouts=rollouts,
        pass_rate=sum(r.correct for r in rollouts) / len(rollouts),
    )


def evaluate(questions: list[Question], env: SearchEnvironment, settings: EvalSettings,
             cache_dir: str | Path | None = None) -> list[QuestionResult]:
    """Solve and grade: one result a question, in question-id order."""
    questions = sorted(questions, key=lambda q: q.question_id)[: settings.max_questions]
    by_question: dict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in solve(questions, env, settings, cache_dir):
        by_question[trajectory.question_id].append(trajectory)
    return [question_result(q, by_question[q.question_id], env) for q in questions]


def with_distractors(env: SearchEnvironment, questions: list[Question], ratio: float, seed: int = 0) -> SearchEnvironment:
    """The questions' path pages plus `ratio` times as many other pages of the index (a seeded draw), indexed
    afresh: the distractor knob (OpenResearcher's gold-only versus full-corpus gap). Page order stays the
    index's, so ties break as they do there."""
    if ratio < 0:
        raise ValueError(f"a distractor ratio must be >= 0, got {ratio}")
    path = {d for q in questions for d in evidence_docids(q, env)}
    others = sorted((p for p in env.pages if str(p.page_id) not in path),
                    key=lambda p: stable_hash(seed, p.page_id))[: round(ratio * len(path))]
    keep = path | {str(p.page_id) for p in others}
    return environment_of([p for p in env.pages if str(p.page_id) in keep], env.title_weight,
                          f"{env.environment_id}/distractors={ratio:g}/seed={seed}")


async def judge_answers(results: list[QuestionResult], questions: list[Question], client: LLMClient) -> None:
    """Ask the judge role about every answered rollout (BrowseComp-Plus grades with an LLM judge); its verdict
    goes to `judge_correct`, and the summary reports how often it agrees with the matcher."""
    by_id = {q.question_id: q for q in questions}
    answered = [(result, rollout) for result in results for rollout in result.rollouts if rollout.final_answer]

    async def ask(result: QuestionResult, rollout: RolloutResult) -> None:
        question = by_id[result.query_id]
        prompt = JUDGE_PROMPT.format(question=question.text, answer=" / ".join([question.answer, *question.aliases]),
                                     response=rollout.final_answer)
        reply = await client.chat([{"role": "user", "content": prompt}], temperature=0.0)
        verdicts = _VERDICT.findall(reply.content)
        rollout.judge_correct = verdicts[-1].lower() == "yes" if verdicts else None

    await asyncio.gather(*(ask(result, rollout) for result, rollout in answered))


def judged(results: list[QuestionResult], questions: list[Question], role: LLMRole,
           cache_dir: str | Path | None = None) -> None:
    async def job() -> None:
        client = LLMClient(role, Path(cache_dir) / "eval-judge" if cache_dir else None, name=f"eval-judge-{role.model}")
        try:
            await judge_answers(results, questions, client)
        finally:
            await client.aclose()

    run_async(job)


def _judge_figures(rollouts: list[RolloutResult]) -> dict:
    answered = [r for r in rollouts if r.final_answer]
    verdicts = [r for r in answered if r.judge_correct is not None]
    return {"answered": len(answered), "judged": len(verdicts), "unparsed": len(answered) - len(verdicts),
            "judge_correct": _mean([float(r.judge_correct) for r in verdicts]),
            "agreement_with_matcher": _mean([float(r.judge_correct == r.correct) for r in verdicts])}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _by(results: list[QuestionResult], key) -> dict[str, dict[str, float]]:
    groups: dict[str, list[QuestionResult]] = defaultdict(list)
    for result in results:
        groups[str(key(result))].append(result)
    return {name: {"questions": len(group), "pass@1": _mean([r.pass_rate for r in group])}
            for name, group in sorted(groups.items())}


def summarize(results: list[QuestionResult]) -> dict:
    """The figures of one eval, from the result records alone. pass@1 is the mean share of correct rollouts
    a question (the unbiased estimate with n = k); pass@k the share of questions with a correct rollout."""
    rollouts = [r for result in results for r in result.rollouts]
    seen = [r for r in rollouts if r.turns_to_answer_seen is not None]
    tools = Counter()
    for r in rollouts:
        tools.update(r.tool_call_counts)
    return {
        "questions": len(results),
        "rollouts": len(rollouts),
        "k": max((len(result.rollouts) for result in results), default=0),
        "pass@1": _mean([result.pass_rate for result in results]),
        "pass@k": _mean([float(any(r.correct for r in result.rollouts)) for result in results]),
        "by_hops": _by(results, lambda r: r.hops),
        "by_shape": _by(results, lambda r: r.shape),
        "by_final_relation": _by(results, lambda r: r.final_relation),
        "evidence_recall": _mean([r.evidence_recall for r in rollouts if r.evidence_recall is not None]),
        "answer_seen": _mean([float(r.turns_to_answer_seen is not None) for r in rollouts]),
        "turns_to_answer_seen": _mean([float(r.turns_to_answer_seen) for r in seen]),
        "searches_to_answer_seen": _mean([float(r.searches_to_answer_seen) for r in seen]),
        "answered_before_search": _mean([float(r.answered_before_search) for r in rollouts]),
        "unfinished": _mean([float(r.status != "completed") for r in rollouts]),
        "tool_calls_per_rollout": {name: n / len(rollouts) for name, n in sorted(tools.items())} if rollouts else {},
        **({"judge": _judge_figures(rollouts)} if any(r.judge_correct is not None for r in rollouts) else {}),
    }


def run_file(result: QuestionResult, rollout: int = 0) -> dict:
    """One rollout in BrowseComp-Plus's run JSON (one file a query; their evaluator ignores extra fields)."""
    r = result.rollouts[rollout]
    return {
        "metadata": {"model": result.model or result.policy, "policy": result.policy, "framework": result.framework},
        "query_id": result.query_id,
        "tool_call_counts": r.tool_call_counts,
        "status": r.status,
        "retrieved_docids": r.retrieved_docids,
        "result": [item.model_dump() for item in r.result],
    }


def in_band(rate: float, band: Sequence[float] | None) -> bool:
    """Whether a pass rate lies in [LO, HI]; with no band, strictly between 0 and 1 (a GRPO group of a
    question the policy neither always nor never solves has both outcomes)."""
    return 0.0 < rate < 1.0 if band is None else band[0] <= rate <= band[1]


def band_text(band: Sequence[float] | None) -> str:
    return "strictly between 0 and 1" if band is None else f"in [{band[0]:g}, {band[1]:g}]"


def in_pass_band(results: list[QuestionResult], low: float, high: float) -> list[str]:
    """Ids of the questions whose pass rate lies in [low, high]: RL prompts worth a GRPO group (neither always
    nor never solved) with e.g. 0.01 0.99."""
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"a pass band needs 0 <= LO <= HI <= 1, got {low} {high}")
    return [r.query_id for r in results if in_band(r.pass_rate, (low, high))]


def measured_by(settings: EvalSettings) -> str:
    """What measured a pass rate, as the dataset's rows and card name it: `policy:framework[:model]`."""
    model = settings.role.model if settings.policy == "llm" and settings.role is not None else None
    return ":".join(part for part in (settings.policy, settings.framework, model) if part)


RESULTS = "results.jsonl"
PASS_BAND = "pass_band.txt"
SUMMARY = "summary.json"
RUNS = "runs"


def write_eval(out_dir: str | Path, results: list[QuestionResult], summary: dict, settings: EvalSettings,
               band: tuple[float, float] | None = None) -> None:
    """`results.jsonl` (a result a line), `summary.json` (with the settings), `runs/` (rollout 0 of each
    question as BrowseComp-Plus run files; run files of an earlier eval of other questions are removed, since
    BrowseComp-Plus's evaluator scores every file there) and, given a pass band, `pass_band.txt` (the ids in it)."""
    out = Path(out_dir)
    if band is not None:
        selected = in_pass_band(results, *band)
        summary = {**summary, "pass_band": {"low": band[0], "high": band[1], "selected": len(selected)}}
        atomic_write_text(out / PASS_BAND, "".join(f"{qid}\n" for qid in selected))
    atomic_write_text(out / RESULTS, "".join(r.model_dump_json() + "\n" for r in results))
    described = {name: value for name, value in settings.__dict__.items() if name != "role"}
    described["model"] = settings.role.model if settings.role is not None else None
    atomic_write_text(out / SUMMARY, json.dumps({"settings": described, **summary}, indent=2) + "\n")
    names = {f"run_{result.query_id}.json" for result in results}
    for stale in (out / RUNS).glob("run_*.json"):
        if stale.name not in names:
            stale.unlink()
    for result in results:
        atomic_write_text(out / RUNS / f"run_{result.query_id}.json",
                          json.dumps(run_file(result), indent=2, ensure_ascii=False) + "\n")


def read_results(out_dir: str | Path) -> list[QuestionResult]:
    lines = (Path(out_dir) / RESULTS).read_text(encoding="utf-8").splitlines()
    return [QuestionResult.model_validate_json(line) for line in lines if line]
