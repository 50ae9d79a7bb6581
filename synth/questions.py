"""Stage 2b: turn sampled paths into verified multi-hop questions (template engine or LLM writer).

Each path is gated on its own (`question_gates.path_gate`), planned (`synth.question_plan`), gated on its
plan before any text is written, written by a writer (`synth.question_writers`), gated on its text, and
for an LLM-written text on faithfulness; the optional closed-book shortcut check follows. A transient LLM
failure (timeouts, an outage) leaves the whole unit unfinished for a rerun (the stage ends with
`StageIncomplete`); a writer whose replies stay unusable is a counted rejection, a shortcut checker whose
replies stay unusable leaves that question to the offline gates (a counted fallback). Work runs in
resumable units (`ground.io.WorkUnits`) as a Beam transform whose workers each load the graph once; the final
assembly removes duplicates and writes `questions/` and `skipped/` shards.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path as FsPath

import apache_beam as beam
import pyarrow.compute as pc

from graph.csr import load_csr
from ground.errors import UserError
from ground.io import (
    WorkUnits,
    read_batches,
    read_manifest,
    read_records,
    read_table,
    stable_hash,
    write_records,
)
from ground.stage import begin_stage
from ground.storage import as_path
from llm.client import (
    LLMClient,
    LLMError,
    LLMUnavailable,
    RoleReport,
    run_async,
    save_report,
    stage_report,
)
from runtime.beam import pipeline_options
from schemas.config import BeamOptions, QuestionConfig, WalkConfig
from schemas.manifest import Manifest
from schemas.questions import Path, Question
from schemas.wiki import Entity, SkippedRecord
from synth import text_gates
from synth.census import load_census
from synth.environment import SearchEnvironment
from synth.matching import normalize_answer
from synth.question_gates import (
    GATES,
    answer_aliases,
    faithfulness_gate,
    path_gate,
    plan_gate,
    search_gate,
    start_gate,
    text_gate,
    written_answer,
)
from synth.question_plan import (
    WORLD_FITS_TAG,
    EntityInfo,
    Plan,
    QuestionContext,
    anchorless_from,
    plan_question,
    question_as_of,
    world_fits,
)
from synth.question_writers import TEMPLATE_ENGINE, Draft, write_llm, write_template

STAGE = "questions"
TABLES = ("questions", "skipped")


# --- one work unit -------------------------------------------------------------------------------------


def _question(ctx: QuestionContext, path: Path, draft: Draft, aliases: list[str]) -> Question:
    """The kept question; its answer as a person writes it, the raw value among the aliases. Its id names
    the text too: another seed's wording of the same path is another question (runs merged keep both)."""
    return Question(
        question_id=stable_hash(path.path_id, draft.engine, draft.text),
        text=draft.text,
        answer=written_answer(ctx, path),
        aliases=aliases,
        as_of=question_as_of(path, ctx.as_of),
        hops=len(path.hops),
        obfuscations=draft.obfuscations,
        path=path,
        engine=draft.engine,
        model=draft.model,
        seed=ctx.config.seed,
    )


def _skip(path: Path, reason: str, detail: str) -> SkippedRecord:
    return SkippedRecord(title=path.path_id, stage=STAGE, reason=reason, detail=detail[:500])


