"""`hopsmith critic-report`: precision and recall of the critic per criterion and per failure kind.

Three label sources: a reviewer's per-turn verdicts on the sample's rollouts (`--reviewed`, the
agreement per criterion and the loss on dead ends, `reviewed_agreement`), labelled sets (`--labelled`, repeatable: the hand-labelled `tests/data/critic_labelled.jsonl`
and the natural set of uninjected rollouts labelled by reviewer rules, `critic.labelling`), judged here with
the configured critic (offline, or with the LLM judge given --judge-base-url), or judged pipeline output
(`--judged out/judged`) labelled by the errors the offline policy injected. Injected labels only cover the
kinds the policy injects, so that report lists those kinds; turns it did not tamper with count as good,
which understates precision where an honest turn really was weak.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from critic.calibration import INJECTED_KINDS, CalibrationReport, calibrate, injected_labels, load_labelled
from critic.judge import judge_batch
from critic.scoring import judge_turns
from ground.errors import UserError
from ground.io import read_records
from ground.storage import as_path
from llm.client import LLMUnavailable, run_async
from schemas.config import JudgeConfig
from schemas.critic import JudgedTrajectory
from schemas.questions import Question
from schemas.trajectory import Trajectory


def labelled_report(path: str | Path, config: JudgeConfig, cache_dir: str | Path | None = None) -> CalibrationReport:
    """Judge each labelled turn in its context (the trajectory up to that turn) and compare with its labels."""
    rows = load_labelled(path)
    questions = {r.question.question_id: r.question for r in rows if r.question is not None}
    try:
        judged, skipped = run_async(lambda: judge_batch([r.trajectory for r in rows], questions, config, cache_dir))
    except LLMUnavailable as failure:
        raise UserError(f"the LLM judge is unavailable ({failure}); rerun to retry") from None
    if skipped:
        raise UserError(f"the LLM judge failed on {len(skipped)} labelled turns: {skipped[0].detail}")
    pairs = []
    for row, record in zip(rows, judged, strict=True):
        judgement = next(j for j in record.judgements if j.turn_index == row.trajectory.turns[row.turn_index].index)
        pairs.append((row.expected_pass, row.expected_kinds, judgement))
    engine = judged[0].judgements[0].engine if judged and judged[0].judgements else "offline"
    return calibrate(pairs, f"{path}, critic {engine}")


def read_judged(folder: str | Path) -> list[JudgedTrajectory]:
    folder = as_path(folder)
    records = list(read_records(JudgedTrajectory, folder / "judged" if (folder / "judged").is_dir() else folder))
    if not records:
        raise UserError(f"no judged trajectories in {folder}")
    return records


def judged_summary(records: list[JudgedTrajectory]) -> str:
    """Per framework and policy: turns, share passing each criterion and the verdict, mean reward."""
    groups: dict[str, list] = defaultdict(list)
    for record in records:
        groups[f"{record.trajectory.framework}/{record.trajectory.policy}"].extend(record.judgements)
    lines = [f"{'framework/policy':28} {'turns':>7} {'tool':>6} {'gain':>6} {'sound':>6} {'pass':>6} {'reward':>7}"]
    for name, judgements in sorted(groups.items()):
        count = max(1, len(judgements))
        shares = [sum(flag(j) for j in judgements) / count for flag in (
            lambda j: j.tool_accuracy.passed, lambda j: j.information_gain.passed,
            lambda j: j.logical_soundness.passed, lambda j: j.verdict)]
        mean_reward = sum(j.reward for j in judgements) / count
        lines.append(f"{name:28} {len(judgements):>7} " + " ".join(f"{v:6.2f}" for v in shares) + f" {mean_reward:7.3f}")
    return "\n".join(lines) + "\n"


def judged_report(folder: str | Path) -> CalibrationReport:
    """Compare judged pipeline output with the offline policy's injected errors."""
    records = read_judged(folder)
    pairs = [pair for record in records for pair in injected_labels(record)]
    report = calibrate(pairs, f"{folder} (injected errors of the offline policy)")
    injectable = set(INJECTED_KINDS.values())
    report.kinds = {k: v for k, v in report.kinds.items() if k in injectable}
    return report


REVIEWED_CRITERIA = ("tool_accuracy", "information_gain", "logical_soundness", "grounded")
_OUTCOMES = {(True, True): "both pass", (False, False): "both fail", (False, True): "critic fails only",
             (True, False): "reviewer fails only"}


@dataclass
class ReviewedAgreement:
    """The critic against a reviewer's per-turn verdicts: per criterion, how many turns both pass, both
    fail, or only one fails; and how many `loss=1` turns the reviewer called dead ends."""

    source: str
    counts: dict[str, Counter] = field(default_factory=dict)
    loss_on_dead_ends: int = 0
    loss_turns: int = 0

    def agreement(self, criterion: str) -> float:
        counts = self.counts[criterion]
        return (counts["both pass"] + counts["both fail"]) / max(1, sum(counts.values()))

    def format(self) -> str:
        lines = [f"Critic vs reviewer on {self.source}",
                 f"{'criterion':18} {'turns':>6} {'agree':>6} {'both fail':>10} {'critic only':>12} {'reviewer only':>14}"]
        for criterion in REVIEWED_CRITERIA:
            c = self.counts[criterion]
            lines.append(f"{criterion:18} {sum(c.values()):>6} {self.agreement(criterion):6.2f} {c['both fail']:>10} "
                         f"{c['critic fails only']:>12} {c['reviewer fails only']:>14}")
        lines.append(f"loss=1 turns: {self.loss_turns}, on a reviewer's dead end: {self.loss_on_dead_ends}")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict:
        return {"source": self.source, "loss_turns": self.loss_turns, "loss_on_dead_ends": self.loss_on_dead_ends,
                **{c: {"agreement": round(self.agreement(c), 4), **self.counts[c]} for c in REVIEWED_CRITERIA}}


def reviewed_agreement(path: str | Path, config: JudgeConfig) -> ReviewedAgreement:
    """Judge each reviewed trajectory offline and compare each turn with the reviewer's verdicts
    (tests/data/README_critic_reviewed.md says who labelled them and how)."""
    report = ReviewedAgreement(str(path), {c: Counter() for c in REVIEWED_CRITERIA})
    for line in as_path(path).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        trajectory, question = Trajectory.model_validate(row["trajectory"]), Question.model_validate(row["question"])
        judgements = {j.turn_index: j for j in judge_turns(trajectory, question, config)}
        for label in row["labels"]:
            judgement = judgements[trajectory.turns[label["turn"]].index]
            critic = {"tool_accuracy": judgement.tool_accuracy.passed,
                      "information_gain": judgement.information_gain.passed,
                      "logical_soundness": judgement.logical_soundness.passed,
                      "grounded": "ungrounded" not in judgement.failure_kinds}
            for criterion in REVIEWED_CRITERIA:
                ours, theirs = critic[criterion], label[criterion]
                report.counts[criterion][_OUTCOMES[ours, theirs]] += 1
            report.loss_turns += judgement.loss_mask
            report.loss_on_dead_ends += judgement.loss_mask and label["dead_end"]
    return report
