"""Stage 2b: turn sampled paths into verified multi-hop questions (template engine or LLM writer).

For each path a *plan* fixes what the question may say about every intermediate entity (a type noun and
a fuzzed date attribute, never its name) and whether an as-of date must be stated. The plan's
constraints drive the structural gates (`fewer_hops`, `alternative_answer`) before any text is written;
then a writer renders the text: the offline template engine (default; relation-aware frames, two
styles, varied surface forms) or an LLM through `pipeline.llm.LLMClient`. Text gates (answer, alias,
evidence and intermediate leaks, and for LLM text the faithfulness gate) and the optional closed-book
shortcut check follow. A transient LLM failure (timeouts, an outage) leaves the whole unit unfinished for a
rerun (the stage ends with `StageIncomplete`); a writer whose replies stay unusable is a counted rejection. Work runs in
resumable units (`pipeline.io.WorkUnits`) as a Beam transform with the graph as a side input; the final
assembly removes duplicates and writes `questions/` and `skipped/` shards.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path as FsPath

import apache_beam as beam
from pydantic import BaseModel

from graph.csr import LITERAL, CSRGraph, load_csr, split_literal_key
from pipeline.beam import pipeline_options
from pipeline.errors import UserError
from pipeline.io import (
    WorkUnits,
    read_manifest,
    read_records,
    read_table,
    stable_hash,
    write_records,
)
from pipeline.llm import (
    LLMClient,
    LLMError,
    LLMUnavailable,
    RoleReport,
    run_async,
    save_report,
    stage_report,
)
from pipeline.roles import add_role_arguments, role_from_args
from pipeline.stage import begin_stage
from schemas.config import BeamOptions, LLMRole, QuestionConfig, WalkConfig
from schemas.manifest import Manifest
from schemas.questions import Path, Question
from schemas.wiki import Entity, SkippedRecord
from synth import gates
from synth.matching import normalize_answer
from synth.phrasing import (
    PERSON_NOUNS,
    date_variants,
    description_noun,
    display_title,
    fuzz_year,
    is_mutable,
    month_year,
    number_variants,
    parse_date,
    phrase,
    proper_name,
    sentence,
    type_noun,
    with_article,
)

STAGE = "questions"
TEMPLATE_ENGINE = "template"
TABLES = ("questions", "skipped")
# Date facts that make a good vague attribute, with how they read after a noun.
ATTRIBUTE_PHRASES = {  # keyed by ontology property (graph/ontology.py)
    "birthDate": "born in {p}",
    "deathDate": "{who} died in {p}",
    "foundingDate": "founded in {p}",
    "foundingYear": "founded in {p}",
    "formationDate": "formed in {p}",
    "openingDate": "opened in {p}",
    "releaseDate": "released in {p}",
    "publicationDate": "published in {p}",
    "buildingEndDate": "built in {p}",
    "completionDate": "completed in {p}",
}


# Entity facts that place an intermediate without naming it ("a city in Ireland").
PLACE_ATTRIBUTE_PHRASES = {
    "country": "in {o}",
    "subdivision": "in {o}",
    "state": "in {o}",
    "location": "in {o}",
    "locationCity": "based in {o}",
    "locationCountry": "based in {o}",
    "headquarter": "based in {o}",
}


@dataclass
class EntityInfo:
    type: str
    description: str
    aliases: list[str]


@dataclass
class QuestionContext:
    """Everything a unit needs; in the Beam pipeline it is built by a step and shared as a side input."""

    graph: CSRGraph
    entities: dict[str, EntityInfo]
    as_of: dt.date
    config: QuestionConfig
    paths: dict[str, Path] = field(default_factory=dict)  # path_id -> Path, filled for the pipeline


@dataclass
class Plan:
    """What a question may say about each intermediate, the constraints that implies, and the as-of date."""

    style: str
    nouns: dict[int, str]
    attributes: dict[int, str]
    clues: list[gates.Clue]
    obfuscations: list[str]
    as_of_text: str | None


@dataclass
class Draft:
    text: str
    engine: str
    model: str | None = None
    obfuscations: list[str] = field(default_factory=list)


# --- planning ------------------------------------------------------------------------------------------


def _rng(config: QuestionConfig, path: Path, purpose: str) -> random.Random:
    return random.Random(stable_hash(config.seed, path.path_id, purpose))


def _noun_for(ctx: QuestionContext, title: str) -> tuple[str, str | None]:
    """The noun an intermediate is described by (from its description, else its type) and its checkable type."""
    info = ctx.entities.get(title)
    coarse = type_noun(info.type) if info else "entity"
    described = description_noun(info.description) if info else None
    return described or coarse, None if coarse == "entity" else coarse


@dataclass(frozen=True)
class Attribute:
    """A fact of an intermediate that the question may state in vague form."""

    relation: str
    text: str  # "born in the early 1950s", "in Ireland"
    clue_years: tuple[int, int] | None = None
    clue_object: str | None = None
    obfuscation: str | None = None


def _attributes(ctx: QuestionContext, path: Path, position: int, rng: random.Random, who: str) -> list[Attribute]:
    """Facts of the node usable as attributes: fuzzed dates, and places it lies in or is based in.

    Relations on the path are excluded (they would give a hop away), and so are objects on the path.
    """
    graph = ctx.graph
    node = graph.node_id(path.nodes[position])
    if node is None:
        return []
    on_path = {h.relation for h in path.hops}
    found = []
    for edge in range(graph.indptr[node], graph.indptr[node + 1]):
        relation = graph.relation_names[graph.rel[edge]]
        obj = graph.dst[edge]
        if relation in on_path or graph.label(obj) in path.nodes:
            continue
        if relation in ATTRIBUTE_PHRASES and graph.kind[obj] == LITERAL:
            value_type, value, _ = split_literal_key(graph.keys[obj])
            parsed = parse_date(value) if value_type == "date" else None
            if parsed and parsed[0] > 0:
                period, years = fuzz_year(parsed[0], rng.randrange(3))
                found.append(Attribute(relation, ATTRIBUTE_PHRASES[relation].format(p=period, who=who),
                                       clue_years=years, obfuscation=f"date:{value}->{period}"))
        elif relation in PLACE_ATTRIBUTE_PHRASES and graph.kind[obj] != LITERAL:
            label = graph.label(obj)
            found.append(Attribute(relation, PLACE_ATTRIBUTE_PHRASES[relation].format(o=proper_name(label)),
                                   clue_object=label))
    return found


def plan_question(ctx: QuestionContext, path: Path, style: str | None = None) -> Plan:
    """Choose the style, the obfuscation of the intermediates it describes, and the as-of statement.

    "clues" describes every intermediate by a type noun and a fuzzed date; "nested" ("the birthplace of
    the spouse of X, a scientist born in the 1940s,") describes only the last one, the others are known
    only through their relation. The clues recorded for the alternative-answer gate match the text.
    """
    rng = _rng(ctx.config, path, "plan")
    hops = len(path.hops)
    if style is None:
        style = "nested" if hops == 1 or rng.random() < {2: 0.5, 3: 0.25}.get(hops, 0.0) else "clues"
    described = range(1, hops) if style == "clues" else range(max(hops - 1, 1), hops)
    nouns, attributes, clues, obfuscations = {}, {}, [], []
    for position in described:
        title = path.nodes[position]
        noun, checkable = _noun_for(ctx, title)
        options = _attributes(ctx, path, position, rng, "who" if checkable in PERSON_NOUNS else "that")
        chosen = rng.sample(options, min(ctx.config.attributes_per_entity, len(options)))
        if style == "nested" and not chosen:
            continue  # a bare ", a person," appositive adds nothing: the relation alone describes it
        nouns[position] = noun
        if chosen:
            attributes[position] = " and ".join(a.text for a in chosen)
        clues += [gates.Clue(position=position, type_noun=checkable)] + [
            gates.Clue(position=position, attribute=a.relation, years=a.clue_years, object=a.clue_object)
            for a in chosen
        ]
        obfuscations += [f"entity:{title}->{_described(noun, attributes.get(position))}",
                         *(a.obfuscation for a in chosen if a.obfuscation)]
    mutable = any(is_mutable(h.relation, h.value_type, {q.key: q.value for q in h.qualifiers}) for h in path.hops)
    as_of_text = month_year(ctx.as_of) if mutable else None
    if as_of_text:
        obfuscations.append(f"as_of:{as_of_text}")
    obfuscations.append(f"style:{style}")
    return Plan(style, nouns, attributes, clues, obfuscations, as_of_text)


def _described(noun: str, attribute: str | None) -> str:
    return f"{with_article(noun)} {attribute}" if attribute else with_article(noun)


# --- the template engine -------------------------------------------------------------------------------


def _answer_noun(ctx: QuestionContext, path: Path) -> str | None:
    info = ctx.entities.get(path.answer) if path.answer_type == "entity" else None
    noun = type_noun(info.type) if info else "entity"
    return None if noun == "entity" else noun


def _ask(ctx: QuestionContext, path: Path, subject: str, rng: random.Random) -> str:
    """The final question sentence about `subject`, relation-aware, with a varied surface form."""
    relation = path.hops[-1].relation
    entry = phrase(relation)
    noun = entry.noun
    if path.answer_type in ("number", "quantity") and entry.count_ask:
        return entry.count_ask.format(s=subject)
    if entry.ask:  # the lexicon's own frames read best; "Name the ..." adds variety
        frames = [*entry.ask, "Name the {n} of {s}."] if path.answer_type == "entity" else list(entry.ask)
        return rng.choice(_fit_precision(frames, path) or frames).format(n=noun, s=subject)
    frames = []
    if path.answer_type == "entity":
        answer_noun = _answer_noun(ctx, path)
        if answer_noun in PERSON_NOUNS:
            frames.append("Who is the {n} of {s}?")
        elif answer_noun:
            frames.append(f"Which {answer_noun} is the {{n}} of {{s}}?")
        frames += ["What is the {n} of {s}?", "Name the {n} of {s}."]
    elif path.answer_type == "date":
        frames += ["What is the {n} of {s}?", "What date is given as the {n} of {s}?"]
    elif path.answer_type in ("number", "quantity"):
        frames += ["What is the {n} of {s}?", "What figure is recorded as the {n} of {s}?"]
    else:
        frames += ["What is the {n} of {s}?"]
    return rng.choice(frames).format(n=noun, s=subject)


def _fit_precision(frames: list[str], path: Path) -> list[str]:
    """Ask for a year only when the answer is a bare year, and for a date only when it is more than one."""
    parsed = parse_date(path.hops[-1].value or "") if path.answer_type == "date" else None
    if parsed is None:
        return frames
    year_only = parsed[1] is None
    return [f for f in frames if ("what year" in f) == year_only or ("what date" not in f and "what year" not in f)]


def _clue_sentence(relation: str, subject: str, obj: str) -> str:
    template = phrase(relation).clue or "The {n} of {s} is {o}."
    return sentence(template.format(n=phrase(relation).noun, s=subject, o=obj))


def _tidy(text: str) -> str:
    for bad, good in ((",?", "?"), (",.", "."), (" ,", ","), (" ?", "?"), ("  ", " ")):
        text = text.replace(bad, good)
    return text.strip()


def write_template(ctx: QuestionContext, path: Path, plan: Plan) -> Draft:
    """The offline engine: a nested noun phrase or a chain of clue sentences, as the plan's style says."""
    rng = _rng(ctx.config, path, "template")
    hops = len(path.hops)
    start = display_title(path.start)
    if plan.style == "nested":
        subject = start
        for position in range(1, hops):
            subject = f"the {phrase(path.hops[position - 1].relation).noun} of {subject}"
        if hops - 1 in plan.nouns:
            subject += f", {_described(plan.nouns[hops - 1], plan.attributes.get(hops - 1))},"
        text = _ask(ctx, path, subject, rng)
    else:
        sentences, subject, used = [], start, Counter()
        for position in range(1, hops):
            noun = plan.nouns[position]
            obj = _described(noun, plan.attributes.get(position))
            sentences.append(_clue_sentence(path.hops[position - 1].relation, subject, obj))
            used[noun] += 1
            subject = f"this {noun}" if used[noun] == 1 else f"the latter {noun}"
        sentences.append(sentence(_ask(ctx, path, subject, rng)))
        text = " ".join(sentences)
    text = _tidy(sentence(text))
    if plan.as_of_text:
        lowered = text if text.startswith(start) else text[:1].lower() + text[1:]
        text = f"As of {plan.as_of_text}, {lowered}"
    return Draft(text=text, engine=TEMPLATE_ENGINE, obfuscations=list(plan.obfuscations))


# --- the LLM engine ------------------------------------------------------------------------------------


class WrittenQuestion(BaseModel):
    question: str
    obfuscations: list[str] = []


WRITER_PROMPT = """You write one multi-hop search question from a chain of facts.
Rules:
- Name the start entity; refer to every intermediate entity ONLY by the description given for it.
- Never mention the answer or any of its forms, and never name an intermediate entity.
- Ask for exactly the final object of the chain; the question must need every hop.
- If "as_of" is given, begin with "As of <as_of>," because the facts can change.
- Write one fluent, grammatical English question (clue sentences before it are allowed).
Reply with JSON {"question": str, "obfuscations": [str]} listing how you disguised entities and dates."""


def writer_messages(ctx: QuestionContext, path: Path, plan: Plan) -> list[dict[str, str]]:
    """The writer's prompt: the path, entity descriptions and temporal context as JSON data."""
    hops = []
    for index, hop in enumerate(path.hops):
        position = index + 1
        item = {"subject": "start" if index == 0 else f"entity {index}", "relation": hop.relation,
                "relation_meaning": phrase(hop.relation).noun}
        if position < len(path.nodes) - 1:
            info = ctx.entities.get(path.nodes[position])
            item["object"] = f"entity {position}"
            item["object_description"] = (info.description if info else "")[:300]
            item["refer_to_it_as"] = _described(plan.nouns[position], plan.attributes.get(position))
        else:
            item["object"] = "ANSWER (do not reveal)"
        hops.append(item)
    start = ctx.entities.get(path.start)
    payload = {
        "start": path.start,
        "start_description": (start.description if start else "")[:300],
        "chain": hops,
        "answer_type": path.answer_type,
        "answer_to_hide": path.answer,
        "as_of": plan.as_of_text,
        "snapshot_date": ctx.as_of.isoformat(),
    }
    return [{"role": "system", "content": WRITER_PROMPT},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False, indent=1)}]