async def process_unit(ctx: QuestionContext, paths: list[Path], cache_dir: FsPath | None,
                       report: RoleReport | None = None,
                       environment: SearchEnvironment | None = None) -> tuple[list[Question], list[SkippedRecord]]:
    """Plan, gate, write and check every path of a unit; each path ends as a Question or a SkippedRecord.

    Raises `LLMUnavailable` (after the other paths finished, so their replies are cached) on a transient
    failure; `report` receives the clients' counts either way. `environment` is the agents' search index:
    with it, the one-search gate runs on every text, whichever engine wrote it.
    """
    config = ctx.config
    writer = None if config.writer.offline else LLMClient(config.writer, cache_dir and cache_dir / "writer", "question-writer")
    checker = None
    if config.shortcut is not None and not config.shortcut.offline:
        checker = LLMClient(config.shortcut, cache_dir and cache_dir / "shortcut", "shortcut-check")

    async def one(path: Path) -> Question | SkippedRecord:
        if (failed := path_gate(ctx, path)) is not None:  # cheap: before planning
            return _skip(path, *failed)
        forms = accepted_forms(ctx, path)
        plan, failed = first_passing_plan(ctx, path, "clues" if writer is not None else None, environment,
                                          template_text_gate(ctx, path, environment, forms) if writer is None else None)
        if plan is None:
            return _skip(path, *failed)
        aliases = forms()[1:]
        if writer is None:
            draft = write_template(ctx, path, plan)  # its text passed the text gates in `first_passing_plan`
        else:
            try:
                draft = await write_llm(writer, ctx, path, plan)
            except LLMUnavailable:
                raise
            except LLMError as error:
                return _skip(path, "writer_failed", str(error))
            failed = (text_gate(ctx, path, plan, draft.text, forms(), environment)
                      or faithfulness_gate(path, plan, draft.text))
            if failed is not None:
                return _skip(path, failed[0], f"{failed[1]} | {draft.text}")
        if plan.start_described and (fits := world_fits(ctx, [c for c in plan.clues if c.position == 0])):
            draft.obfuscations.append(f"{WORLD_FITS_TAG}{fits[0]:.1f}")  # kept texts only
        if checker is not None:
            try:
                guess = await text_gates.shortcut(checker, draft.text, path.answer, aliases, config.shortcut_attempts)
            except LLMUnavailable:
                raise
            except LLMError:  # no usable closed-book reply: the offline gates (one search) alone decide
                checker.stats.fallbacks += 1
                guess = None
                draft.obfuscations.append("shortcut:offline")
            if guess is not None:
                return _skip(path, "shortcut", f"answered without tools: {guess} | {draft.text}")
        return _question(ctx, path, draft, aliases)

    try:
        if writer is None and checker is None:  # nothing waits on a server: no task per path
            results = [await one(p) for p in paths]
        else:
            results = await asyncio.gather(*[one(p) for p in paths], return_exceptions=True)
    finally:
        for client in (writer, checker):
            if client is not None:
                await client.aclose()
                if report is not None:
                    report.add_client(client)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    questions = [r for r in results if isinstance(r, Question)]
    skipped = [r for r in results if isinstance(r, SkippedRecord)]
    return questions, skipped


def accepted_forms(ctx: QuestionContext, path: Path) -> Callable[[], list[str]]:
    """The answer's accepted forms (the written answer, then `answer_aliases`), read on the first call only:
    once per path, by the text gates of every plan and the kept question alike, and only for a path that gets
    that far."""
    return functools.cache(lambda: [written_answer(ctx, path), *answer_aliases(ctx, path)])


def template_text_gate(ctx: QuestionContext, path: Path, environment: SearchEnvironment | None,
                       forms: Callable[[], list[str]] | None = None) -> Callable[[Plan], tuple[str, str] | None]:
    """The text gates on the template writer's text of a plan (offline, a text costs nothing to write), with
    the path's `accepted_forms` (given, or read here)."""
    forms = forms or accepted_forms(ctx, path)

    def check(plan: Plan) -> tuple[str, str] | None:
        text = write_template(ctx, path, plan).text
        failed = text_gate(ctx, path, plan, text, forms(), environment)
        return failed and (failed[0], f"{failed[1]} | {text}")
    return check


