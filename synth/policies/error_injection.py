"""The error model of the offline scripted policy: it wraps the honest searcher and perturbs some turns.

At seeded per-turn rates it replaces or bends the searcher's next call with a plausible imperfect turn,
tagged in `Turn.injected_error`:

- repeated_search: the latest search again, verbatim;
- malformed_arguments: broken JSON or arguments that fail the tool schema;
- off_path_detour: a search or page visit unrelated to the path;
- unsupported_claim: the honest next call, with a claimed fact no observation supports: a near miss (an
  entity another page lists under the same relation, a misread date, a slipped digit);
- premature_answer: a wrong answer before the evidence (an intermediate entity or such a near miss).

Unlike the searcher, the injector may read the whole question, gold path included: its mistakes are made
to be near the path without being on it.
"""

from __future__ import annotations

import functools
import json
import random

from schemas.questions import Question
from schemas.trajectory import Turn
from synth.environment import SearchEnvironment
from synth.frameworks import Framework
from synth.frameworks.base import ANSWER_TOOL
from synth.policies.base import PolicyOutput
from synth.policies.searcher import Searcher, Step, norm
from wikitext.plain_text import INFOBOX_ROW, format_date

ERROR_KINDS = ("repeated_search", "malformed_arguments", "off_path_detour", "unsupported_claim", "premature_answer")