async def write_llm(client: LLMClient, ctx: QuestionContext, path: Path, plan: Plan) -> Draft:
    written = await client.complete_json(writer_messages(ctx, path, plan), WrittenQuestion, seed=ctx.config.seed)
    text = " ".join(written.question.split())
    obfuscations = [o for o in plan.obfuscations if not o.startswith("style:")]
    return Draft(text=text, engine=client.engine, model=client.served_model,
                 obfuscations=[*obfuscations, "style:llm", *(f"llm:{o}" for o in written.obfuscations)])


# --- aliases and gates ---------------------------------------------------------------------------------


def answer_aliases(ctx: QuestionContext, path: Path) -> list[str]:
    """Redirect titles and the bare title for entities; date and number surface forms for literals."""
    last = path.hops[-1]
    if path.answer_type == "entity":
        info = ctx.entities.get(path.answer)
        forms = [*(info.aliases if info else []), path.answer.split(" (")[0]]
    elif path.answer_type == "date":
        forms = date_variants(last.value or path.answer)
    elif path.answer_type in ("number", "quantity"):
        node = gates.answer_node(ctx.graph, path)
        unit = split_literal_key(ctx.graph.keys[node])[2] if node is not None else None
        forms = number_variants(last.value or path.answer, unit)
    else:
        forms = []
    return [f for f in dict.fromkeys(forms) if f and f != path.answer]