def first_passing_plan(ctx: QuestionContext, path: Path, style: str | None, environment: SearchEnvironment | None,
                       text_check: Callable[[Plan], tuple[str, str] | None] | None = None,
                       ) -> tuple[Plan | None, tuple[str, str] | None]:
    """The first of `plan_attempts` plans (`plan_question`'s attempts: the lead's noun phrase, then class
    nouns, then attributes drawn afresh) that passes the plan and description gates and `text_check` (the
    template writer's text through the text gates: free to write, unlike an LLM's); else None and the first
    plan's reason, with the count of plans tried. A hop whose objects no stated fact tells apart
    (`NOT_REDRAWN`) ends the attempts: a fresh draw states fewer of the same facts. A described start with
    no narrow named anchor to state (`anchorless_from`: at any attempt, or at the fresh ones) fails at every
    such attempt, counted as tried. Attempts often describe the start alike (six in ten on the sample): the
    start's gates are read once per description (`start_said`)."""
    first = None
    hopeless_from = None  # the first attempt whose start cannot be anchored
    start_failures: dict[tuple, tuple[str, str] | None] = {}  # `start_gate` by `start_said`
    for attempt in range(ctx.config.plan_attempts):
        start = None
        if attempt:
            if hopeless_from is not None and attempt >= hopeless_from:
                continue
            start = plan_question(ctx, path, style, attempt, start_only=True)
            said = start_said(start)  # looked up once: it holds every attribute and clue of the start
            if (start_failed := start_failures.get(said, _UNSEEN)) is _UNSEEN:
                start_failed = start_failures[said] = start_gate(ctx, path, start, environment)
            if start_failed:
                continue  # the start alone fails: the whole plan would (the first plan's reason is the one kept)
        plan = plan_question(ctx, path, style=style, attempt=attempt, start=start)
        failed = plan_gate(ctx, path, plan) or search_gate(ctx, path, plan, environment)
        if failed is None and text_check is not None:
            failed = text_check(plan)
        if failed is None:
            return plan, None
        first = first or failed
        if failed[0] in NOT_REDRAWN:
            break
        if not attempt and plan.start_described:
            hopeless_from = anchorless_from(ctx, path)
    return None, (first[0], f"{first[1]} ({attempt + 1} plans tried)")


_UNSEEN = object()


def start_said(start: Plan) -> tuple:
    """All a start-only plan says (all but its draws, which only the whole plan of its attempt goes on from):
    two attempts that describe the start alike pass or fail `start_gate` alike."""
    return (start.style, start.shape, start.start_described, start.unanchored, start.unresolved,
            tuple(start.nouns.items()), tuple((p, tuple(a)) for p, a in start.attributes.items()),
            tuple(start.clues), tuple(start.tree_positions))


# Gates no other plan of the same path passes: the open world lets objects without facts fit any attribute
# (on the sample, none of 239 paths rejected so at their first plan passed at any of 15 more attempts).
NOT_REDRAWN = ("multi_valued_hop", "alternative_answer")


# --- assembly ------------------------------------------------------------------------------------------


def deduplicate(questions: Iterable[Question]) -> tuple[list[Question], list[SkippedRecord]]:
    """Drop questions whose normalised text, or whose start/relations/answer, was already kept."""
    kept, skipped, seen = [], [], set()
    for question in sorted(questions, key=lambda q: q.path.path_id):
        keys = {("text", normalize_answer(question.text)),
                ("chain", question.path.start, tuple(h.relation for h in question.path.hops), question.answer)}
        if keys & seen:
            skipped.append(_skip(question.path, "duplicate", question.text))
            continue
        seen |= keys
        kept.append(question)
    return kept, skipped


def cap_answers(questions: list[Question], share: float, reason: str = "answer_cap",
                scope: str = "") -> tuple[list[Question], list[SkippedRecord]]:
    """Keep at most `cap` questions per answer (the first by path id, itself drawn from the seed), with the
    largest cap that is still within `share` of the questions kept (at least one per answer)."""
    counts = Counter(normalize_answer(q.answer) for q in questions)
    cap = 1
    while any(n > cap for n in counts.values()) and cap + 1 <= share * sum(min(n, cap + 1) for n in counts.values()):
        cap += 1
    kept, skipped, used = [], [], Counter()
    for question in sorted(questions, key=lambda q: q.path.path_id):
        key = normalize_answer(question.answer)
        if used[key] >= cap:
            skipped.append(_skip(question.path, reason, f"{cap} questions{scope} already answer {question.answer!r}"))
            continue
        used[key] += 1
        kept.append(question)
    return kept, skipped


