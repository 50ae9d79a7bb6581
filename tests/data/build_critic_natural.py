"""Builds the natural labelled set: rollouts nobody injected errors into, labelled by reviewer rules.

Three policies run over the stage-3 test snapshot (tests/trajectory_fixtures.py), none with an error model:
- a real model: the policy episodes Gemma 3 270M played under llama.cpp on this snapshot (every framework,
  3 rollouts; tests/data/llm_transcript.jsonl, recorded by `make llm-check`), replayed into trajectories by
  `tests.llm_replay.replay_policy_episodes` as `make test` does. Its mistakes are its own: it echoes our
  prompts and error feedback, or writes questions of its own, instead of calling a tool; it opens pages it
  made up, states an answer it never read and opens a page anyway, changes that answer with nothing new;
- the offline scripted policy with every error rate at zero: its errors are the ones its search style makes
  by itself (a look at a page that adds nothing, a confirmation that repeats what was read);
- `NaiveSearcher`, a heuristic searcher written for this set that does not know the gold path: it searches
  the question's words, reads the first results, takes the first value of a row whose label shares a word
  with the question, follows it and answers with the last value it read. Its mistakes (empty lookups, a
  page it guessed, a search it repeats, a value picked from a list without a reason, a wrong answer) come
  from that strategy, not from injection.
Each turn is labelled by `critic.labelling.label_turn`, whose rules share no code with the critic. Each
row: the question, the trajectory up to and including the labelled turn, the expected verdict per
criterion and failure kinds (the format of tests/data/critic_labelled.jsonl).

`.venv/bin/python tests/data/build_critic_natural.py OUT.jsonl` writes it; tests/test_critic_natural.py
builds it the same way and reports the critic's precision and recall on it.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from critic.labelling import label_turn
from schemas.config import IndexConfig
from schemas.questions import Question
from schemas.trajectory import Trajectory, Turn
from synth.environment import SearchEnvironment, build_index, tokenize
from synth.frameworks import Framework, get_framework
from synth.policies import PolicyOutput, ScriptedPolicy, episode_seed, run_episode
from tests.llm_replay import replay_policy_episodes
from tests.trajectory_fixtures import QUESTIONS, make_graph

ROLLOUTS = 6
FRAMEWORK = "tagged"  # the critic judges canonical turns: the framework does not change a label
_ROW = re.compile(r"^(?:\[page \d+\] )?([A-Z][\w ]{0,38}\w): (.+)$", re.M)
_RESULT = re.compile(r"^\d+\. (.+)$", re.M)


class NaiveSearcher:
    """A searcher without the gold path (see the module docstring); `rollout` varies what it reads first."""

    name, engine, model = "naive", "offline", None

    def start(self, question: Question, framework: Framework, seed: int, rollout: int) -> NaiveAgent:
        return NaiveAgent(question, framework, rollout)


class NaiveAgent:
    def __init__(self, question: Question, framework: Framework, rollout: int):
        self.question, self.framework, self.rollout = question, framework, rollout
        self.words = [w for w in tokenize([question.text])[0] if len(w) > 3]
        self.value = ""
        self.reads = 0
        named = re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+", question.text)
        self.subject = named[0] if named else ""

    def _call(self, reasoning: str, name: str, arguments: dict, turns: list[Turn]) -> PolicyOutput:
        return PolicyOutput(self.framework.render(reasoning, name, json.dumps(arguments), f"call_{len(turns)}"))

    async def act(self, turns: list[Turn]) -> PolicyOutput:
        last = turns[-1] if turns else None
        if last is None:
            query = " ".join(self.words[:6])
            return self._call(f"I will search for {query!r}.", "search", {"query": query}, turns)
        call, observation = last.tool_call, last.observation or ""
        if self.reads >= 2 or len(turns) >= 9:
            text = self.value or "unknown"
            return self._call(f"The answer is {text}.", "answer", {"text": text}, turns)
        if call.name == "search":
            titles = _RESULT.findall(observation)
            if not titles:  # nothing found: it tries the same search once more, then guesses a page
                if len(turns) > 1 and turns[-2].tool_call.name == "search":
                    return self._call(f"I will open {self.value}.", "open_page", {"title": self.value}, turns)
                return self._call("Let me search again.", "search", dict(call.arguments), turns)
            title = titles[min(self.rollout % 2, len(titles) - 1)]
            if self.rollout % 3 == 0:
                word = self.words[(len(turns) + self.rollout) % len(self.words)]
                return self._call(f"I will look for {word!r} in {title}.", "find_in_page",
                                  {"title": title, "text": word}, turns)
            return self._call(f"I will open {title}.", "open_page", {"title": title}, turns)
        if call.name in ("open_page", "find_in_page") and not last.tool_error:
            rows = [(label, value) for label, value in _ROW.findall(observation)
                    if set(tokenize([label])[0]) & set(self.words) and label.lower() != "name"]
            if not rows and call.name == "find_in_page":
                title = call.arguments["title"]
                return self._call(f"I will open {title}.", "open_page", {"title": title}, turns)
            if rows:
                label, value = rows[0]
                self.value, self.reads = value.split(", ")[0].split(" (")[0], self.reads + 1
                subject = call.arguments["title"]
                if self.rollout % 5 == 2 and turns[0].tool_call.name == "search":  # it credits the value to the
                    subject = self.subject or subject  # entity it set out from, not to the page it read it on
                claim = f"The {label.lower()} of {subject} is {self.value}."
                if self.rollout % 4 == 1:  # it opens the value as the row wrote it, a title it only guesses
                    return self._call(f"{claim} I will open {value}.", "open_page", {"title": value}, turns)
                return self._call(f"{claim} I will search for {self.value!r}.", "search", {"query": self.value}, turns)
        query = self.value or " ".join(self.words[1:5])
        return self._call(f"That did not help. I will search for {query!r}.", "search", {"query": query}, turns)


def real_model_episodes(work: Path) -> list[tuple[Question, Trajectory]]:
    """The recorded real-model policy episodes (every framework and rollout of every question), replayed."""
    trajectories, _ = replay_policy_episodes(work / "real-model")
    questions = {q.question_id: q for q in QUESTIONS}
    return [(questions[t.question_id], t) for t in sorted(trajectories, key=lambda t: t.trajectory_id)]


def trajectories(work: Path) -> Iterator[tuple[Question, Trajectory]]:
    yield from real_model_episodes(work)
    env = SearchEnvironment.load(work / "index")
    for policy in (ScriptedPolicy(env, {}), NaiveSearcher()):
        for question in QUESTIONS:
            for rollout in range(ROLLOUTS):
                seed = episode_seed(0, question.question_id, FRAMEWORK, rollout)
                yield question, asyncio.run(run_episode(question, get_framework(FRAMEWORK), policy, env,
                                                        max_turns=40, seed=seed, rollout=rollout))


def rows(work: Path) -> Iterator[dict]:
    for question, trajectory in trajectories(work):
        for position in range(len(trajectory.turns)):
            passes, kinds = label_turn(question, trajectory, position)
            prefix = trajectory.model_copy(update={"turns": trajectory.turns[: position + 1]})
            yield {
                "row_id": f"natural-{trajectory.trajectory_id}-t{position}",
                "question": question.model_dump(mode="json"),
                "trajectory": prefix.model_dump(mode="json"),
                "turn_index": position,
                "expected": {**passes, "failure_kinds": kinds},
            }


def build(out: Path, work: Path) -> int:
    make_graph(work / "graph")
    build_index(work / "graph", work / "index", IndexConfig(chunk_chars=400))
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row in rows(work)]
    out.write_text("\n".join(lines) + "\n")
    return len(lines)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        count = build(Path(sys.argv[1]), Path(folder))
    print(f"wrote {count} labelled turns to {sys.argv[1]}")
