"""Offline logical soundness: is what the turn says grounded, and does what it does follow from it?

Four parts, the weakest decides:
- claims: every name, number or quoted string in an asserting clause of the reasoning (not a plan, a
  question or a hedge) must be known from the question or an earlier observation, and names asserted
  together must have been seen together (in one search result, one page, or the question); a clause that
  assigns one value of a row an earlier observation listed with several ("Starring: A B, C D") needs a
  reason ("because", "fits", "the one ... means", an ordinal the row settles: "his second wife"): an
  unexplained pick is an unsupported claim;
- action: the call's arguments must come from the reasoning (or, with no reasoning, from what is known);
  a call that names nothing the stated plan mentions does not follow from it (unless the plan names the
  tool and the call names something known: "I will open it"), nor one of another tool than the plan names
  ("I will search for him" and a page opened), nor a call after a reasoning that states the answer ("The
  answer is 1943.") and plans no step;
- consistency (`critic.consistency`): reasoning that contradicts a row of a page read, or changes its
  answer with nothing new in between, is unsound reasoning;
- final answer: it must be correct and shown by an earlier observation; a right answer no observation
  showed is an unsupported claim (a guess), a wrong one fails outright.
Observation text only ever serves as evidence here, so instructions inside a page cannot move a score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from critic.checks import is_answer_turn
from critic.consistency import changed_answer, contradicted_rows, stated_answers
from critic.evidence import Knowledge
from critic.text import (
    PLAN_MARKERS,
    clauses,
    contains_phrase,
    content_tokens,
    is_assertion,
    named_spans,
    normalize,
    quoted_spans,
    surface_forms,
    value_forms,
)
from schemas.questions import Question
from schemas.trajectory import Trajectory, Turn
from synth.matching import match_answer
from wikitext.plain_text import INFOBOX_ROW, listed_values

UNSUPPORTED_CAP = 0.4
REASON_MARKERS = re.compile(r"\b(because|since|means|fits|matches|the one|which is why|so that|first|second|third|last|latest|current|former|earlier|later|only|eldest|youngest)\b", re.I)
# A step the agent says it will take itself, and the tool a planned step names.
FIRST_PERSON_STEP = re.compile(r"\b(i will|i'll|let me|i need|i should|next i)\b", re.I)
PLANNED_TOOL = re.compile(r"\b(?:i will|i'll|let me|i need to|i should|next i)\s+(?:now\s+|first\s+|try to\s+)?"
                          r"(?P<verb>search|open|read|look\s+for)\b", re.I)
TOOLS_A_VERB_FITS = {"search": {"search"}, "open": {"open_page", "find_in_page"}, "read": {"open_page", "find_in_page"},
                     "look for": {"find_in_page"}}
PLANS_TO_ANSWER = re.compile(r"\b(?:give|giving|provide|submit|state)\b.{0,20}\banswer\b|\banswer with\b", re.I)


@dataclass(frozen=True)
class SoundnessPart:
    score: float
    detail: str
    kind: str | None = None


@dataclass(frozen=True)
class SoundnessResult:
    score: float
    rationale: str
    kinds: tuple[str, ...]
    unsupported: tuple[str, ...] = ()


def unsupported_spans(reasoning: str, knowledge: Knowledge) -> tuple[list[str], int]:
    """(unsupported names/values/quotes, all of them) asserted by the reasoning."""
    asserting = [clause for clause in clauses(reasoning) if is_assertion(clause)]
    unsupported, total = [], 0
    for clause in asserting:
        names, quotes = named_spans(clause), quoted_spans(clause)
        total += len(names) + len(quotes)
        unknown = [s for s in names if not knowledge.supports(s)]
        unsupported += unknown
        unsupported += [f'"{q}"' for q in quotes if not knowledge.supports_quote(q)]
        if not unknown:
            unsupported += [f"{s} (in this relation)" for s in knowledge.unrelated(names)]
    if not REASON_MARKERS.search(reasoning):
        unsupported += [f"{pick} (picked from a list without a reason)"
                        for clause in asserting for pick in unexplained_picks(clause, knowledge)]
    return unsupported, total


def unexplained_picks(clause: str, knowledge: Knowledge) -> list[str]:
    """Values a clause assigns ("... is B C") that an earlier observation only listed among several."""
    if " is " not in f" {clause} ":
        return []
    assigned = normalize(f" {clause} ".split(" is ", 1)[1])
    picks = []
    for observation in knowledge.observations:
        for name in _listed_names(observation):
            if contains_phrase(assigned, name) and name not in picks:
                picks.append(name)
    return picks


@lru_cache(maxsize=4096)
def _listed_names(observation: str) -> tuple[str, ...]:
    """The names an observation's infobox rows list among several, in order (read once, not at each later
    turn's every clause)."""
    return tuple(item.split(" (")[0] for line in observation.split("\n")
                 if (row := INFOBOX_ROW.match(line.strip())) for item in listed_values(row.group(2)))


def claims_part(reasoning: str, knowledge: Knowledge) -> SoundnessPart:
    return _claims_verdict(*unsupported_spans(reasoning, knowledge))