def structural_gate(ctx: QuestionContext, path: Path, plan: Plan) -> tuple[str, str] | None:
    """Gates that need no text: checked before a writer spends an LLM call."""
    if (detail := gates.vague_answer(path)) is not None:
        return "vague_answer", detail
    if (detail := gates.fewer_hops(ctx.graph, path)) is not None:
        return "fewer_hops", detail
    if (detail := gates.alternative_answer(ctx.graph, path, plan.clues)) is not None:
        return "alternative_answer", detail
    return None


def text_gate(ctx: QuestionContext, path: Path, plan: Plan, text: str, aliases: list[str]) -> tuple[str, str] | None:
    """Gates on the written text: leaks, and the as-of date a changeable fact needs."""
    if (form := gates.answer_leak(text, path.answer, aliases)) is not None:
        return "answer_leak", form
    # Evidence sentences of the hops, and the lead sentences of the intermediates (a writer that copies
    # a long stretch of either hands the searcher a direct hit).
    evidence = [ctx.graph.relations["evidence"][int(i)].as_py() for i in _edge_rows(ctx, path)]
    evidence += [ctx.entities[t].description for t in path.nodes[1:-1] if t in ctx.entities]
    if (gram := gates.evidence_leak(text, evidence, ctx.config.leak_ngram)) is not None:
        return "evidence_leak", gram
    if (name := gates.intermediate_leak(text, path.nodes[1:-1])) is not None:
        return "intermediate_leak", name
    if plan.as_of_text and f"as of {plan.as_of_text}".lower() not in text.lower():
        return "missing_as_of", f"a fact can change but the text does not say 'As of {plan.as_of_text}'"
    return None


