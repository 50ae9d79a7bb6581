"""Quality gates for written questions; each failing gate is a counted rejection reason.

- `vague_answer`: a one-word lower-case string answer, an infobox keyword rather than a fact;
- `answer_leak`: the answer or one of its aliases appears in the question text;
- `evidence_leak`: the question copies a long n-gram of a hop's evidence sentence;
- `intermediate_leak`: an obfuscated intermediate entity is named anyway (the question loses a hop);
- `fewer_hops`: the answer is reachable from the start entity in fewer hops than the question asks;
- `alternative_answer`: following the question's constraint chain over the graph (relations, plus the
  type and attribute clues given for each intermediate) reaches more than one answer;
- `missing_as_of`: a fact on the path can change, but the text states no as-of date;
- `unfaithful`: an LLM-written text does not express the plan it was given (the start entity, each
  intermediate's description, the relations of the chain, above all the one asked for), so the gold
  path may not answer it ("What is the name of your company?");
- `shortcut`: a model answers correctly without tools in any of n attempts (async, LLM configured);
- `duplicate`: applied across the whole run by the stage (same text, or same start/relations/answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel

from graph.csr import LITERAL, CSRGraph, split_literal_key
from pipeline.llm import LLMClient
from schemas.questions import Path
from synth.matching import match_answer, normalize_answer
from synth.phrasing import parse_date, phrase, type_noun

GATES = ("vague_answer", "fewer_hops", "alternative_answer", "answer_leak", "evidence_leak", "intermediate_leak",
         "missing_as_of", "unfaithful", "shortcut", "duplicate")
MAX_FRONTIER = 100_000


@dataclass(frozen=True)
class Clue:
    """What a question says about one intermediate node besides the relation that leads to it."""

    position: int  # index into path.nodes
    type_noun: str | None = None
    attribute: str | None = None  # relation of a fact of the node stated in the text, e.g. "birth_date"
    years: tuple[int, int] | None = None  # a date fact: the inclusive year range the fuzzed date stands for
    object: str | None = None  # an entity fact: the object named in the text ("a city in Ireland")


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether the normalised phrase occurs in the normalised text on token boundaries."""
    needle = _tokens(phrase)
    if not needle:
        return False
    haystack = _tokens(text)
    return any(haystack[i : i + len(needle)] == needle for i in range(len(haystack) - len(needle) + 1))


def answer_leak(text: str, answer: str, aliases: Iterable[str]) -> str | None:
    for form in (answer, *aliases):
        if contains_phrase(text, form):
            return form
    return None


def evidence_leak(text: str, evidence: Iterable[str | None], n: int) -> str | None:
    """The first n-token window shared by the question and an evidence sentence, if any."""
    question = _tokens(text)
    grams = {tuple(question[i : i + n]) for i in range(len(question) - n + 1)}
    for sentence in evidence:
        tokens = _tokens(sentence or "")
        for i in range(len(tokens) - n + 1):
            if tuple(tokens[i : i + n]) in grams:
                return " ".join(tokens[i : i + n])
    return None


def intermediate_leak(text: str, names: Iterable[str]) -> str | None:
    for name in names:
        bare = name.split(" (")[0]
        if contains_phrase(text, name) or (len(bare) > 3 and contains_phrase(text, bare)):
            return name
    return None


# Words that carry no constraint: question words, articles, auxiliaries, frame fillers.
_FILLER = frozenset(
    "a an the of in on at to for by from with and or is was are were be been has have had does did do what "
    "which who whom whose where when how many much that this its his her their it as s o name named".split()
)
STEM = 5  # words agree on their first letters: "directed" ~ "director", "married" ~ "marriage"


def _stems(text: str) -> set[str]:
    return {t[:STEM] for t in _tokens(text) if t not in _FILLER and len(t) > 1}


def relation_stems(relation: str) -> set[str]:
    """Every content word by which the relation's lexicon entry expresses it (noun, question and clue frames)."""
    entry = phrase(relation)
    frames = " ".join((entry.noun, *entry.ask, entry.clue, entry.count_ask)).replace("{s}", " ").replace("{o}", " ")
    return _stems(frames) | _stems(relation.replace("_", " "))


def unfaithful(text: str, mentions: Iterable[tuple[str, str]], relations: list[str]) -> str | None:
    """Why `text` does not express its plan, or None.

    `mentions` are (what, phrase) pairs the plan gave (the start entity, each intermediate's description):
    at least half of each phrase's content words must be in the text. Of `relations` (the chain's, in
    order), the last (what is asked for) must be expressed and at least half of all of them.
    """
    words = _stems(text)
    for what, given in mentions:
        needed = _stems(given)
        if needed and len(needed & words) * 2 < len(needed):
            return f"{what} ({given!r}) is not in the text"
    expressed = [bool(relation_stems(r) & words) for r in relations]
    if relations and not expressed[-1]:
        return f"the asked relation {relations[-1]!r} is not in the text"
    if sum(expressed) * 2 < len(relations):
        return f"only {sum(expressed)} of {len(relations)} relations of the chain are in the text"
    return None