def cap_relation_answers(questions: list[Question], share: float,
                         minimum: int) -> tuple[list[Question], list[SkippedRecord]]:
    """The answer prior within the run: among the questions that end in one relation, when there are
    `minimum` or more, no answer takes more than `share` of them; fewer keep one question per answer (the
    cap the share gives at `minimum`: 10% of 10), since a repeated answer among a few is as good a guess.
    A guess of the commonest answer per final relation, leaving the question out, then rarely wins."""
    groups: dict[str, list[Question]] = {}
    for question in questions:
        groups.setdefault(question.path.hops[-1].relation, []).append(question)
    kept, skipped = [], []
    for relation, group in sorted(groups.items()):
        group_share = share if len(group) >= minimum else 1 / len(group)
        group_kept, group_skipped = cap_answers(group, group_share, "relation_answer_cap", f" ending in {relation}")
        kept += group_kept
        skipped += group_skipped
    return sorted(kept, key=lambda q: q.path.path_id), skipped


def _units(path_ids: list[str], config: QuestionConfig) -> list[tuple[str, list[str]]]:
    """Consecutive path ids (sorted) in units named by a hash of their ids and the writer."""
    engine = config.writer.model if not config.writer.offline else TEMPLATE_ENGINE
    size = config.paths_per_unit
    chunks = [path_ids[i : i + size] for i in range(0, len(path_ids), size)]
    return [(stable_hash(engine, chunk), chunk) for chunk in chunks]


class _WriteUnit(beam.DoFn):
    """Beam step: process one unit unless its parts already exist; leaves its LLM report in the stage folder."""

    def __init__(self, source: tuple[FsPath, FsPath, QuestionConfig], out_dir: str, cache_dir: str | None,
                 index_dir: str | None):
        self.source, self.out_dir, self.cache_dir, self.index_dir = source, out_dir, cache_dir, index_dir
        self._ctx: QuestionContext | None = None
        self._environment: SearchEnvironment | None = None

    def setup(self) -> None:
        # Loaded by each worker, once: a side input of every path and the graph cost more to pickle, size up
        # for Beam's cache and unpickle than to read; the bm25s index memory-maps its files.
        self._ctx = _pipeline_context(self.source)
        if self.index_dir is not None:
            self._environment = SearchEnvironment.load(self.index_dir)

    def process(self, unit: tuple[str, list[str]]) -> Iterator[str]:
        unit_id, path_ids = unit
        work = WorkUnits(self.out_dir, TABLES)
        if work.is_done(unit_id):
            return
        ctx = self._ctx
        paths = [ctx.paths[path_id] for path_id in path_ids]
        cache = as_path(self.cache_dir) if self.cache_dir else None
        report = RoleReport()
        try:
            questions, skipped = run_async(lambda: process_unit(ctx, paths, cache, report, self._environment))
        except LLMUnavailable as failure:
            report.note_unfinished(failure)
        else:
            work.write(unit_id, {"questions": (Question, questions), "skipped": (SkippedRecord, skipped)})
        save_report(self.out_dir, report)
        yield unit_id


def _walk_config(paths_dir: FsPath) -> WalkConfig:
    walk = read_manifest(paths_dir)
    if walk is None:
        raise UserError(f"{paths_dir} holds no finished walk output: run `hopsmith walk` first")
    return WalkConfig.model_validate(walk.config)


def _resolve_as_of(paths_dir: FsPath, config: QuestionConfig) -> dt.date:
    """The questions' as-of date: the config's, else the walk stage's (itself from the graph snapshot)."""
    return config.as_of or _walk_config(paths_dir).as_of or dt.datetime.now(dt.UTC).date()


