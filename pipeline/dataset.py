"""Stage 5 and `make dataset`: run every stage from the dump to a publishable Hub folder.

`run_dataset` calls the stage entry points in order; each keys its output by inputs, config and code
version (`ground.stage.begin_stage`), so a rerun skips finished stages and resumes unfinished ones per
work unit. The last stage, `dataset`, renders every judged trajectory and question into the Hub layout
(`pipeline.layout`), writes the card and plots (`pipeline.card`), and, like every stage, its manifest last.
Rendering is a pure function of the upstream records in their (deterministic) shard order, so a killed
build is simply rebuilt from scratch on rerun. A rebuild is written beside the previous dataset and moved
into place when it is complete (`begin_stage(beside=True)`): a failed one leaves the previous dataset loadable.
"""

from __future__ import annotations

import logging
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ground.errors import UserError
from ground.folder_lock import lock_folder, unlock_folder
from ground.io import (
    atomic_write_text,
    forget_verified,
    parquet_file,
    read_manifest,
    read_records,
    shard_files,
    stable_hash,
)
from ground.progress import console, track
from ground.stage import NEXT, begin_stage
from ground.storage import as_path, remove_tree
from pipeline import renders
from pipeline.card import DatasetStats, render_card, write_plots
from pipeline.layout import CONFIGS, SPLITS, SplitWriter, split_of, write_checksums
from pipeline.run_summary import print_summary, watch_units
from runtime.beam import pipeline_options, use_filesystem_options
from schemas.config import DatasetConfig, ValidationError, config_error_line
from schemas.critic import JudgedTrajectory
from schemas.dataset import QuestionRow
from schemas.manifest import Manifest
from schemas.questions import Question
from synth.difficulty import PassRate, read_pass_rates
from synth.evaluation import band_text, in_band
from synth.report import measure, print_report

log = logging.getLogger(__name__)
STAGE = "dataset"
REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DUMP = REPO_ROOT / "data/sample/enwiki-sample-pages-articles-multistream.xml.bz2"
SAMPLE_INDEX = REPO_ROOT / "data/sample/enwiki-sample-pages-articles-multistream-index.txt.bz2"
# stage name -> folder under the run's `out` directory, in run order
STAGE_FOLDERS = {
    "extract": "graph",
    "walk": "paths",
    "index": "index",  # before questions: their one-search gate searches the agents' index
    "questions": "questions",
    "trajectories": "trajectories",
    "difficulty": "difficulty",  # the eval policy's pass rate a question (`synth.difficulty`)
    "judge": "judged",
    STAGE: "dataset",
}
# stages that write resumable work units, and the parts table whose files count finished units
UNIT_TABLES = {"questions": "questions", "trajectories": "trajectories", "difficulty": "results", "judge": "judged"}


def stage_dirs(out: str | Path) -> dict[str, Path]:
    return {stage: as_path(out) / folder for stage, folder in STAGE_FOLDERS.items()}


def with_sources(config: DatasetConfig) -> DatasetConfig:
    """The config with the shipped sample as the dump when neither a dump nor the API is configured."""
    extract = config.extract
    if extract.dump is None and extract.api_url is None:
        if not SAMPLE_DUMP.is_file():
            raise UserError(f"no --dump given and the shipped sample {SAMPLE_DUMP} is missing")
        extract = extract.model_copy(update={"dump": str(SAMPLE_DUMP), "index": str(SAMPLE_INDEX)})
    if extract.dump is not None and not as_path(extract.dump).is_file():
        raise UserError(f"dump not found: {extract.dump}")
    if extract.index is not None and not as_path(extract.index).is_file():
        raise UserError(f"dump index not found: {extract.index}")
    return config.model_copy(update={"extract": extract})


