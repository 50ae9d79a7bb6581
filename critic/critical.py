"""Critical turns: the turns that moved a trajectory toward its answer, the only passing turns the SFT renders
train on under the `critical` loss policy (ToolMind-Web-QA trains on ~7 critical turns a trajectory, about 3%
of its turns; keeping the other turns in context with loss 0 beat dropping them, 0.60 vs 0.33).

A turn the critic passed is critical when it
- first retrieves a gold-path fact: its observation is the first to show a hop's head and tail together;
- states an intermediate entity correctly: an asserting clause of its reasoning names the tail of a hop
  that is not the last, for the first time in the trajectory, after an earlier observation showed that
  hop's fact;
- gives the final answer (a passing answer turn is correct and shown by the evidence).
An intermediate is stated once: the first turn whose reasoning states it is the one that counts, critical
only if it passes and moves the run; a failed turn's statement or a corroboration's is not repeated later.
A corroboration is never critical: a call whose arguments name the head and the value of a fact already
retrieved ("find 'Tabitha King' in University of Maine" after her page listed it as her alma mater) checks
what is known instead of moving on. On the sample's dataset such checks held 747 of 4,302 critical turns
(loss 1 on 32.3% of assistant turns before, 28.3% without them; 23.9% once the offline searcher also
checks candidates, the question's description and its periods, which lengthens its runs).
Everything else that passes stays in context with loss 0; failed turns are masked or penalised as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from critic.checks import is_answer_turn
from critic.evidence import EvidenceUnit, Knowledge
from critic.text import clauses, is_assertion, mentions_any, normalize
from schemas.questions import Question
from schemas.trajectory import Turn

# ToolMind-Web-QA's own figures (open-wiki-traj.jsonl), reported beside ours on the card and in the run summary.
TOOLMIND_LOSS_SHARE = 0.03
TOOLMIND_CRITICAL_PER_TRAJECTORY = 7.25


@dataclass
class CriticalTracker:
    """Walks a trajectory's turns in order and tells which are critical (and why)."""

    intermediates: list[EvidenceUnit]
    stated: set[EvidenceUnit] = field(default_factory=set)

    @classmethod
    def start(cls, question: Question | None, knowledge: Knowledge) -> CriticalTracker:
        hops = question.path.hops[:-1] if question else []
        answer = normalize(question.answer) if question else ""
        labels = {f"{h.head} --{h.relation}--> {h.tail}" for h in hops if h.tail and normalize(h.tail) != answer}
        return cls([u for u in knowledge.units if u.kind == "fact" and u.label in labels])

    def reasons(self, turn: Turn, passed: bool, knowledge: Knowledge) -> list[str]:
        """Why this turn is critical (empty: it is not); call before `knowledge.add(turn)`."""
        stated_now = self._stated(turn.reasoning, knowledge)
        self.stated |= stated_now  # stated once, even by a failing turn or a check: a restatement is not new
        if not passed or is_corroboration(turn, knowledge):
            return []
        if is_answer_turn(turn):
            return ["final answer"]
        facts = sorted(u.label for u in knowledge.evidenced_by(turn) - knowledge.evidenced if u.kind == "fact")
        return [f"retrieves {label}" for label in facts] + [f"states {tail_of(u)}" for u in sorted(stated_now, key=str)]

    def _stated(self, reasoning: str, knowledge: Knowledge) -> set[EvidenceUnit]:
        pending = [u for u in self.intermediates if u not in self.stated and u in knowledge.evidenced]
        if not pending:
            return set()
        asserted = [normalize(c) for c in clauses(reasoning) if is_assertion(c)]
        return {u for u in pending if any(mentions_any(clause, u.forms) for clause in asserted)}


def is_corroboration(turn: Turn, knowledge: Knowledge) -> bool:
    """Does the call go after a fact already retrieved (its arguments name the fact's head and value)?"""
    call = turn.tool_call
    if call is None or is_answer_turn(turn):
        return False
    arguments = normalize(" ".join(v for v in call.arguments.values() if isinstance(v, str)))
    return any(u.kind == "fact" and mentions_any(arguments, u.forms) and mentions_any(arguments, u.head_forms)
               for u in knowledge.evidenced)


def tail_of(fact: EvidenceUnit) -> str:
    """The entity a hop's fact unit leads to ("A --spouse--> B" -> "B")."""
    return fact.label.rsplit("--> ", 1)[1]