def faithfulness_gate(path: Path, plan: Plan, text: str) -> tuple[str, str] | None:
    """An LLM's text must say what its prompt gave it: the start, each intermediate's description, the chain."""
    mentions = [("the start entity", path.start.split(" (")[0])]
    mentions += [(f"entity {p}", _described(plan.nouns[p], plan.attributes.get(p)))
                 for p in range(1, len(path.nodes) - 1) if p in plan.nouns]
    if (detail := gates.unfaithful(text, mentions, [hop.relation for hop in path.hops])) is not None:
        return "unfaithful", detail
    return None


def _edge_rows(ctx: QuestionContext, path: Path) -> list[int]:
    graph, rows = ctx.graph, []
    for hop, tail in zip(path.hops, path.nodes[1:], strict=True):
        head, relation = graph.node_id(hop.head), graph.relation_id(hop.relation)
        if head is None or relation is None:
            continue
        for edge in range(graph.indptr[head], graph.indptr[head + 1]):
            if graph.rel[edge] == relation and graph.label(graph.dst[edge]) == tail:
                rows.append(int(graph.edge_row[edge]))
    return rows


# --- one work unit -------------------------------------------------------------------------------------


def _question(ctx: QuestionContext, path: Path, draft: Draft, aliases: list[str]) -> Question:
    return Question(
        question_id=stable_hash(path.path_id, draft.engine),
        text=draft.text,
        answer=path.answer,
        aliases=aliases,
        as_of=ctx.as_of,
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
                       report: RoleReport | None = None) -> tuple[list[Question], list[SkippedRecord]]:
    """Plan, gate, write and check every path of a unit; each path ends as a Question or a SkippedRecord.

    Raises `LLMUnavailable` (after the other paths finished, so their replies are cached) on a transient
    failure; `report` receives the clients' counts either way.
    """
    config = ctx.config
    writer = None if config.writer.offline else LLMClient(config.writer, cache_dir and cache_dir / "writer", "question-writer")
    checker = None
    if config.shortcut is not None and not config.shortcut.offline:
        checker = LLMClient(config.shortcut, cache_dir and cache_dir / "shortcut", "shortcut-check")

    async def one(path: Path) -> Question | SkippedRecord:
        plan = plan_question(ctx, path, style=None if writer is None else "clues")
        if (failed := structural_gate(ctx, path, plan)) is not None:
            return _skip(path, *failed)
        try:
            draft = write_template(ctx, path, plan) if writer is None else await write_llm(writer, ctx, path, plan)
        except LLMUnavailable:
            raise
        except LLMError as error:
            return _skip(path, "writer_failed", str(error))
        aliases = answer_aliases(ctx, path)
        failed = text_gate(ctx, path, plan, draft.text, aliases)
        if failed is None and writer is not None:
            failed = faithfulness_gate(path, plan, draft.text)
        if failed is not None:
            return _skip(path, failed[0], f"{failed[1]} | {draft.text}")
        if checker is not None:
            try:
                guess = await gates.shortcut(checker, draft.text, path.answer, aliases, config.shortcut_attempts)
            except LLMUnavailable:
                raise
            except LLMError as error:
                return _skip(path, "shortcut_check_failed", str(error))
            if guess is not None:
                return _skip(path, "shortcut", f"answered without tools: {guess} | {draft.text}")
        return _question(ctx, path, draft, aliases)

    try:
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