def run_dataset(config: DatasetConfig, beam_args: Sequence[str] = ()) -> Manifest:
    """Run every stage, skipping finished ones, then build `out/dataset`; prints the run summary."""
    from critic.judge import run_judge
    from extract.stage import run_extract
    from graph.walk_stage import run_walks
    from synth.difficulty import run_difficulty
    from synth.environment import build_index
    from synth.questions import run_questions
    from synth.trajectories import run_trajectories

    config = with_sources(config)
    forget_verified()  # each run checks every finished folder it relies on once
    use_filesystem_options(pipeline_options(config.beam, list(beam_args)))  # an s3:// or gs:// --out
    dirs = stage_dirs(config.out)
    cache = as_path(config.out) / "cache" / "llm"
    beam = {"beam": config.beam, "beam_args": list(beam_args)}
    steps: list[tuple[str, Callable[[], Manifest]]] = [
        ("extract", lambda: run_extract(config=config.extract, out_dir=dirs["extract"], **beam)),
        ("walk", lambda: run_walks(dirs["extract"], dirs["walk"], config.walk, **beam)),
        ("index", lambda: build_index(dirs["extract"], dirs["index"], config.index)),
        (
            "questions",
            lambda: run_questions(
                dirs["extract"], dirs["walk"], dirs["questions"], config.questions, cache, **beam,
                index_dir=dirs["index"],
            ),
        ),
        (
            "trajectories",
            lambda: run_trajectories(
                dirs["questions"], dirs["index"], dirs["trajectories"], config.trajectories, cache, **beam
            ),
        ),
        (
            "difficulty",
            lambda: run_difficulty(
                dirs["questions"], dirs["index"], dirs["difficulty"], config.difficulty, cache, **beam
            ),
        ),
        (
            "judge",
            lambda: run_judge(
                dirs["trajectories"],
                dirs["questions"],
                dirs["index"],
                dirs["judge"],
                config.judge,
                cache,
                **beam,
            ),
        ),
        (STAGE, lambda: build_dataset(config, dirs)),
    ]
    if not config.difficulty.enabled:
        steps = [step for step in steps if step[0] != "difficulty"]
    out = console()
    reused = []
    manifest = None
    as_path(config.out).mkdir(parents=True, exist_ok=True)
    lock_folder(config.out)
    try:
        for position, (name, step) in enumerate(steps, start=1):
            before = read_manifest(dirs[name])
            out.print(f"[bold][{position}/{len(steps)}][/bold] {name} -> {dirs[name]}")
            units = UNIT_TABLES.get(name)
            if units is None:
                manifest = step()
            else:
                # a rebuild over a finished output writes its units beside it (`ground.stage.NEXT`)
                building = dirs[name] / NEXT if before is not None else dirs[name]
                with watch_units(building / "parts" / units, planned_units(name, config, dirs), f"{name} units"):
                    manifest = step()
            if before is not None and before.key == manifest.key and before.finished_at == manifest.finished_at:
                reused.append(name)
                out.print(f"      finished by an earlier run (key {manifest.key[:12]}), skipped")
    finally:  # also after a failure or an interrupt: what is finished, and its counts
        unlock_folder(config.out)
        print_summary(dirs, reused)
        if (report := measure(report_folders(dirs))) is not None:
            print_report(report)
    return manifest


def report_folders(dirs: dict[str, Path]) -> dict[str, Path]:
    """The stage folders the question report reads, by the names it knows them by."""
    return {"graph": dirs["extract"], "paths": dirs["walk"], "questions": dirs["questions"], "index": dirs["index"]}


def _count_rows(folder: Path) -> int:
    return sum(parquet_file(f).metadata.num_rows for f in shard_files(folder))


