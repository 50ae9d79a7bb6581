"""Critical turns: the turns that moved a trajectory toward its answer, the only passing turns the SFT renders
train on under the `critical` loss policy (ToolMind-Web-QA trains on ~7 critical turns a trajectory, about 3%
of its turns; keeping the other turns in context with loss 0 beat dropping them, 0.60 vs 0.33).

A turn the critic passed is critical when it
- first retrieves a gold-path fact: its observation is the first to show a hop's head and tail together;
- states an intermediate entity correctly: an asserting clause of its reasoning names a tail of the path
  that is not the answer, for the first time in the trajectory, and an earlier observation showed it;
- gives the final answer (a passing answer turn is correct and shown by the evidence).
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
        tails = {h.tail for h in question.path.hops[:-1] if h.tail} if question else set()
        answer = normalize(question.answer) if question else ""
        intermediates = [u for u in knowledge.units if u.kind == "entity" and u.label in tails
                         and normalize(u.label) != answer]
        return cls(intermediates)

    def reasons(self, turn: Turn, passed: bool, knowledge: Knowledge) -> list[str]:
        """Why this turn is critical (empty: it is not); call before `knowledge.add(turn)`."""
        stated_now = self._stated(turn.reasoning, knowledge)
        self.stated |= stated_now  # stated once, even by a failing turn: a later restatement is not new
        if not passed:
            return []
        if is_answer_turn(turn):
            return ["final answer"]
        facts = sorted(u.label for u in knowledge.evidenced_by(turn) - knowledge.evidenced if u.kind == "fact")
        return [f"retrieves {label}" for label in facts] + [f"states {u.label}" for u in sorted(stated_now, key=str)]

    def _stated(self, reasoning: str, knowledge: Knowledge) -> set[EvidenceUnit]:
        pending = [u for u in self.intermediates if u not in self.stated and knowledge.supports(u.label)]
        if not pending:
            return set()
        asserted = [normalize(c) for c in clauses(reasoning) if is_assertion(c)]
        return {u for u in pending if any(mentions_any(clause, u.forms) for clause in asserted)}

