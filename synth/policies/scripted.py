"""The offline scripted searcher: a privileged plan (the question's gold path), found with real tool calls.

It knows which hops to follow, but not where the facts are: each hop's page is opened directly when an
earlier search already listed it, else located with `search` (reformulating the query when the page is
not listed, never spending a search that would only re-list pages already seen), read with `open_page`,
and the fact located with `find_in_page` (only for a text the page contains and whose matches show the
fact) or by reading on page by page when the first chunk does not state it. Its reasoning names what it
looks for by relation and only asserts what an earlier observation showed. A seeded error model then
injects realistic imperfect turns at per-turn rates, each tagged in `Turn.injected_error`:

- repeated_search: the latest search again, verbatim;
- malformed_arguments: broken JSON or arguments that fail the tool schema;
- off_path_detour: a search or page visit unrelated to the path;
- unsupported_claim: the honest next call, with a claimed fact no observation supports;
- premature_answer: a wrong answer (an intermediate entity or an unrelated page) before the evidence.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Generator
from dataclasses import dataclass

from schemas.questions import PathHop, Question
from schemas.trajectory import Turn
from synth.environment import SearchEnvironment, tokenize
from synth.frameworks import Framework
from synth.frameworks.base import ANSWER_TOOL
from synth.policies.base import PolicyOutput
from synth.wikitext import format_date, split_sentences

ERROR_KINDS = ("repeated_search", "malformed_arguments", "off_path_detour", "unsupported_claim", "premature_answer")
_RESULT_TITLE = re.compile(r"^\d+\. (.+)$", re.MULTILINE)
_PAGE_PREFIX = re.compile(r"^\[page (\d+)\] ")
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)")
QUERY_WORDS = 8
EVIDENCE_CHARS = 200


@dataclass
class Step:
    reasoning: str
    name: str
    arguments: dict


class ScriptedPolicy:
    """Offline policy; records say policy="scripted", engine="offline"."""

    name = "scripted"
    engine = "offline"
    model = None

    def __init__(self, env: SearchEnvironment, error_rates: dict[str, float] | None = None, top_k: int = 5):
        rates = self.check_rates(error_rates or {})
        self.env = env
        self.rates = [(kind, rates.get(kind, 0.0)) for kind in ERROR_KINDS]
        self.top_k = top_k

    @staticmethod
    def check_rates(rates: dict[str, float]) -> dict[str, float]:
        """Per-turn error rates: known kinds only, each >= 0, summing to less than 1."""
        unknown = sorted(set(rates) - set(ERROR_KINDS))
        if unknown:
            raise ValueError(f"unknown error kinds {unknown}; known: {', '.join(ERROR_KINDS)}")
        if any(r < 0 for r in rates.values()) or sum(rates.values()) >= 1:
            raise ValueError("error rates must be >= 0 and sum to less than 1")
        return dict(rates)

    def start(self, question: Question, framework: Framework, seed: int, rollout: int) -> ScriptedAgent:
        return ScriptedAgent(self, question, framework, random.Random(seed))


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def result_titles(observation: str) -> list[str]:
    return [t.strip() for t in _RESULT_TITLE.findall(observation)]


def _sentence_with(text: str, surface: str) -> str:
    """The sentence of a line that states the surface, cut around it when very long."""
    sentence = next((s for s in split_sentences(text) if _norm(surface) in _norm(s)), text)
    if len(sentence) <= EVIDENCE_CHARS:
        return sentence
    position = sentence.casefold().find(surface.casefold())
    start = max(0, position - EVIDENCE_CHARS // 2)
    return sentence[start : start + EVIDENCE_CHARS].strip()


def evidence_line(observation: str, surfaces: list[str], relation: str = "") -> tuple[str, int | None] | None:
    """The observed sentence stating a surface (preferring one naming the relation), and its page number."""
    candidates = []
    for line in observation.split("\n")[1:]:  # the first line is the tool's header, never evidence
        page = _PAGE_PREFIX.match(line)
        text = line[page.end():] if page else line
        surface = next((s for s in surfaces if s and _norm(s) in _norm(text)), None)
        if surface is None:
            continue
        found = (_sentence_with(text, surface), int(page.group(1)) if page else None)
        if relation and _norm(relation) in _norm(text):
            return found
        candidates.append(found)
    return candidates[0] if candidates else None


class ScriptedAgent:
    def __init__(self, policy: ScriptedPolicy, question: Question, framework: Framework, rng: random.Random):
        self.policy = policy
        self.env = policy.env
        self.question = question
        self.framework = framework
        self.rng = rng
        self.note = ""
        self.entity = question.path.start
        self.relation = ""
        self.path_titles = {_norm(n) for n in question.path.nodes}
        self._plan = self._steps()
        self._pending: Step | None = None
        self._honest_turn: int | None = None
        self._started = False
        self._turns: list[Turn] = []

    # --- the loop's side -------------------------------------------------------------------------------

    async def act(self, turns: list[Turn]) -> PolicyOutput:
        self._turns = turns
        kind = self._draw_error(turns)
        # The honest step is planned only when this turn needs it, so it sees every earlier turn (an injected
        # search's results included); planning draws nothing from the error model's random stream.
        if self._pending is None and kind in (None, "malformed_arguments", "unsupported_claim"):
            self._pending = self._next_honest(turns)
        if kind == "unsupported_claim":
            step = self._pending
            claim = self._unsupported_claim(turns)
            self._pending, self._honest_turn = None, len(turns)
            return self._output(Step(f"{step.reasoning} {claim}", step.name, step.arguments), turns, kind)
        if kind is not None:
            return self._injected(kind, turns)
        step, self._pending, self._honest_turn = self._pending, None, len(turns)
        return self._output(step, turns)

    def _next_honest(self, turns: list[Turn]) -> Step:
        observation = None
        if self._honest_turn is not None:
            observation = turns[self._honest_turn].observation or ""
        try:
            if not self._started:
                self._started = True
                return next(self._plan)
            return self._plan.send(observation)
        except StopIteration:
            return Step("I have checked the path; here is my answer.", ANSWER_TOOL, {"text": self.question.answer})

    def _output(self, step: Step, turns: list[Turn], injected: str | None = None, broken_json: bool = False) -> PolicyOutput:
        arguments = json.dumps(step.arguments, ensure_ascii=False)
        if broken_json:
            arguments = arguments[:-1]
        output = self.framework.render(step.reasoning, step.name, arguments, f"call_{len(turns)}")
        return PolicyOutput(output=output, injected_error=injected)

    # --- the error model ---------------------------------------------------------------------------------

    def _draw_error(self, turns: list[Turn]) -> str | None:
        draw, threshold = self.rng.random(), 0.0
        for kind, rate in self.policy.rates:
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
        seen = _norm(" ".join(t.observation or "" for t in turns))
        unseen = off_path = None
        for _ in range(draws if self.env.pages else 0):
            page = self.env.pages[self.rng.randrange(len(self.env.pages))]
            if _norm(page.title) in self.path_titles:
                continue
            if _norm(page.title) not in seen:
                text = _norm(" ".join(page.chunks))
                if not any(title in text for title in self.path_titles):
                    return page.title
                unseen = unseen or page.title
            off_path = off_path or page.title
        return unseen or off_path or "Atlantis"

    def _unsupported_claim(self, turns: list[Turn]) -> str:
        seen = _norm(" ".join(t.observation or "" for t in turns) + " " + self.question.text)
        wrong = self._unrelated_title(turns)
        while _norm(wrong) in seen:  # every title was seen already: claim a year nothing stated
            wrong = str(self.rng.randint(1000, 1999))
        subject = f"the {self.relation} of {self.entity}" if self.relation else f"{self.entity}"
        return f"I also recall that {subject} is {wrong}, which fits the question."

    def _injected(self, kind: str, turns: list[Turn]) -> PolicyOutput:
        pending = self._pending
        if kind == "repeated_search":
            arguments = self._last_search(turns)
            step = Step(f"Let me search for {arguments['query']!r} again to be sure.", "search", dict(arguments))
            return self._output(step, turns, kind)
        if kind == "malformed_arguments":
            if self.rng.random() < 0.5:
                return self._output(pending, turns, kind, broken_json=True)
            return self._output(Step(pending.reasoning, pending.name, _schema_violation(pending)), turns, kind)
        if kind == "off_path_detour":
            title = self._unrelated_title(turns)
            if self.rng.random() < 0.5:
                step = Step(f"Perhaps {title} is connected to {self.entity}; let me open it.", "open_page", {"title": title})
            else:
                step = Step(f"Perhaps {title} is connected to {self.entity}; let me search for it.", "search",
                            {"query": title, "top_k": self.policy.top_k})
            return self._output(step, turns, kind)
        wrong = next((n for n in reversed(self.question.path.nodes[:-1]) if _norm(n) != _norm(self.question.answer)
                      and _norm(n) in _norm(" ".join(t.observation or "" for t in turns))), None)
        wrong = wrong or self._unrelated_title(turns)
        return self._output(Step(f"I think I already know this: the answer is {wrong}.", ANSWER_TOOL, {"text": wrong}),
                            turns, kind)

    # --- the honest plan ---------------------------------------------------------------------------------

    def _steps(self) -> Generator[Step, str, None]:
        hops = self.question.path.hops
        found = False
        for number, hop in enumerate(hops):
            # The page shows the infobox parameter ("Birth place: ..."), not the ontology property's name.
            self.entity, self.relation = hop.head, (hop.provenance.parameter or hop.relation).replace("_", " ")
            first_query = " ".join(tokenize([self.question.text])[0][:QUERY_WORDS]) if number == 0 else None
            title = yield from self._locate(hop.head, first_query)
            found = yield from self._read(title, hop)
        # The answer is stated only as the last observation showed it (the note); the call submits the gold
        # spelling, which the observed one matches.
        closing = "That answers the question." if found else "I will give my best answer."
        yield Step(f"{self.note} {closing}".strip(), ANSWER_TOOL, {"text": self.question.answer})

    def _is_entity(self, title: str, entity: str) -> bool:
        if _norm(title) == _norm(entity):
            return True
        page, target = self.env.resolve(title), self.env.resolve(entity)
        return page is not None and page is target

    def _listed_titles(self) -> list[str]:
        """Titles every earlier search of this episode listed (its own turns and injected ones alike)."""
        return [title for turn in self._turns if turn.tool_call is not None and turn.tool_call.name == "search"
                and not turn.tool_error for title in result_titles(turn.observation or "")]

    def _lists_something_new(self, query: str, entity: str) -> bool:
        """Would this search list the entity or a page not listed before? (A re-listing adds nothing.)"""
        observation, _ = self.env.execute("search", {"query": query, "top_k": self.policy.top_k})
        seen = {_norm(t) for t in self._listed_titles()}
        titles = result_titles(observation)
        return any(self._is_entity(t, entity) for t in titles) or any(_norm(t) not in seen for t in titles)

    def _locate(self, entity: str, first_query: str | None) -> Generator[Step, str, str]:
        listed = next((t for t in self._listed_titles() if self._is_entity(t, entity)), None)
        if listed is not None:
            self.note = f"{self.note} An earlier search listed {listed}.".strip()
            return listed
        queries = [first_query] if first_query else []
        queries += [entity, _PARENTHETICAL.sub("", entity), f"{entity} {self.relation}"]
        queries = list(dict.fromkeys(q for q in queries if q and q.strip()))
        previous = None
        for query in queries:
            if not self._lists_something_new(query, entity):
                continue
            if previous is None:
                reasoning = f"{self.note} I need the {self.relation} of {entity}. I will search for {query!r}."
            else:
                reasoning = f"The results for {previous!r} do not list {entity}. I will reformulate the query as {query!r}."
            observation = yield Step(reasoning.strip(), "search", {"query": query, "top_k": self.policy.top_k})
            match = next((t for t in result_titles(observation) if self._is_entity(t, entity)), None)
            if match is not None:
                self.note = f"The search results list {match}."
                return match
            previous = query
        self.note = f"No search listed {entity}; I will try to open it by its title."
        return entity

    def _surfaces(self, hop: PathHop) -> list[str]:
        if hop.tail is not None:
            page = self.env.resolve(hop.tail)
            names = [hop.tail, *(page.aliases if page else [])]
            names += [_PARENTHETICAL.sub("", hop.tail), hop.tail.split(",")[0]]
            return list(dict.fromkeys(n.strip() for n in names if n and n.strip()))
        value = hop.value or ""
        if hop.value_type == "date":
            return list(dict.fromkeys([format_date(value), value, value[:4]]))
        if hop.value_type in ("number", "quantity"):
            try:
                return list(dict.fromkeys([value, f"{float(value):,.0f}", f"{float(value):,}"]))
            except ValueError:
                return [value]
        return [value]

    def _lookup(self, title: str, surfaces: list[str]) -> str | None:
        """The first find_in_page text worth a call (the relation, its words, a value spelling an earlier
        observation already showed) whose matches in the page show the fact; None when no text does."""
        words = [w for w in tokenize([self.relation])[0] if len(w) > 2]
        seen = _norm(" ".join([self.question.text, *(t.observation or "" for t in self._turns)]))
        candidates = [self.relation, *words, *(s for s in surfaces if _norm(s) in seen)]
        for text in dict.fromkeys(c for c in candidates if c.strip()):
            observation, error = self.env.execute("find_in_page", {"title": title, "text": text})
            if not error and evidence_line(observation, surfaces, self.relation) is not None:
                return text
        return None

    def _read(self, title: str, hop: PathHop) -> Generator[Step, str, bool]:
        """Read the hop's page until an observation states the fact; True when one did."""
        surfaces = self._surfaces(hop)
        observation = yield Step(f"{self.note} I will open {title} to find its {self.relation}.".strip(), "open_page",
                                 {"title": title, "page": 1})
        found = evidence_line(observation, surfaces, self.relation)
        if found is None:
            lookup = self._lookup(title, surfaces)
            if lookup is not None:
                reasoning = f"The first page of {title} does not state its {self.relation}. I will look for {lookup!r} in it."
                observation = yield Step(reasoning, "find_in_page", {"title": title, "text": lookup})
                found = evidence_line(observation, surfaces, self.relation)
            else:
                found = yield from self._read_on(title, surfaces)
        if found is None:
            self.note = f"I could not find the {self.relation} of {hop.head} in its page; I will follow the next lead."
            return False
        line, page_number = found
        if page_number is not None and page_number > 1:
            observation = yield Step(f"The match is on page {page_number} of {title}; I will read it.", "open_page",
                                     {"title": title, "page": page_number})
            found = evidence_line(observation, surfaces, self.relation) or found
            line = found[0]
        target = next(s for s in surfaces if _norm(s) in _norm(line))
        self.note = f'{title} states: "{line}". So the {self.relation} of {hop.head} is {target}.'
        return True

    def _read_on(self, title: str, surfaces: list[str]) -> Generator[Step, str, tuple[str, int | None] | None]:
        """No lookup shows the fact: read the following pages in order while a later page states it."""
        page = self.env.resolve(title)
        chunks = page.chunks if page is not None else []
        if not any(_norm(s) in _norm(chunk) for chunk in chunks[1:] for s in surfaces):
            return None
        for number in range(2, len(chunks) + 1):
            reasoning = f"Page {number - 1} of {title} does not state its {self.relation}; I will read page {number}."
            observation = yield Step(reasoning, "open_page", {"title": title, "page": number})
            found = evidence_line(observation, surfaces, self.relation)
            if found is not None:
                return found[0], None
        return None


def _schema_violation(step: Step) -> dict:
    """The pending call's arguments bent so that they fail the tool's schema."""
    if step.name == "search":
        return {"q": step.arguments.get("query", "")}
    if step.name == "open_page":
        return {"title": step.arguments.get("title", ""), "page": 0}
    if step.name == "find_in_page":
        return {"title": step.arguments.get("title", "")}
    return {"answer": step.arguments.get("text", "")}


