"""What a trajectory has learned so far: the context a turn is judged against.

`Knowledge` accumulates the question and each observation turn by turn, so every criterion asks the same
question "was this already known before this turn?". Gold-path evidence units come from the question's
path: its entities (start and entity tails) named, their pages listed by a search or read, and its relation
facts (head + tail or literal value seen together in one passage, or the value seen on the head's page).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from critic.checks import is_empty_result
from critic.text import (
    content_tokens,
    mentions_any,
    mentions_any_padded,
    named_spans,
    normalize,
    surface_forms,
    value_forms,
)
from schemas.questions import Question
from schemas.trajectory import Turn


class EvidenceUnit(NamedTuple):
    """One piece of gold-path evidence: an entity named, its page listed or read, or a hop's relation fact.
    (A tuple: units are hashed at every turn, as set members and as a cache key.)"""

    kind: str  # "entity" | "listed" | "read" | "fact"
    label: str
    forms: tuple[str, ...]
    head_forms: tuple[str, ...] = ()


def gold_units(question: Question | None, aliases: Mapping[str, Sequence[str]] | None = None) -> list[EvidenceUnit]:
    """Entity and fact units of the question's gold path (none without a question).

    `aliases` (title -> redirect titles, from the search index) adds the other names an entity goes by.
    """
    if question is None:
        return []
    aliases = aliases or {}

    def entity_forms(name: str) -> tuple[str, ...]:
        forms = surface_forms(name) + [f for alias in aliases.get(name, ()) for f in surface_forms(alias)]
        return tuple(dict.fromkeys(forms))

    units: dict[str, EvidenceUnit] = {}
    path = question.path
    for name in [path.start] + [h.tail for h in path.hops if h.tail]:
        for kind in ("entity", "listed", "read"):
            units.setdefault(f"{kind}:{name}", EvidenceUnit(kind, name if kind == "entity" else f"{kind} {name}",
                                                            entity_forms(name)))
    for hop in path.hops:
        target = hop.tail if hop.tail else hop.value
        if not target:
            continue
        forms = entity_forms(target) if hop.tail else tuple(surface_forms(target, hop.value_type))
        label = f"{hop.head} --{hop.relation}--> {target}"
        units.setdefault(f"fact:{label}", EvidenceUnit("fact", label, forms, entity_forms(hop.head)))
    return list(units.values())


def question_anchors(question_text: str, units: Sequence[EvidenceUnit]) -> tuple[str, ...]:
    """Names an on-topic observation is expected to mention: path entities and names in the question."""
    anchors = [form for unit in units if unit.kind == "entity" for form in unit.forms]
    anchors += named_spans(question_text)
    return tuple(a for a in anchors if normalize(a))


_RESULT_START = re.compile(r"^\d+\.\s", re.MULTILINE)
_RESULT_TITLE = re.compile(r"^\d+\.\s+(.+?)\s*$", re.MULTILINE)


@lru_cache(maxsize=1024)
def _passages(observation: str) -> tuple[str, ...]:
    """Normalised passages of an observation: search results (title and snippet) and paragraphs."""
    passages = []
    for block in re.split(r"\n\s*\n", observation):
        passages += [p for p in _RESULT_START.split(block) if p.strip()]
    return tuple(normalize(p) for p in passages if normalize(p))


@lru_cache(maxsize=4096)
def _names(forms: tuple[str, ...]) -> frozenset[str]:
    """A unit's forms normalised, to compare with titles (each turn asks about the same units)."""
    return frozenset(normalize(f) for f in forms)


@dataclass(frozen=True)
class Observed:
    """An observation read once for every gold unit asked about it: its normalised text and result titles,
    and the page the call read (`page_title`, None when it opened none)."""

    text: str
    padded: str  # normalised, a space at each end (`mentions_any_padded`)
    result_titles: frozenset[str]
    page_title: str | None

    @classmethod
    def read(cls, observation: str, page_title: str | None) -> Observed:
        titles = frozenset(normalize(title) for title in _RESULT_TITLE.findall(observation))
        return cls(observation, f" {normalize(observation)} ", titles, page_title)


def unit_in_observation(unit: EvidenceUnit, observed: Observed) -> bool:
    """Is the unit evidenced by this observation (read from its page title when the call opened a page)?

    Facts need head and value in one passage, or the value on the head's own page; a path entity's page
    counts as `listed` when a search result names it and as `read` when the call opened it.
    """
    if unit.kind == "listed":
        return bool(observed.result_titles & _names(unit.forms))
    page_title = observed.page_title
    if unit.kind == "read":
        return page_title is not None and normalize(page_title) in _names(unit.forms)
    if not mentions_any_padded(observed.padded, unit.forms):
        return False
    if unit.kind == "entity":
        return True
    if page_title and mentions_any(normalize(page_title), unit.head_forms):
        return True
    return any(mentions_any(p, unit.forms) and mentions_any(p, unit.head_forms) for p in _passages(observed.text))


def statement_contexts(turn: Turn) -> tuple[frozenset[str], ...]:
    """Content-token sets within which names stated together are related: each search result, or a whole
    page (find_in_page) read, titled by the page it belongs to."""
    text = observation_text(turn)
    if not text:
        return ()
    if turn.tool_call is not None and turn.tool_call.name == "search":
        return _result_contexts(text)
    return (content_tokens(f"{target_page(turn) or ''} {text}"),)


@lru_cache(maxsize=4096)
def _result_contexts(results: str) -> tuple[frozenset[str], ...]:
    """Each search result's content tokens (the same results recur in each rollout of a question)."""
    return tuple(content_tokens(p) for p in _RESULT_START.split(results) if p.strip())