def planned_units(stage: str, config: DatasetConfig, dirs: dict[str, Path]) -> int:
    """How many resumable work units an LLM stage will write (for its progress bar), from row counts."""
    if stage == "questions":
        rows, size = _count_rows(dirs["walk"] / "paths"), config.questions.paths_per_unit
    elif stage == "trajectories":
        rows, size = _count_rows(dirs["questions"] / "questions"), config.trajectories.questions_per_unit
        if config.trajectories.max_questions is not None:
            rows = min(rows, config.trajectories.max_questions)
    elif stage == "difficulty":
        rows, size = _count_rows(dirs["questions"] / "questions"), config.difficulty.questions_per_unit
    else:
        rows, size = _count_rows(dirs["trajectories"] / "trajectories"), config.judge.batch_size
    return -(-rows // size)


def _unique(records: Iterator, key: Callable[[Any], str], skipped: Counter, reason: str) -> Iterator:
    """Drop records whose id was already seen (counted): a published config never holds a duplicate."""
    seen: set[str] = set()
    for record in records:
        identifier = key(record)
        if identifier in seen:
            skipped[reason] += 1
            continue
        seen.add(identifier)
        yield record


def trajectory_chars(judged: JudgedTrajectory) -> int:
    """The text a trajectory carries: the size hint that keeps shards (and memory) bounded."""
    turns = judged.trajectory.turns
    return sum(len(t.raw_output) + len(t.reasoning) + len(t.observation or "") for t in turns)


def sft_skip_reason(judged: JudgedTrajectory, only_correct: bool) -> str | None:
    """Why a trajectory is left out of the training renders (it stays in `trajectories`), or None."""
    if judged.trajectory.stop_reason == "error":  # the endpoint refused a request: not a way to act
        return "llm_error"
    if only_correct and not judged.trajectory.outcome.correct:
        return "incorrect_outcome"
    if not any(j.loss_mask for j in judged.judgements):
        return "no_kept_turns"
    return None


def _first_conversation(row, seen: set[str]) -> bool:
    """False for a conversation (messages and losses) already rendered: rollouts that ran the same turns
    add no training signal, so every SFT config keeps one copy (the skip is counted)."""
    digest = stable_hash(*((m.role, m.content, m.loss) for m in row.conversations), length=32)
    if digest in seen:
        return False
    seen.add(digest)
    return True


def layout_config(config: DatasetConfig) -> dict[str, Any]:
    """What the dataset stage's output depends on besides its upstream stages (its manifest key)."""
    return {
        "name": config.name,
        "seed": config.seed,
        "test_fraction": config.test_fraction,
        "max_rows_per_shard": config.max_rows_per_shard,
        "max_shard_mb": config.max_shard_mb,
        "sft_only_correct": config.sft_only_correct,
        "difficulty": config.difficulty.enabled,
        "rl_pass_band": config.rl_pass_band,
    }


def measured_difficulty(config: DatasetConfig, dirs: dict[str, Path]) -> tuple[dict[str, PassRate], str] | None:
    """Each question's pass rate and what measured it (the difficulty stage's policy), or None when the run
    measures no difficulty."""
    if not config.difficulty.enabled:
        return None
    manifest = read_manifest(dirs["difficulty"])
    if manifest is None:
        raise UserError(f"no finished difficulty output in {dirs['difficulty']} (run `hopsmith dataset`)")
    return read_pass_rates(dirs["difficulty"]), manifest.engines["policy"]


def question_row(question: Question, difficulty: tuple[dict[str, PassRate], str] | None) -> QuestionRow:
    """The `questions` config's row: the question with its measured pass rate (None when unmeasured)."""
    measured = difficulty[0].get(question.question_id) if difficulty is not None else None
    if measured is None:
        return QuestionRow(**dict(question))
    return QuestionRow(**dict(question), pass_rate=measured.rate, pass_rate_policy=difficulty[1],
                       pass_rate_rollouts=measured.rollouts)


def is_rl_prompt(row: QuestionRow, band: Sequence[float] | None) -> bool:
    """Whether a `questions` row becomes an RL prompt: its pass rate lies in the band (`in_band`: unset,
    strictly between 0 and 1); a question without a rate has nothing to select it by and stays one."""
    return row.pass_rate is None or in_band(row.pass_rate, band)


def build_dataset(config: DatasetConfig, dirs: dict[str, Path]) -> Manifest:
    """Stage `dataset`: every config's shards, the card and its plots, then the manifest. With difficulty
    measured, the `questions` config carries each pass rate and the `rl` config keeps the questions whose
    rate lies in the pass band (the others counted as `rl_outside_pass_band`)."""
    upstream = ("questions", "index", "judge") + (("difficulty",) if config.difficulty.enabled else ())
    run = begin_stage(
        STAGE,
        dirs[STAGE],
        layout_config(config),
        upstream_dirs={s: dirs[s] for s in upstream},
        beside=True,  # a failed rebuild leaves the previous dataset in place, loadable
    )
    if run.done:
        return run.finished
    root = run.work_dir
    for leftover in ("data", "plots"):  # an interrupted build of the same key: rebuild it whole
        remove_tree(root / leftover)
    environment = read_manifest(dirs["index"]).key
    max_chars = config.max_shard_mb * 1_000_000
    writers = {
        (c, s): SplitWriter(root, c, s, config.max_rows_per_shard, max_chars) for c in CONFIGS for s in SPLITS
    }
    stats = DatasetStats()
    counts: Counter = Counter()
    difficulty = measured_difficulty(config, dirs)
    if difficulty is not None:
        stats.difficulty_policy, stats.pass_band = difficulty[1], band_text(config.rl_pass_band)
    conversations: set[str] = set()

    questions_folder = dirs["questions"] / "questions"
    questions = read_records(Question, questions_folder)
    for question in track(
        _unique(questions, lambda q: q.question_id, stats.skipped, "duplicate_question"),
        _count_rows(questions_folder),
        "questions",
    ):
        split = split_of(question.question_id, config.test_fraction)
        row = question_row(question, difficulty)
        writers["questions", split].add(row)
        stats.add_question(question)
        if difficulty is not None and row.pass_rate is None:
            stats.skipped["question_without_pass_rate"] += 1  # kept as a prompt: no rate to select it by
        elif row.pass_rate is not None:
            stats.add_pass_rate(question.hops, row.pass_rate, row.pass_rate_rollouts)
        if not is_rl_prompt(row, config.rl_pass_band):
            stats.skipped["rl_outside_pass_band"] += 1
            continue
        writers["rl", split].add(renders.render_rl(row, environment))

    judged_folder = dirs["judge"] / "judged"
    judged_records = read_records(JudgedTrajectory, judged_folder)
    unique = _unique(
        judged_records, lambda j: j.trajectory.trajectory_id, stats.skipped, "duplicate_trajectory"
    )
    for judged in track(unique, _count_rows(judged_folder), "trajectories"):
        split = split_of(judged.trajectory.question_id, config.test_fraction)
        chars = trajectory_chars(judged)
        writers["trajectories", split].add(judged, chars)
        stats.add_trajectory(judged)
        reason = sft_skip_reason(judged, config.sft_only_correct)
        toolmind = renders.render_toolmind(judged) if reason is None else None
        if toolmind is not None and not _first_conversation(toolmind, conversations):
            reason = "duplicate_conversation"
        if reason is not None:
            stats.skipped[reason] += 1
            continue
        stats.add_sft(judged, toolmind)
        writers["toolmind", split].add(toolmind, chars)
        writers["nanbeige", split].add(renders.render_nanbeige(judged), chars)
        writers["openai", split].add(renders.render_openai(judged), chars)
        for row in renders.render_turns(judged):
            writers["turns", split].add(row, sum(len(m.content) for m in row.conversations))

    outputs: dict[str, list[str]] = {}
    split_rows: dict[str, dict[str, int]] = {c: {} for c in CONFIGS}
    split_bytes: dict[str, dict[str, int]] = {c: {} for c in CONFIGS}
    for (config_name, split), writer in writers.items():
        outputs.setdefault(config_name, []).extend(writer.close())
        split_rows[config_name][split] = writer.count
        split_bytes[config_name][split] = writer.num_bytes
        counts[f"rows:{config_name}:{split}"] = writer.count
    counts["questions_in"] = stats.questions + stats.skipped["duplicate_question"]
    counts["trajectories_in"] = stats.trajectories + stats.skipped["duplicate_trajectory"]
    counts["trajectories_rendered"] = writers["toolmind", "train"].count + writers["toolmind", "test"].count
    counts.update({f"skipped:{reason}": n for reason, n in stats.skipped.items()})
    counts.update(stats.supervision_counts())

    manifests = {s: read_manifest(dirs[s]) for s in STAGE_FOLDERS if s != STAGE}
    manifests = {s: m for s, m in manifests.items() if m is not None}
    plots = write_plots(stats, root)
    published = [path for files in outputs.values() for path in files] + list(plots.values())
    outputs["checksums"] = [write_checksums(root, published)]
    card = render_card(config.name, stats, split_rows, split_bytes, manifests, config.seed, plots, environment,
                       measure(report_folders(dirs)))
    atomic_write_text(root / "README.md", card)
    outputs["card"] = ["README.md"]
    outputs["plots"] = sorted(plots.values())
    engines = {
        f"{stage}:{role}": engine for stage, m in manifests.items() for role, engine in m.engines.items()
    }
    return run.finish(dict(counts), outputs, engines=engines, seed=config.seed)


# ---------------------------------------------------------------- CLI


def load_config(path: str | None, overrides: dict[str, Any]) -> DatasetConfig:
    """A DatasetConfig from a TOML file (or the defaults) with command-line overrides applied."""
    data: dict[str, Any] = {}
    if path is not None:
        if not as_path(path).is_file():
            raise UserError(f"config file not found: {path}")
        try:
            data = tomllib.loads(as_path(path).read_text())
        except tomllib.TOMLDecodeError as error:
            raise UserError(f"config file {path} is not valid TOML: {error}") from error
    for dotted, value in overrides.items():
        if value is None:
            continue
        target = data
        *parents, leaf = dotted.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    try:
        return DatasetConfig.model_validate(data)
    except ValidationError as error:  # every field's range is in the schema: refused before any stage runs
        raise UserError(config_error_line(error, "dataset config")) from error