def vague_answer(path: Path) -> str | None:
    """A literal string answer that is one lower-case word ("capital", "yes") is an infobox keyword."""
    answer = path.answer.strip()
    if path.answer_type == "string" and answer.isalpha() and answer.islower():
        return f"keyword-like answer {answer!r}"
    return None


def _years_of(graph: CSRGraph, node: int, relation: int) -> list[int]:
    years = []
    for obj in graph.objects(node, relation):
        if graph.kind[obj] == LITERAL:
            value_type, value, _ = split_literal_key(graph.keys[obj])
            parsed = parse_date(value) if value_type == "date" else None
            if parsed:
                years.append(parsed[0])
    return years


def _satisfies(graph: CSRGraph, node: int, clue: Clue) -> bool:
    """Conservative: a candidate is excluded only when the graph states something contradicting the clue."""
    if clue.type_noun and graph.entity_type[node] and type_noun(graph.entity_type[node]) != clue.type_noun:
        return False
    relation = graph.relation_id(clue.attribute) if clue.attribute else None
    if relation is not None and clue.years:
        years = _years_of(graph, node, relation)
        if years and not any(clue.years[0] <= y <= clue.years[1] for y in years):
            return False
    if relation is not None and clue.object:
        objects = [graph.label(o) for o in graph.objects(node, relation)]
        if objects and clue.object not in objects:
            return False
    return True


def chain_answers(graph: CSRGraph, path: Path, clues: Iterable[Clue]) -> set[int]:
    """Every node that satisfies the question's constraint chain, starting from the named start entity."""
    by_position: dict[int, list[Clue]] = {}
    for clue in clues:
        by_position.setdefault(clue.position, []).append(clue)
    start = graph.node_id(path.start)
    current = {start} if start is not None else set()
    for index, hop in enumerate(path.hops):
        relation = graph.relation_id(hop.relation)
        if relation is None:
            return set()
        following: set[int] = set()
        for node in current:
            following.update(graph.objects(node, relation).tolist())
        if index + 1 < len(path.nodes) - 1:
            for clue in by_position.get(index + 1, []):
                following = {n for n in following if _satisfies(graph, n, clue)}
        current = following
    return current


def answer_node(graph: CSRGraph, path: Path) -> int | None:
    """The graph node of the path's answer (the object of its last hop)."""
    last = path.hops[-1]
    head = graph.node_id(last.head)
    relation = graph.relation_id(last.relation)
    if head is None or relation is None:
        return None
    for obj in graph.objects(head, relation):
        if graph.label(obj) == path.answer:
            return int(obj)
    return None


def alternative_answer(graph: CSRGraph, path: Path, clues: Iterable[Clue]) -> str | None:
    """None when exactly the path's answer satisfies the chain; otherwise why the question is ambiguous."""
    answers = chain_answers(graph, path, clues)
    target = answer_node(graph, path)
    if target is None or target not in answers:
        return "the path's answer does not satisfy its own chain"
    if len(answers) > 1:
        others = sorted(graph.label(a) for a in answers if a != target)[:3]
        return f"{len(answers)} answers satisfy the chain, e.g. {others}"
    return None


def fewer_hops(graph: CSRGraph, path: Path) -> str | None:
    """The shortest distance from start to answer when it is below the path's hop count."""
    start, target = graph.node_id(path.start), answer_node(graph, path)
    if start is None or target is None:
        return None
    frontier, seen = np.array([start]), {start}
    for depth in range(1, len(path.hops)):
        targets = np.concatenate([graph.dst[graph.indptr[n] : graph.indptr[n + 1]] for n in frontier]) if len(frontier) else np.array([], np.int32)
        if target in set(targets.tolist()):
            return f"answer reachable in {depth} hop(s)"
        fresh = [int(n) for n in np.unique(targets) if int(n) not in seen]
        seen.update(fresh)
        frontier = np.array(fresh[:MAX_FRONTIER], np.int64)
    return None


class ClosedBookAnswer(BaseModel):
    answer: str


SHORTCUT_PROMPT = (
    "Answer the question from memory, without searching. Reply with JSON {\"answer\": str}: a short answer "
    "(a name, date or number), your best guess even when unsure."
)


async def shortcut(client: LLMClient, text: str, answer: str, aliases: list[str], attempts: int) -> str | None:
    """Ask the model `attempts` times without tools; return the first answer that matches, if any."""
    messages = [{"role": "system", "content": SHORTCUT_PROMPT}, {"role": "user", "content": text}]
    replies = await asyncio.gather(*[
        client.complete_json(messages, ClosedBookAnswer, cache_salt=f"shortcut-attempt-{i}") for i in range(attempts)
    ])
    for reply in replies:
        if match_answer(reply.answer, answer, aliases).correct:
            return reply.answer
    return None
