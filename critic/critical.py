"""Critical turns: the turns that moved a trajectory to its answer, the only passing turns the SFT renders
train on under the `critical` loss policy (ToolMind-Web-QA trains on ~7 critical turns a trajectory, about 3%
of its turns; keeping the other turns in context with loss 0 beat dropping them, 0.60 vs 0.33).

In a trajectory whose final answer is correct, a turn the critic passed is critical when it
- first retrieves a gold-path fact: its observation is the first to show a hop's head and tail together
  (the fact the answer's chain needs, found);
- gives the final answer (a passing answer turn is correct and shown by the evidence).
Nothing else is: a turn that only restates a fact found earlier, a corroboration (a call whose arguments name
the head and the value of a fact already retrieved: it checks what is known instead of moving on), and every
dead end (candidates read and rejected, repeats, detours, re-checks) stay in context with loss 0. A run that
ends on a wrong answer or none has no critical turn: each of its turns led away from the answer.
Failed turns are masked or penalised as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from critic.checks import is_answer_turn
from critic.evidence import Knowledge
from critic.text import mentions_any, normalize
from schemas.trajectory import Trajectory, Turn

# ToolMind-Web-QA's own figures (open-wiki-traj.jsonl), reported beside ours on the card and in the run summary.
TOOLMIND_LOSS_SHARE = 0.03
TOOLMIND_CRITICAL_PER_TRAJECTORY = 7.25


@dataclass
class CriticalTracker:
    """Walks a trajectory's turns in order and tells which are critical (and why)."""

    solved: bool

    @classmethod
    def start(cls, trajectory: Trajectory) -> CriticalTracker:
        return cls(trajectory.outcome.correct)

    def reasons(self, turn: Turn, passed: bool, knowledge: Knowledge) -> list[str]:
        """Why this turn is critical (empty: it is not); call before `knowledge.add(turn)`."""
        if not self.solved or not passed or is_corroboration(turn, knowledge):
            return []
        if is_answer_turn(turn):
            return ["final answer"]
        facts = sorted(u.label for u in knowledge.evidenced_by(turn) - knowledge.evidenced if u.kind == "fact")
        return [f"retrieves {label}" for label in facts]


def is_corroboration(turn: Turn, knowledge: Knowledge) -> bool:
    """Does the call go after a fact already retrieved (its arguments name the fact's head and value)?"""
    call = turn.tool_call
    if call is None or is_answer_turn(turn):
        return False
    arguments = normalize(" ".join(v for v in call.arguments.values() if isinstance(v, str)))
    return any(u.kind == "fact" and mentions_any(arguments, u.forms) and mentions_any(arguments, u.head_forms)
               for u in knowledge.evidenced)