def _units(path_ids: list[str], config: QuestionConfig) -> list[tuple[str, list[str]]]:
    """Consecutive path ids (sorted) in units named by a hash of their ids and the writer."""
    engine = config.writer.model if not config.writer.offline else TEMPLATE_ENGINE
    size = config.paths_per_unit
    chunks = [path_ids[i : i + size] for i in range(0, len(path_ids), size)]
    return [(stable_hash(engine, chunk), chunk) for chunk in chunks]


class _WriteUnit(beam.DoFn):
    """Beam step: process one unit unless its parts already exist; leaves its LLM report in the stage folder."""

    def __init__(self, out_dir: str, cache_dir: str | None):
        self.out_dir, self.cache_dir = out_dir, cache_dir

    def process(self, unit: tuple[str, list[str]], ctx: QuestionContext) -> Iterator[str]:
        unit_id, path_ids = unit
        work = WorkUnits(self.out_dir, TABLES)
        if work.is_done(unit_id):
            return
        paths = [ctx.paths[path_id] for path_id in path_ids]
        cache = FsPath(self.cache_dir) if self.cache_dir else None
        report = RoleReport()
        try:
            questions, skipped = run_async(lambda: process_unit(ctx, paths, cache, report))
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
    return QuestionContext(graph=graph, entities=entities, as_of=as_of, config=config)


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
) -> Manifest:
    """Stage `questions`: write and gate one question per path; resumable per unit of paths."""
    graph_dir, paths_dir, out_dir = FsPath(graph_dir), FsPath(paths_dir), FsPath(out_dir)
    resolved = config.model_copy(update={"as_of": _resolve_as_of(paths_dir, config)})
    run = begin_stage(STAGE, out_dir, resolved, upstream_dirs={"extract": graph_dir, "walk": paths_dir})
    if run.done:
        return run.finished
    path_ids = sorted(read_table(Path, paths_dir / "paths").column("path_id").to_pylist())
    units = _units(path_ids, config)
    work = WorkUnits(out_dir, TABLES)
    pending = [unit for unit in units if not work.is_done(unit[0])]
    if pending:
        _run_pipeline((graph_dir, paths_dir, resolved), pending, out_dir, cache_dir, beam, list(beam_args))
    report = stage_report(STAGE, out_dir, sum(not work.is_done(uid) for uid, _ in units), len(units))
    written = [uid for uid, _ in units]
    questions = [q for uid in written for q in read_records(Question, work.part_path("questions", uid))]
    skipped = [s for uid in written for s in read_records(SkippedRecord, work.part_path("skipped", uid))]
    kept, duplicates = deduplicate(questions)
    skipped += duplicates
    if config.max_questions is not None and len(kept) > config.max_questions:
        skipped += [_skip(q.path, "max_questions", q.text) for q in kept[config.max_questions :]]
        kept = kept[: config.max_questions]
    outputs = _write_outputs(out_dir, kept, skipped, config.shards)
    counts: Counter = Counter({f"rejected:{gate}": 0 for gate in gates.GATES})
    counts["paths:read"] = len(path_ids)
    counts["questions:kept"] = len(kept)
    counts.update(f"rejected:{s.reason}" for s in skipped)
    counts.update(f"questions:hops_{q.hops}" for q in kept)
    counts.update(report.flat_counts())
    engines = {"writer": TEMPLATE_ENGINE if config.writer.offline else f"openai:{config.writer.model}"}
    if config.shortcut is not None and not config.shortcut.offline:
        engines["shortcut"] = f"openai:{config.shortcut.model}"
    return run.finish(dict(counts), outputs, engines=engines, seed=config.seed,
                      as_of=dt.datetime.combine(resolved.as_of, dt.time(), dt.UTC))