class ErrorInjector:
    """The episode's agent: each turn draws whether to inject an error and of which kind, asks the wrapped
    searcher for its honest next call only when the turn needs it, and renders the turn in the framework.

    It reads the question (gold path and answer included), the turns so far, the environment's page list,
    the searcher's waiting call and where its search stands (`entity`, `relation`, `position`), and draws from
    the episode's error stream `rng`, in a fixed order per turn: the kind, then what that kind needs."""

    def __init__(self, searcher: Searcher, question: Question, framework: Framework, env: SearchEnvironment,
                 rates: list[tuple[str, float]], rng: random.Random, top_k: int):
        self.searcher = searcher
        self.question = question
        self.framework = framework
        self.env = env
        self.rates = rates
        self.rng = rng
        self.top_k = top_k
        self.path_titles = {norm(n) for n in question.path.nodes}
        # every name of the path a near miss must not contain ("Jaws" of "Jaws (novel)", the answer's aliases)
        self.path_names = {norm(name) for name in [*question.path.nodes, question.answer, *question.aliases]
                           for name in (name, name.split(" (")[0]) if len(name) > 3}

    async def act(self, turns: list[Turn]) -> PolicyOutput:
        kind = self._draw_error(turns)
        # The honest step is planned only when this turn needs it, so it sees every earlier turn (an injected
        # search's results included); planning draws nothing from the error model's random stream.
        pending = None
        if kind in (None, "malformed_arguments", "unsupported_claim"):
            pending = self.searcher.next_step(turns)
        if kind == "unsupported_claim":
            claim = self._unsupported_claim(turns)
            self.searcher.sent(len(turns))
            return self._output(Step(f"{pending.reasoning} {claim}", pending.name, pending.arguments), turns, kind)
        if kind is not None:
            return self._injected(kind, turns, pending)
        self.searcher.sent(len(turns))
        return self._output(pending, turns)

    def _output(self, step: Step, turns: list[Turn], injected: str | None = None, broken_json: bool = False) -> PolicyOutput:
        arguments = json.dumps(step.arguments, ensure_ascii=False)
        if broken_json:
            arguments = arguments[:-1]
        output = self.framework.render(step.reasoning, step.name, arguments, f"call_{len(turns)}")
        return PolicyOutput(output=output, injected_error=injected)

    def _draw_error(self, turns: list[Turn]) -> str | None:
        draw, threshold = self.rng.random(), 0.0
        for kind, rate in self.rates:
            threshold += rate
            if draw < threshold:
                return kind if self._available(kind, turns) else None
        return None

    def _available(self, kind: str, turns: list[Turn]) -> bool:
        if kind == "repeated_search":
            return self._last_search(turns) is not None
        if kind == "premature_answer":
            return len(turns) >= 2
        return True

    @staticmethod
    def _last_search(turns: list[Turn]) -> dict | None:
        for turn in reversed(turns):
            if turn.tool_call is not None and turn.tool_call.name == "search" and not turn.tool_error:
                return turn.tool_call.arguments
        return None

    def _unrelated_title(self, turns: list[Turn], draws: int = 64) -> str:
        """A random page off the path, preferably one no observation mentioned and whose text names no path
        entity, so the detour is a real one (sampled: cheap on any index)."""
        seen = norm(" ".join(t.observation or "" for t in turns))
        unseen = off_path = None
        for _ in range(draws if self.env.pages else 0):
            page = self.env.pages[self.rng.randrange(len(self.env.pages))]
            if self._names_the_path(page.title):
                continue
            if norm(page.title) not in seen:
                text = norm(" ".join(page.chunks))
                if not any(title in text for title in self.path_titles):
                    return page.title
                unseen = unseen or page.title
            off_path = off_path or page.title
        return unseen or off_path or "Atlantis"

    def _near_miss(self, turns: list[Turn]) -> str:
        """A wrong value a reader could plausibly state for the current hop, seen in no observation: a misread
        date, a slipped digit, or an entity another page lists under the same relation (right type)."""
        seen = norm(" ".join(t.observation or "" for t in turns) + " " + self.question.text)
        hops = self.question.path.hops
        hop = hops[min(self.searcher.position, len(hops) - 1)] if hops else None
        if hop is not None and hop.value_type == "date" and hop.value and hop.value[:4].isdigit():
            year = int(hop.value[:4]) + self.rng.choice((-10, -2, -1, 1, 2, 10))
            return format_date(f"{year}{hop.value[4:]}")
        if hop is not None and hop.value_type in ("number", "quantity") and hop.value:
            try:
                return f"{round(float(hop.value) * self.rng.choice((0.9, 1.1, 10))):,}"
            except ValueError:
                pass
        label = norm((hop.provenance.parameter or hop.relation).replace("_", " ")) if hop is not None else ""
        for _ in range(64 if self.env.pages and label else 0):
            page = self.env.pages[self.rng.randrange(len(self.env.pages))]
            for row_label, row_value in _labelled_rows(page.chunks[0]):
                if row_label == label:
                    value = row_value.split(", ")[0].split(" (")[0].strip()
                    if value and norm(value) not in seen and not self._names_the_path(value):
                        return value
        wrong = self._unrelated_title(turns)
        while norm(wrong) in seen:  # every title was seen already: claim a year nothing stated
            wrong = str(self.rng.randint(1000, 1999))
        return wrong

    def _names_the_path(self, value: str) -> bool:
        """Does a value name an entity of the path or the answer, whole or inside a longer name ("Warner Bros."
        in "Warner Bros. Pictures")?"""
        padded = f" {norm(value)} "
        return any(f" {name} " in padded for name in self.path_names)

    def _unsupported_claim(self, turns: list[Turn]) -> str:
        entity, relation = self.searcher.entity or "what the question starts from", self.searcher.relation
        subject = f"the {relation} of {entity}" if relation else f"{entity}"
        return f"I believe {subject} is {self._near_miss(turns)}, which fits the question."

    def _injected(self, kind: str, turns: list[Turn], pending: Step | None) -> PolicyOutput:
        if kind == "repeated_search":
            arguments = self._last_search(turns)
            step = Step(f"Let me search for {arguments['query']!r} again to be sure.", "search", dict(arguments))
            return self._output(step, turns, kind)
        if kind == "malformed_arguments":
            if self.rng.random() < 0.5:
                return self._output(pending, turns, kind, broken_json=True)
            return self._output(Step(pending.reasoning, pending.name, _schema_violation(pending)), turns, kind)
        if kind == "off_path_detour":
            title, entity = self._unrelated_title(turns), self.searcher.entity or "the question"
            if self.rng.random() < 0.5:
                step = Step(f"Perhaps {title} is connected to {entity}; let me open it.", "open_page", {"title": title})
            else:
                step = Step(f"Perhaps {title} is connected to {entity}; let me search for it.", "search",
                            {"query": title, "top_k": self.top_k})
            return self._output(step, turns, kind)
        wrong = next((n for n in reversed(self.question.path.nodes[:-1]) if norm(n) != norm(self.question.answer)
                      and norm(n) in norm(" ".join(t.observation or "" for t in turns))), None)
        wrong = wrong or self._near_miss(turns)
        return self._output(Step(f"I think I already know this: the answer is {wrong}.", ANSWER_TOOL, {"text": wrong}),
                            turns, kind)


@functools.lru_cache(maxsize=4096)  # near misses draw pages at random, again and again
def _labelled_rows(text: str) -> tuple[tuple[str, str], ...]:
    """(normalised label, value) of each infobox row of a page's text."""
    return tuple((norm(row.group(1)), row.group(2)) for line in text.split("\n") if (row := INFOBOX_ROW.match(line)))


def _schema_violation(step: Step) -> dict:
    """The pending call's arguments bent so that they fail the tool's schema."""
    if step.name == "search":
        return {"q": step.arguments.get("query", "")}
    if step.name == "open_page":
        return {"title": step.arguments.get("title", ""), "page": 0}
    if step.name == "find_in_page":
        return {"title": step.arguments.get("title", "")}
    return {"answer": step.arguments.get("text", "")}