def _load_context(graph_dir: FsPath, paths_dir: FsPath, config: QuestionConfig) -> QuestionContext:
    walk_config = _walk_config(paths_dir)
    as_of = _resolve_as_of(paths_dir, config)
    graph = load_csr(graph_dir, as_of=walk_config.as_of or as_of, window_days=walk_config.window_days or 182,
                     exclude_relations=walk_config.exclude_relations, mapped_only=walk_config.mapped_only)
    table = read_table(Entity, graph_dir / "entities").select(["title", "type", "description", "aliases"])
    entities = {row["title"]: EntityInfo(row["type"], row["description"], row["aliases"] or [])
                for row in table.to_pylist()}
    census = load_census(config.census) if config.census else None
    return QuestionContext(graph=graph, entities=entities, as_of=as_of, config=config, tree_share=walk_config.tree_share,
                           census=census, containers=place_containers(graph_dir))


def place_containers(graph_dir: FsPath) -> dict[str, tuple[str, ...]]:
    """Place -> the places a fact writes it within ("[[Westminster]], [[London]], England": the `within`
    qualifiers of its relation rows), so that "born in London" fits a person born in Westminster."""
    def qualified_rows() -> Iterator[tuple[str | None, list[dict]]]:
        for batch in read_batches(graph_dir / "relations", ["tail", "qualifiers"]):
            rows = batch.filter(pc.greater(pc.fill_null(pc.list_value_length(batch.column(1)), 0), 0))
            yield from zip(rows.column(0).to_pylist(), rows.column(1).to_pylist(), strict=True)
    return containers_from(qualified_rows())


def containers_from(rows: Iterable[tuple[str | None, list[dict]]]) -> dict[str, tuple[str, ...]]:
    """Place -> its containers, from (tail, qualifiers) of relation rows (`place_containers`)."""
    found: dict[str, set[str]] = {}
    for tail, qualifiers in rows:
        for qualifier in qualifiers:
            if tail and qualifier["key"] == "within":
                found.setdefault(tail, set()).add(qualifier["value"])
    return {place: tuple(sorted(names)) for place, names in found.items()}


def _write_outputs(out_dir: FsPath, questions: list[Question], skipped: list[SkippedRecord], shards: int) -> dict[str, list[str]]:
    by_shard: dict[int, list[Question]] = {i: [] for i in range(shards)}
    for question in questions:
        by_shard[int(question.question_id, 16) % shards].append(question)
    outputs: dict[str, list[str]] = {"questions": [], "skipped": []}
    for index, rows in by_shard.items():
        name = f"questions/questions-{index:05d}-of-{shards:05d}.parquet"
        write_records(Question, sorted(rows, key=lambda q: q.question_id), out_dir / name)
        outputs["questions"].append(name)
    name = "skipped/skipped-00000-of-00001.parquet"
    write_records(SkippedRecord, sorted(skipped, key=lambda s: (s.title, s.reason)), out_dir / name)
    outputs["skipped"].append(name)
    return outputs