def target_page(turn: Turn) -> str | None:
    """The page a call read (open_page / find_in_page), used to attribute facts to their head entity."""
    if turn.tool_call and turn.tool_call.name in ("open_page", "find_in_page"):
        title = turn.tool_call.arguments.get("title")
        return title if isinstance(title, str) else None
    return None


def observation_text(turn: Turn) -> str:
    """The observation as evidence: error results, empty results and unparsed turns add nothing."""
    if turn.tool_error or turn.parse_error or is_empty_result(turn.observation):
        return ""
    return turn.observation


@lru_cache(maxsize=16384)
def _spellings(span: str) -> tuple[frozenset[str], ...]:
    """Content-token sets a name or value may appear as (an ISO date in each of its spellings); cached, as
    the rollouts of a question assert the same names."""
    return tuple(words for words in (content_tokens(f) for f in value_forms(span)) if words)


@lru_cache(maxsize=8192)
def _evidencing(observation: str, page_title: str | None, units: tuple[EvidenceUnit, ...]) -> tuple[int, ...]:
    """Positions of the units an observation evidences: the same result recurs in each rollout of a question."""
    observed = Observed.read(observation, page_title)
    return tuple(i for i, unit in enumerate(units) if unit_in_observation(unit, observed))


@dataclass
class Knowledge:
    """The question plus every observation seen so far, as normalised text, tokens and evidenced units."""

    question_text: str
    units: tuple[EvidenceUnit, ...]
    anchors: tuple[str, ...] = ()  # `question_anchors`, found once for every turn
    observations: list[str] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)
    evidenced: set[EvidenceUnit] = field(default_factory=set)
    contexts: list[frozenset[str]] = field(default_factory=list)
    question_context: set[str] = field(default_factory=set)
    _normalized: str = ""
    _padded: str = " "
    _last_evidence: tuple[int, set[EvidenceUnit]] | None = None

    @classmethod
    def start(
        cls, question_text: str, question: Question | None, aliases: Mapping[str, Sequence[str]] | None = None
    ) -> Knowledge:
        units = tuple(gold_units(question, aliases))
        knowledge = cls(question_text=question_text, units=units, anchors=question_anchors(question_text, units))
        knowledge.tokens = set(content_tokens(question_text))  # grows with every observation (`add`)
        knowledge.question_context = set(knowledge.tokens)
        knowledge._normalized = normalize(question_text)
        knowledge._padded = f" {knowledge._normalized} "
        knowledge.evidenced = {u for u in knowledge.units if u.kind == "entity" and knowledge.mentions_any(u.forms)}
        return knowledge

    @property
    def normalized(self) -> str:
        """Question and observations so far, normalised, one passage per line."""
        return self._normalized

    def evidenced_by(self, turn: Turn) -> set[EvidenceUnit]:
        """Gold units this turn's observation shows (remembered for the turn: gain asks, then `add`)."""
        if self._last_evidence is not None and self._last_evidence[0] == id(turn):
            return self._last_evidence[1]
        text = observation_text(turn)
        found = {self.units[i] for i in _evidencing(text, target_page(turn), self.units)} if text else set()
        self._last_evidence = (id(turn), found)
        return found

    def supports(self, phrase: str) -> bool:
        """Is a name or value known from the question or an earlier observation (phrase or all its tokens)?

        A date or number is known when any of its spellings is ("1971-12-09" as "9 December 1971",
        "8799800" as "8,799,800").
        """
        forms = value_forms(phrase)
        if len(forms) > 1:
            return any(self.knows_phrase(form) for form in forms)
        if self.knows_phrase(phrase):
            return True
        words = content_tokens(phrase)
        return bool(words) and words <= self.tokens

    def mentions_any(self, forms: Sequence[str]) -> bool:
        """Does the question or an earlier observation name any of the forms (`critic.text.mentions_any`)?"""
        return mentions_any_padded(self._padded, forms)

    def knows_phrase(self, phrase: str) -> bool:
        needle = normalize(phrase)
        return not needle or f" {needle} " in self._padded

    def supports_quote(self, quote: str) -> bool:
        """Is a quoted excerpt verbatim in what is known? (Excerpts may cut words at either end.)"""
        needle = normalize(quote)
        return not needle or needle in self._normalized

    def unrelated(self, spans: Sequence[str]) -> list[str]:
        """Spans asserted together that never appeared with any of the others in one result, page or the
        question: each name may be known, but nothing seen relates them ("X's spouse is Y" from thin air)."""
        spellings = {span: _spellings(span) for span in dict.fromkeys(spans)}
        spellings = {span: forms for span, forms in spellings.items() if forms}
        if len(spellings) < 2:
            return []
        contexts = [self.question_context, *self.contexts]
        # Where each span was seen (context positions), found once per span, not again for each other span.
        seen_in = {span: {i for i, context in enumerate(contexts) if any(forms <= context for forms in spelt)}
                   for span, spelt in spellings.items()}
        return [span for span in spellings if not any(seen_in[span] & seen_in[o] for o in spellings if o != span)]

    def add(self, turn: Turn) -> None:
        """Fold a judged turn's observation into what is known."""
        self.evidenced |= self.evidenced_by(turn)
        self.contexts += statement_contexts(turn)
        text = observation_text(turn)
        if text:
            self.observations.append(text)
            self.tokens |= content_tokens(text)
            self._normalized += "\n" + normalize(text)
            self._padded = f" {self._normalized} "
