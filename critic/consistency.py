"""Offline unsound reasoning: reasoning that contradicts what the agent read or what it said before.

Unsupported claims (soundness) are names nobody showed; this is the opposite failure: the evidence was
there and the reasoning says otherwise, or the agent changes its mind with nothing new to change it:
- a clause gives a row of a page the agent read another value: "the birth place of X is Y", "X's spouse
  is Y", "X was born in/on Y" while X's page showed "Birth place: Z";
- it states an answer ("the answer is X", "\\boxed{X}", its answer call) other than the one it stated in
  the same turn, or in an earlier turn when no result came in between.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from critic.checks import ANSWER_TOOL
from critic.evidence import observation_text, target_page
from critic.text import clauses, content_tokens, normalize
from schemas.trajectory import Turn
from synth.matching import match_answer
from wikitext.plain_text import INFOBOX_ROW

_NAME = r"[A-Z][\w.'’-]*(?: [A-Z][\w.'’-]*)*"
# (entity, row label, claimed value), each pattern naming its groups.
ROW_CLAIMS = (
    re.compile(rf"\b[Tt]he (?P<label>[a-z][a-z ]{{1,30}}?) of (?P<entity>{_NAME}) (?:is|was) (?P<value>.+)"),
    re.compile(rf"\b(?P<entity>{_NAME})['’]s (?P<label>[a-z][a-z ]{{1,30}}?) (?:is|was) (?P<value>.+)"),
    re.compile(rf"\b(?P<entity>{_NAME}) was born (?P<label>on|in) (?P<value>.+)"),
)
# A stated answer is a value; "the answer is the capital of the state where ..." restates the question.
MAX_ANSWER_WORDS = 6
STATED_ANSWER = re.compile(r"\bthe (?:final )?answer is (?!(?:in|on|at|not|probably|likely)\b)(?P<value>[^.;:\n]+?)"
                           r"(?:,\s*because\b|\.(?:\s|$)|[;:\n]|$)|\\boxed\{(?P<boxed>[^}]*)\}", re.I)


def page_rows(earlier: Sequence[Turn]) -> dict[str, dict[str, str]]:
    """Infobox rows of the pages read so far: normalised title -> normalised label -> value."""
    pages: dict[str, dict[str, str]] = {}
    for turn in earlier:
        text, page = observation_text(turn), target_page(turn)
        if not text or page is None:
            continue
        pages.setdefault(normalize(page), {}).update(_infobox_rows(text))
    return pages


@lru_cache(maxsize=4096)
def _infobox_rows(text: str) -> tuple[tuple[str, str], ...]:
    """An observation's infobox rows in order, (normalised label, value): read once, not at every later turn."""
    rows = []
    for line in text.split("\n"):
        match = INFOBOX_ROW.match(line.strip())
        if match:
            rows.append((normalize(match.group(1)), match.group(2)))
    return tuple(rows)


def _row_label(label: str, value: str) -> str:
    """"born in Chicago" speaks of the birth place, "born on/in 1964" of the birth date."""
    if label.lower() == "on" or (label.lower() == "in" and re.search(r"\d", value)):
        return "birth date"
    return "birth place" if label.lower() == "in" else label


def _holds(row_value: str, claimed: str) -> bool:
    """Does the row hold the claimed value (the whole row or one of its items, any word order)?"""
    said = content_tokens(claimed)
    items = [content_tokens(re.sub(r"\s*\(.*", "", part)) for part in (row_value, *row_value.split(", "))]
    return any(said <= item or (item and item <= said) for item in items)


def contradicted_rows(reasoning: str, earlier: Sequence[Turn]) -> list[str]:
    """Claims of the reasoning that a row of a page read contradicts, as "claim (the page says ...)"."""
    claims = row_claims(reasoning)
    pages = page_rows(earlier) if claims else {}  # most reasoning claims no row
    found = []
    for claim, entity, label, value in claims:
        row = pages.get(entity, {}).get(label)
        if row is not None and not _holds(row, value):
            found.append(f"{claim} (the page says {row})")
    return found


@lru_cache(maxsize=4096)
def row_claims(reasoning: str) -> tuple[tuple[str, str, str, str], ...]:
    """The rows the reasoning's clauses claim a value of, as (claim, normalised entity, normalised row label,
    value), in order (cached: the rollouts of a question repeat each other's reasoning)."""
    claims = []
    for clause in clauses(reasoning):
        for pattern in ROW_CLAIMS:
            for match in pattern.finditer(clause):
                value = match.group("value").strip()
                label = normalize(_row_label(match.group("label"), value))
                claims.append((match.group(0).strip(), normalize(match.group("entity")), label, value))
    return tuple(claims)


def stated_answers(turn: Turn) -> list[str]:
    """The answers a turn states: in its reasoning, then in its answer call."""
    answers = [(m.group("value") or m.group("boxed") or "").strip(" .'\"") for m in STATED_ANSWER.finditer(turn.reasoning)]
    answers = [a for a in answers if len(a.split()) <= MAX_ANSWER_WORDS]
    call = turn.tool_call
    if call is not None and call.name == ANSWER_TOOL and isinstance(call.arguments.get("text"), str):
        answers.append(call.arguments["text"])
    return [a for a in answers if a.strip()]


def changed_answer(turn: Turn, earlier: Sequence[Turn]) -> str | None:
    """The answer the turn gives against one it gave before with nothing new in between, if any."""
    answers = stated_answers(turn)
    if not answers:
        return None
    for other in answers[1:]:
        if not match_answer(other, answers[0], []).correct:
            return f"it states {answers[0]!r} and {other!r}"
    for before in reversed(earlier):
        if observation_text(before):
            return None  # a result came in since: changing its mind may be sound
        said = [a for a in stated_answers(before) if a]
        if said:
            same = match_answer(answers[0], said[-1], []).correct
            return None if same else f"it said {said[-1]!r} before and nothing new came in, now {answers[0]!r}"
    return None