def _pipeline_context(source: tuple[FsPath, FsPath, QuestionConfig]) -> QuestionContext:
    """The context with every path, built once inside the pipeline (never pickled into its definition)."""
    graph_dir, paths_dir, config = source
    ctx = _load_context(graph_dir, paths_dir, config)
    ctx.paths = {p.path_id: p for p in read_records(Path, paths_dir / "paths")}
    return ctx


def _run_pipeline(source, units, out_dir, cache_dir, options, args) -> None:
    cache = str(cache_dir) if cache_dir else None
    with beam.Pipeline(options=pipeline_options(options, args)) as pipeline:
        context = pipeline | "Source" >> beam.Create([source]) | "Context" >> beam.Map(_pipeline_context)
        (
            pipeline
            | "Units" >> beam.Create(units)
            | "Reshuffle" >> beam.Reshuffle()
            | "Write" >> beam.ParDo(_WriteUnit(str(out_dir), cache), ctx=beam.pvalue.AsSingleton(context))
        )


def register(subparsers) -> None:
    """`hopsmith questions`: paths -> verified multi-hop questions."""
    defaults = QuestionConfig()
    parser = subparsers.add_parser(
        "questions",
        help="stage 2b: relational paths -> verified multi-hop questions",
        description="Write one question per path (offline templates, or an LLM with --writer-base-url), gate "
        "it (answer/alias/evidence leaks, alternative answers, fewer hops, duplicates, and a closed-book "
        "shortcut check with --shortcut-base-url) and write OUT/questions/ and OUT/skipped/ (parquet). "
        "Resumable per unit of paths. Unknown --options are Apache Beam pipeline options.",
    )
    parser.add_argument("--graph", default="out/graph", help="stage 1 output folder (default: %(default)s)")
    parser.add_argument("--paths", default="out/paths", help="walk output folder (default: %(default)s)")
    parser.add_argument("--out", default="out/questions", help="output folder (default: %(default)s)")
    parser.add_argument("--cache", default="out/cache/llm", help="LLM response cache folder (default: %(default)s)")
    add_role_arguments(parser, "writer", "the question writer")
    add_role_arguments(parser, "shortcut", "the closed-book shortcut checker")
    parser.add_argument("--shortcut-attempts", type=int, default=defaults.shortcut_attempts)
    parser.add_argument("--as-of", type=dt.date.fromisoformat, help="as-of date stated in questions (default: the walk's)")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument("--leak-ngram", type=int, default=defaults.leak_ngram)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--shards", type=int, default=defaults.shards)
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    for label, folder in (("graph", args.graph), ("paths", args.paths)):
        if read_manifest(folder) is None:
            raise UserError(f"--{label} {folder} holds no finished stage output (no manifest.json)")
    config = QuestionConfig(
        writer=role_from_args(args, "writer") or LLMRole(), shortcut=role_from_args(args, "shortcut"),
        shortcut_attempts=args.shortcut_attempts, as_of=args.as_of, max_questions=args.max_questions,
        leak_ngram=args.leak_ngram, seed=args.seed, shards=args.shards,
    )
    manifest = run_questions(args.graph, args.paths, args.out, config, args.cache, beam_args=beam_args)
    counts = manifest.counts
    hops = ", ".join(f"{k.split('_')[1]} hops: {v}" for k, v in counts.items() if k.startswith("questions:hops_"))
    print(f"questions: {counts['questions:kept']} kept of {counts['paths:read']} paths ({hops}) -> {args.out}")
    for key, value in counts.items():
        if key.startswith("rejected:"):
            print(f"  {key:<28} {value}")
    return 0