def run_questions(
    graph_dir: str | FsPath,
    paths_dir: str | FsPath,
    out_dir: str | FsPath,
    config: QuestionConfig,
    cache_dir: str | FsPath | None,
    beam: BeamOptions | None = None,
    beam_args: Iterable[str] = (),
    index_dir: str | FsPath | None = None,
) -> Manifest:
    """Stage `questions`: write and gate one question per path; resumable per unit of paths.

    With `index_dir` (the `index` stage's output) the one-search gate runs against the agents' index."""
    graph_dir, paths_dir, out_dir = as_path(graph_dir), as_path(paths_dir), as_path(out_dir)
    resolved = config.model_copy(update={"as_of": _resolve_as_of(paths_dir, config)})
    upstream = {"extract": graph_dir, "walk": paths_dir}
    if index_dir is not None:
        if read_manifest(index_dir) is None:
            raise UserError(f"{index_dir} holds no finished search index: run `hopsmith index` first")
        upstream["index"] = as_path(index_dir)
    run = begin_stage(STAGE, out_dir, resolved, upstream_dirs=upstream, beside=True)
    if run.done:
        return run.finished
    out_dir = run.work_dir  # beside the previous questions until `finish` moves them into place
    path_ids = sorted(read_table(Path, paths_dir / "paths").column("path_id").to_pylist())
    units = _units(path_ids, config)
    work = WorkUnits(out_dir, TABLES)
    pending = [unit for unit in units if not work.is_done(unit[0])]
    if pending:
        _run_pipeline((graph_dir, paths_dir, resolved), pending, out_dir, cache_dir, index_dir, beam, list(beam_args))
    report = stage_report(STAGE, out_dir, sum(not work.is_done(uid) for uid, _ in units), len(units))
    written = [uid for uid, _ in units]
    questions = [q for uid in written for q in read_records(Question, work.part_path("questions", uid))]
    skipped = [s for uid in written for s in read_records(SkippedRecord, work.part_path("skipped", uid))]
    kept, duplicates = deduplicate(questions)
    # The relation cap first: the run-wide cap then holds of the questions finally kept.
    kept, relation_capped = cap_relation_answers(kept, config.relation_answer_share, config.relation_answer_min)
    kept, capped = cap_answers(kept, config.max_answer_share)
    skipped += duplicates + capped + relation_capped
    if config.max_questions is not None and len(kept) > config.max_questions:
        skipped += [_skip(q.path, "max_questions", q.text) for q in kept[config.max_questions :]]
        kept = kept[: config.max_questions]
    outputs = _write_outputs(out_dir, kept, skipped, config.shards)
    counts: Counter = Counter({f"rejected:{gate}": 0 for gate in GATES})
    counts["paths:read"] = len(path_ids)
    counts["questions:kept"] = len(kept)
    counts.update(f"rejected:{s.reason}" for s in skipped)
    counts.update(f"questions:hops_{q.hops}" for q in kept)
    counts.update(f"questions:{o.removeprefix('shape:')}" for q in kept for o in q.obfuscations if o.startswith("shape:"))
    counts.update(report.flat_counts())
    engines = {"writer": TEMPLATE_ENGINE if config.writer.offline else f"openai:{config.writer.model}"}
    if config.shortcut is not None and not config.shortcut.offline:
        engines["shortcut"] = f"openai:{config.shortcut.model}"
    return run.finish(dict(counts), outputs, engines=engines, seed=config.seed,
                      as_of=dt.datetime.combine(resolved.as_of, dt.time(), dt.UTC))


_CONTEXTS: dict[tuple[str, ...], QuestionContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def _pipeline_context(source: tuple[FsPath, FsPath, QuestionConfig]) -> QuestionContext:
    """The context with every path, built once per worker process (never pickled into the pipeline's
    definition) and shared by its threads, as a side input was: one graph in memory per process."""
    graph_dir, paths_dir, config = source
    finished = [(str(folder), read_manifest(folder)) for folder in (graph_dir, paths_dir)]
    key = (config.model_dump_json(), *(f"{folder} {m.key if m else None} {m.finished_at if m else None}"
                                       for folder, m in finished))
    with _CONTEXTS_LOCK:
        if key not in _CONTEXTS:
            _CONTEXTS.clear()  # a later stage run's context replaces the last one
            ctx = _load_context(graph_dir, paths_dir, config)
            ctx.paths = {p.path_id: p for p in read_records(Path, paths_dir / "paths")}
            _CONTEXTS[key] = ctx
        return _CONTEXTS[key]


def _run_pipeline(source, units, out_dir, cache_dir, index_dir, options, args) -> None:
    cache = str(cache_dir) if cache_dir else None
    index = str(index_dir) if index_dir is not None else None
    with beam.Pipeline(options=pipeline_options(options, args)) as pipeline:
        (
            pipeline
            | "Units" >> beam.Create(units)
            | "Reshuffle" >> beam.Reshuffle()
            | "Write" >> beam.ParDo(_WriteUnit(source, str(out_dir), cache, index))
        )