def _claims_verdict(unsupported: list[str], total: int) -> SoundnessPart:
    if not unsupported:
        return SoundnessPart(1.0, f"{total} asserted names/values, all supported" if total else "no factual claims")
    score = UNSUPPORTED_CAP * max(0, total - len(unsupported)) / max(total, 1)
    listed = ", ".join(dict.fromkeys(unsupported))[:200]
    return SoundnessPart(score, f"unsupported by question or observations: {listed}", "unsupported_claim")


def action_part(turn: Turn, knowledge: Knowledge) -> SoundnessPart:
    call = turn.tool_call
    if call is None or is_answer_turn(turn):
        return SoundnessPart(1.0, "")
    argument_words = content_tokens(" ".join(v for v in call.arguments.values() if isinstance(v, str)))
    if not argument_words:
        return SoundnessPart(1.0, "")
    reasoning = turn.reasoning.strip()
    if not FIRST_PERSON_STEP.search(reasoning) and stated_answers(turn):
        return SoundnessPart(0.2, f"the reasoning states the answer and plans no step, but it calls {call.name}",
                             "unmotivated_action")
    verbs = {" ".join(m.group("verb").lower().split()) for m in PLANNED_TOOL.finditer(reasoning)}
    if verbs and not any(call.name in TOOLS_A_VERB_FITS[v] for v in verbs):
        return SoundnessPart(0.2, f"the reasoning plans to {'/'.join(sorted(verbs))}, but it calls {call.name}",
                             "unmotivated_action")
    if argument_words & content_tokens(reasoning):
        return SoundnessPart(1.0, "the call follows the reasoning")
    if verbs and argument_words & knowledge.tokens:
        return SoundnessPart(0.8, f"the planned {call.name} on something known (a page the plan refers to)")
    plans = [c for c in clauses(reasoning) if PLAN_MARKERS.search(c)]
    if any(PLANS_TO_ANSWER.search(c) for c in plans):
        return SoundnessPart(0.2, f"the reasoning says it will answer, but it calls {call.name}", "unmotivated_action")
    if any(named_spans(c) for c in plans) or FIRST_PERSON_STEP.search(reasoning):
        return SoundnessPart(0.2, f"{call.name} call is not the step the reasoning plans", "unmotivated_action")
    if argument_words & knowledge.tokens:
        return SoundnessPart(0.8, "the call builds on what is known")
    if reasoning:
        return SoundnessPart(0.3, f"{call.name} arguments come from neither reasoning nor context", "unmotivated_action")
    return SoundnessPart(0.6, "no reasoning given; the call names nothing known yet")


def answer_is_correct(answer: str, trajectory: Trajectory, question: Question | None) -> bool:
    """The trajectory's graded outcome, or a match with any spelling of the gold answer ("8,799,800")."""
    if answer == trajectory.final_answer and trajectory.outcome.correct:
        return True
    answer_type = question.path.answer_type if question else "string"
    golds = [*surface_forms(trajectory.answer, answer_type), *trajectory.aliases]
    return any(match_answer(form, golds[0], golds[1:]).correct for form in value_forms(answer))


def answer_part(turn: Turn, trajectory: Trajectory, question: Question | None, knowledge: Knowledge) -> SoundnessPart:
    answer = turn.final_answer
    if answer is None and turn.tool_call is not None and not turn.tool_error:
        answer = turn.tool_call.arguments.get("text") if is_answer_turn(turn) else None
    if not isinstance(answer, str) or not answer.strip():
        return SoundnessPart(1.0, "")  # no answer given (a failed answer call is tool accuracy's failure)
    if not answer_is_correct(answer, trajectory, question):
        return SoundnessPart(0.0, f"final answer {answer!r} is wrong", "wrong_answer")
    answer_type = question.path.answer_type if question else "string"
    shown = knowledge.supports(answer) or any(knowledge.supports(f) for f in surface_forms(trajectory.answer, answer_type))
    if not shown:
        return SoundnessPart(0.3, f"final answer {answer!r} appears in no observation (a guess)", "unsupported_claim")
    return SoundnessPart(1.0, "final answer is correct and shown by the evidence")


def consistency_part(turn: Turn, earlier: list[Turn]) -> SoundnessPart:
    contradictions = contradicted_rows(turn.reasoning, earlier)
    changed = changed_answer(turn, earlier)
    if not contradictions and changed is None:
        return SoundnessPart(1.0, "")
    why = "; ".join([*contradictions, *([changed] if changed else [])])[:200]
    return SoundnessPart(0.2, f"the reasoning contradicts itself or what it read: {why}", "unsound_reasoning")


def logical_soundness(turn: Turn, trajectory: Trajectory, question: Question | None, knowledge: Knowledge) -> SoundnessResult:
    """Score a turn against `knowledge`, which holds the question and the observations before this turn."""
    unsupported, total = unsupported_spans(turn.reasoning, knowledge)
    claims = _claims_verdict(unsupported, total)
    earlier = [t for t in trajectory.turns if t.index < turn.index]
    parts = [claims, action_part(turn, knowledge), answer_part(turn, trajectory, question, knowledge),
             consistency_part(turn, earlier)]
    score = min(p.score for p in parts)
    rationale = "; ".join(p.detail for p in parts if p.detail) or "nothing to check"
    kinds = tuple(dict.fromkeys(p.kind for p in parts if p.kind))
    return SoundnessResult(round(score, 4), rationale, kinds, tuple(unsupported) if claims.kind else ())
