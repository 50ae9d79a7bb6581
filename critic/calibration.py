"""Calibration: how well the critic's verdicts match labels, per criterion and per failure kind.

Labels come from the hand-labelled set (`tests/data/critic_labelled.jsonl`: question, trajectory up to the
judged turn, expected pass/fail per criterion and failure kinds) or, for judged pipeline output, from the
errors the offline policy injected on purpose (`Turn.injected_error`). The positive class is "fails":
precision is the share of turns the critic failed that really are bad, recall the share of bad turns it
caught.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from schemas.critic import CRITERIA, FAILURE_KINDS, KIND_CRITERION, JudgedTrajectory, TurnJudgement
from schemas.questions import Question
from schemas.trajectory import Trajectory

# The offline policy's injected error names (synth.trajectories) -> the critic's failure kinds.
INJECTED_KINDS = {
    "repeated_search": "repeated_call",
    "malformed_arguments": "malformed_call",
    "off_path_detour": "off_path_detour",
    "unsupported_claim": "unsupported_claim",
    "premature_answer": "wrong_answer",
}
# A tool failure leaves nothing to learn from, so it also fails information gain.
_NO_GAIN_KINDS = {"malformed_call", "tool_error", "empty_result", "repeated_call"}


@dataclass
class LabelledTurn:
    row_id: str
    question: Question | None
    trajectory: Trajectory
    turn_index: int
    expected_pass: dict[str, bool]
    expected_kinds: set[str]


def load_labelled(path: str | os.PathLike) -> list[LabelledTurn]:
    rows = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        expected = row["expected"]
        unknown = set(expected["failure_kinds"]) - set(FAILURE_KINDS)
        if unknown:
            raise ValueError(f"{path}:{number}: unknown failure kinds {sorted(unknown)}")
        rows.append(
            LabelledTurn(
                row_id=row["row_id"],
                question=Question.model_validate(row["question"]) if row.get("question") else None,
                trajectory=Trajectory.model_validate(row["trajectory"]),
                turn_index=row["turn_index"],
                expected_pass={c: bool(expected[c]) for c in CRITERIA},
                expected_kinds=set(expected["failure_kinds"]),
            )
        )
    return rows


def injected_labels(judged: JudgedTrajectory) -> list[tuple[dict[str, bool], set[str], TurnJudgement]]:
    """(expected pass per criterion, expected kinds, judgement) from the policy's injected errors."""
    pairs = []
    by_index = {j.turn_index: j for j in judged.judgements}
    for turn in judged.trajectory.turns:
        if turn.index not in by_index:
            continue
        kind = INJECTED_KINDS.get(turn.injected_error or "")
        kinds = {kind} if kind else set()
        failed = {KIND_CRITERION[k] for k in kinds}
        if kinds & _NO_GAIN_KINDS:
            failed.add("information_gain")
        pairs.append(({c: c not in failed for c in CRITERIA}, kinds, by_index[turn.index]))
    return pairs


@dataclass
class Counts:
    true_positive: int = 0
    false_positive: int = 0
    false_negative: int = 0
    true_negative: int = 0

    def add(self, expected: bool, predicted: bool) -> None:
        if expected and predicted:
            self.true_positive += 1
        elif predicted:
            self.false_positive += 1
        elif expected:
            self.false_negative += 1
        else:
            self.true_negative += 1

    @property
    def support(self) -> int:
        return self.true_positive + self.false_negative

    @property
    def precision(self) -> float | None:
        flagged = self.true_positive + self.false_positive
        return self.true_positive / flagged if flagged else None

    @property
    def recall(self) -> float | None:
        return self.true_positive / self.support if self.support else None


@dataclass
class CalibrationReport:
    turns: int = 0
    verdict: Counts = field(default_factory=Counts)
    criteria: dict[str, Counts] = field(default_factory=lambda: {c: Counts() for c in CRITERIA})
    kinds: dict[str, Counts] = field(default_factory=lambda: {k: Counts() for k in FAILURE_KINDS})
    label_source: str = ""

    def add(self, expected_pass: dict[str, bool], expected_kinds: set[str], judgement: TurnJudgement) -> None:
        self.turns += 1
        self.verdict.add(not all(expected_pass.values()), not judgement.verdict)
        for criterion in CRITERIA:
            self.criteria[criterion].add(not expected_pass[criterion], not getattr(judgement, criterion).passed)
        predicted = set(judgement.failure_kinds)
        for kind in FAILURE_KINDS:
            self.kinds[kind].add(kind in expected_kinds, kind in predicted)

    def evaluated_kinds(self) -> dict[str, Counts]:
        """Failure kinds that occur in the labels or the predictions."""
        return {k: c for k, c in self.kinds.items() if c.support or c.false_positive}

    def to_dict(self) -> dict:
        def row(counts: Counts) -> dict:
            return {"precision": counts.precision, "recall": counts.recall, "support": counts.support,
                    "flagged": counts.true_positive + counts.false_positive}

        return {
            "turns": self.turns,
            "label_source": self.label_source,
            "verdict": row(self.verdict),
            "criteria": {c: row(v) for c, v in self.criteria.items()},
            "failure_kinds": {k: row(v) for k, v in self.evaluated_kinds().items()},
        }

    def format(self) -> str:
        def cell(value: float | None) -> str:
            return "   n/a" if value is None else f"{value:6.2f}"

        lines = [f"critic calibration: {self.turns} turns, labels from {self.label_source}", ""]
        header = f"{'':28} {'precision':>9} {'recall':>7} {'bad turns':>9} {'flagged':>8}"
        for title, table in (("criterion (fails)", {"verdict": self.verdict, **self.criteria}),
                             ("failure kind", self.evaluated_kinds())):
            lines += [f"{title}", header]
            for name, counts in table.items():
                flagged = counts.true_positive + counts.false_positive
                lines.append(f"  {name:26} {cell(counts.precision):>9} {cell(counts.recall):>7} "
                             f"{counts.support:>9} {flagged:>8}")
            lines.append("")
        return "\n".join(lines)


def calibrate(pairs: Iterable[tuple[dict[str, bool], set[str], TurnJudgement]], label_source: str) -> CalibrationReport:
    report = CalibrationReport(label_source=label_source)
    for expected_pass, expected_kinds, judgement in pairs:
        report.add(expected_pass, expected_kinds, judgement)
    return report
