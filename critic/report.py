"""`hopsmith critic-report`: precision and recall of the critic per criterion and per failure kind.

Two label sources: labelled sets (`--labelled`, repeatable: the hand-labelled `tests/data/critic_labelled.jsonl`
and the natural set of uninjected rollouts labelled by reviewer rules, `critic.labelling`), judged here with
the configured critic (offline, or with the LLM judge given --judge-base-url), or judged pipeline output
(`--judged out/judged`) labelled by the errors the offline policy injected. Injected labels only cover the
kinds the policy injects, so that report lists those kinds; turns it did not tamper with count as good,
which understates precision where an honest turn really was weak.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from critic.calibration import INJECTED_KINDS, CalibrationReport, calibrate, injected_labels, load_labelled
from critic.judge import judge_batch
from ground.errors import UserError
from ground.io import read_records
from ground.storage import as_path
from llm.client import LLMUnavailable, run_async
from schemas.config import JudgeConfig
from schemas.critic import JudgedTrajectory


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
