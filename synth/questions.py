"""Stage 2b: turn sampled paths into verified multi-hop questions (template engine or LLM writer).

For each path a *plan* fixes what the question may say about every intermediate entity (a type noun and
a fuzzed date attribute, never its name) and whether an as-of date must be stated. The plan's
constraints drive the structural gates (`fewer_hops`, `alternative_answer`) before any text is written;
then a writer renders the text: the offline template engine (default; relation-aware frames, two
styles, varied surface forms) or an LLM through `llm.client.LLMClient`. Text gates (answer, alias,
evidence and intermediate leaks, and for LLM text the faithfulness gate) and the optional closed-book
shortcut check follow. A transient LLM failure (timeouts, an outage) leaves the whole unit unfinished for a
rerun (the stage ends with `StageIncomplete`); a writer whose replies stay unusable is a counted rejection, a
shortcut checker whose replies stay unusable leaves that question to the offline gates (a counted fallback). Work runs in
resumable units (`ground.io.WorkUnits`) as a Beam transform with the graph as a side input; the final
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

from graph.csr import CSRGraph, load_csr, split_literal_key
from ground.errors import UserError
from ground.io import (
    WorkUnits,
    read_manifest,
    read_records,
    read_table,
    stable_hash,
    write_records,
)
from ground.stage import begin_stage
from ground.storage import as_path
from knowledge.lexicon import PAST_TENSE, TIDY
from knowledge.ontology import load_ontology
from llm.client import (
    LLMClient,
    LLMError,
    LLMUnavailable,
    RoleReport,
    run_async,
    save_report,
    stage_report,
)
from llm.roles import add_role_arguments, role_from_args
from runtime.beam import pipeline_options
from schemas.config import BeamOptions, LLMRole, QuestionConfig, WalkConfig
from schemas.manifest import Manifest
from schemas.questions import Path, Question
from schemas.wiki import Entity, SkippedRecord
from synth import describe, gates
from synth.describe import Attribute
from synth.environment import SearchEnvironment
from synth.matching import normalize_answer
from synth.phrasing import (
    PERSON_NOUNS,
    date_variants,
    description_noun,
    display_title,
    has_ended,
    is_mutable,
    is_work,
    month_year,
    number_variants,
    parse_date,
    phrase,
    sentence,
    type_noun,
)

STAGE = "questions"
TEMPLATE_ENGINE = "template"
TABLES = ("questions", "skipped")


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
    tree_share: float = 0.0  # the walk's `tree_share`: paths drawn to be trees prefer intersecting branches
    attribute_cache: dict = field(default_factory=dict)  # `describe.attributes` per node, read once
    facts: gates.FactIndex = field(init=False)

    def __post_init__(self) -> None:
        self.facts = gates.FactIndex(self.graph)


@dataclass
class Plan:
    """What a question may say about each entity it does not name, the constraints that implies, the tense
    of every hop and the as-of date. Positions index `path.nodes` (0 = the start entity)."""

    style: str  # "clues" (a sentence per hop) or "nested" (one noun phrase; named start only)
    shape: str  # "tree" when some entity is pinned down only by intersecting branches (`tree_positions`)
    start_described: bool
    nouns: dict[int, str]
    attributes: dict[int, list[Attribute]]
    branches: list[Attribute]
    clues: list[gates.Clue]
    ended: set[int]  # hops whose fact has ended (a marriage with an end date): phrased in the past
    obfuscations: list[str]
    as_of_text: str | None
    unresolved: int | None = None  # the first position no attributes single out (the plan gate rejects it)
    tree_positions: list[int] = field(default_factory=list)  # entities pinned down only by intersecting branches
    branching: bool = False  # the final hop reaches several objects: branches on the answer must decide


@dataclass
class Draft:
    text: str
    engine: str
    model: str | None = None
    obfuscations: list[str] = field(default_factory=list)


# --- planning ------------------------------------------------------------------------------------------


def _rng(config: QuestionConfig, path: Path, purpose: str) -> random.Random:
    return random.Random(stable_hash(config.seed, path.path_id, purpose))


def _noun_for(ctx: QuestionContext, title: str) -> tuple[str | None, str | None]:
    """The noun an entity is described by and its checkable type: the lead sentence's noun phrase when its
    head is a known noun that agrees with the entity's class ("Ukrainian ska band" for a Band), else the
    class noun ("television series", never "American adult" from "an American adult animated series")."""
    info = ctx.entities.get(title)
    coarse = type_noun(info.type) if info else "entity"
    checkable = None if coarse == "entity" else coarse
    lead = load_ontology().lead_noun(description_noun(info.description), info.type) if info else None
    return lead or checkable, checkable


def _ended(hop, as_of: dt.date) -> bool:
    return has_ended({q.key: q.value for q in hop.qualifiers}, as_of)


def _changeable(hop, as_of: dt.date) -> bool:
    """A fact that can still change after the snapshot: not an ended one, but a running term that is to end."""
    qualifiers = {q.key: q.value for q in hop.qualifiers}
    return not _ended(hop, as_of) and (is_mutable(hop.relation, hop.value_type, qualifiers) or "end" in qualifiers)


def _adjacent_relations(path: Path, position: int) -> set[str]:
    """The relations of the hops into and out of a position: an attribute over one of them would state
    another object of the hop (or the hop itself, read backwards)."""
    return {path.hops[i].relation for i in (position - 1, position) if 0 <= i < len(path.hops)}


def _describe(ctx: QuestionContext, path: Path, ids: list[int], position: int, rng: random.Random,
              reached: set[int] | None) -> tuple[str | None, list[gates.Clue], list[Attribute], bool]:
    """The noun, type clue and attributes that describe the node at `position` among its competitors (the
    objects its hop `reached`, or (None) for the start every entity that fits the description), and
    whether they single it out."""
    config = ctx.config
    noun, checkable = _noun_for(ctx, path.nodes[position])
    base = [gates.Clue(position=position, type_noun=checkable)] if checkable else []
    options = describe.attributes(ctx, ids[position], position, rng, checkable in PERSON_NOUNS,
                                  _adjacent_relations(path, position), set(path.nodes))
    options = [option for option in options if not describe.restates(noun or "", option)]
    if reached is None:
        minimum = max(config.start_attributes - len(base), 1)

        def fits(clues):
            return gates.described_candidates(ctx.facts, clues)

        def pick(candidates):
            chosen = _choose_intersection(ctx, candidates, ids[position], base) if _tree_drawn(ctx, path) else None
            return chosen or describe.choose(list(candidates), fits, ids[position], base, minimum,
                                             config.max_attributes)
    else:
        def fits(clues):
            return {o for o in reached if all(gates.satisfies(ctx.facts, o, c) for c in clues)}

        def pick(candidates):
            minimum = min(config.attributes_per_entity, len(candidates))
            return _choose_needing_hop(ctx, candidates, fits, ids[position], base, minimum, reached)
    chosen = _avoiding_identifying(ctx, options, pick)
    # Nothing singles it out: keep a plain description and let the plan gate count why.
    minimum = max(config.start_attributes - len(base), 1) if reached is None else config.attributes_per_entity
    return noun, base, chosen if chosen is not None else options[:minimum], chosen is not None


def _avoiding_identifying(ctx: QuestionContext, options: list[Attribute], pick) -> list[Attribute] | None:
    """`pick(options)` over the facts that do not identify the entity in the world (`gates.identifies`: "a
    country whose capital is London"); over all of them only when those cannot single it out, so that the
    `identifying_clue` gate counts why the question is rejected."""
    open_options = [o for o in options if not gates.identifies(ctx.facts, o.clue)]
    chosen = pick(open_options)
    if chosen is None and len(open_options) < len(options):
        chosen = pick(options)
    return chosen


MAX_FIRST_BRANCHES = 6  # first branches tried when describing a start drawn to be a tree


def _tree_drawn(ctx: QuestionContext, path: Path) -> bool:
    """Whether the path is drawn to be a tree (a seeded draw at the walk's `tree_share`): its start is then
    described by attributes that only together single it out, where it has such attributes."""
    return _rng(ctx.config, path, "tree").random() < ctx.tree_share


def _choose_intersection(ctx: QuestionContext, options: list[Attribute], target: int,
                         base: list[gates.Clue]) -> list[Attribute] | None:
    """Two or more attributes of which none, with the type, singles `target` out over the whole graph, chosen
    until together they do and each is needed: the start is where the branches intersect. None if none do."""
    loose = [o for o in options if gates.described_candidates(ctx.facts, [*base, o.clue]) != {target}]

    def fits(clues):
        return gates.described_candidates(ctx.facts, clues)
    for first in loose[:MAX_FIRST_BRANCHES]:  # greedy from each first branch: the narrowest may lead nowhere
        rest = [o for o in loose if o is not first and (o.relation != first.relation or (o.several and first.several))]
        more = describe.choose(rest, fits, target, [*base, first.clue], 1, ctx.config.max_attributes - 1)
        if more is not None and not gates.start_intersection(ctx.facts, [*base, first.clue, *(a.clue for a in more)],
                                                             target):
            return [first, *more]
    return None


def plan_question(ctx: QuestionContext, path: Path, style: str | None = None) -> Plan:
    """Describe the start entity (unless it is named), every intermediate, and for a tree question the
    answer's branches, each chosen until the graph proves the description unique; then the tense of every
    hop and the as-of statement. The clues recorded for the gates are exactly what the text states."""
    config, graph = ctx.config, ctx.graph
    rng = _rng(config, path, "plan")
    hops = len(path.hops)
    ids = gates.path_node_ids(graph, path)
    start_described = ids is not None and rng.random() < config.describe_start
    if style is None:
        named_nested = not start_described and (hops == 1 or rng.random() < {2: 0.5, 3: 0.25}.get(hops, 0.0))
        style = "nested" if named_nested else "clues"
    nouns: dict[int, str] = {}
    attributes: dict[int, list[Attribute]] = {}
    clues: list[gates.Clue] = []
    obfuscations: list[str] = []
    tree_positions: list[int] = []
    described_positions = ([0] if start_described else []) + (
        list(range(1, hops)) if style == "clues" else list(range(max(hops - 1, 1), hops)))
    for position in described_positions if ids is not None else []:
        reached = None
        if position:
            relation = graph.relation_id(path.hops[position - 1].relation)
            reached = {int(o) for o in graph.objects(ids[position - 1], relation)}
        noun, base, chosen, unique = _describe(ctx, path, ids, position, rng, reached)
        if style == "nested" and position and not chosen:
            continue  # a bare ", a person," appositive adds nothing: the relation alone describes it
        nouns[position] = noun or "entity"
        attributes[position] = chosen
        clues += base + [a.clue for a in chosen]
        said = base + [a.clue for a in chosen]
        if unique and (needs_intersection(ctx, reached, ids[position], said) if reached is not None
                       else gates.start_intersection(ctx.facts, said, ids[position]) is None):
            tree_positions.append(position)
        obfuscations += [f"entity:{path.nodes[position]}->{describe.described(nouns[position], chosen)}",
                         *(a.obfuscation for a in chosen if a.obfuscation)]
        if not unique:
            unresolved = position
            break  # the plan gate rejects the path here: choosing attributes for the rest would be wasted
    else:
        unresolved = None
    for position in described_positions if unresolved is not None else []:
        nouns.setdefault(position, _noun_for(ctx, path.nodes[position])[0] or "entity")  # text stays writable
    branches: list[Attribute] = []
    branching = False
    if ids is not None and unresolved is None:
        final = graph.objects(ids[-2], graph.relation_id(path.hops[-1].relation))
        branching = len(final) > 1
        if branching:
            # A branch never names another object of the final hop ("the birthplace that lies in New York
            # City" when New York City is a birthplace too): the objects are alternatives, not landmarks.
            siblings = {graph.label(o) for o in final}
            options = describe.attributes(ctx, ids[-1], hops, rng, _answer_noun(ctx, path) in PERSON_NOUNS,
                                          _adjacent_relations(path, hops), set(path.nodes) | siblings)
            reached = {int(o) for o in final}

            def fits(branch_clues):
                return {o for o in reached if all(gates.satisfies(ctx.facts, o, c) for c in branch_clues)}
            branches = _avoiding_identifying(
                ctx, options, lambda candidates: _choose_needing_hop(ctx, candidates, fits, ids[-1], [], 1, reached)) or []
            clues += [b.clue for b in branches]
            if branches and needs_intersection(ctx, reached, ids[-1], [b.clue for b in branches]):
                tree_positions.append(hops)
            obfuscations += [f"branch:{b.predicate}" for b in branches]
            obfuscations += [b.obfuscation for b in branches if b.obfuscation]
    ended = {index for index, hop in enumerate(path.hops) if _ended(hop, ctx.as_of)}
    as_of_text = month_year(ctx.as_of) if any(_changeable(h, ctx.as_of) for h in path.hops) else None
    if as_of_text:
        obfuscations.append(f"as_of:{as_of_text}")
    shape = "tree" if tree_positions else "chain"
    obfuscations += [f"style:{style}", f"shape:{shape}", *(f"tree_at:{p}" for p in tree_positions)]
    return Plan(style, shape, start_described, nouns, attributes, branches, clues, ended, obfuscations, as_of_text,
                unresolved, tree_positions, branching)


def _choose_needing_hop(ctx: QuestionContext, options: list[Attribute], fits, target: int, base: list[gates.Clue],
                        minimum: int, reached: set[int]) -> list[Attribute] | None:
    """Attributes that single `target` out among the objects its hop `reached`; where the hop reaches several,
    preferably ones that alone, over the whole graph, fit others too, so that only the hop and the
    description together find it (a tree) and the description is no shortcut past the hop."""
    maximum = ctx.config.max_attributes
    chosen = describe.choose(list(options), fits, target, base, minimum, maximum)
    if chosen is None or len(reached) < 2 or needs_intersection(ctx, reached, target, base + [a.clue for a in chosen]):
        return chosen
    loose = [o for o in options if gates.described_candidates(ctx.facts, [*base, o.clue]) != {target}]
    alternative = describe.choose(loose, fits, target, base, min(minimum, len(loose)), maximum)
    if alternative and needs_intersection(ctx, reached, target, base + [a.clue for a in alternative]):
        return alternative
    return chosen


def needs_intersection(ctx: QuestionContext, reached: set[int], target: int, clues: list[gates.Clue]) -> bool:
    """Whether `target` is pinned down only by intersecting branches: the hop into it reaches several
    objects, and what the text says about it (type, attributes), taken alone over the whole graph, fits
    others too. A description that alone singles it out is a shortcut, not a tree."""
    return len(reached) > 1 and gates.described_candidates(ctx.facts, clues) != {target}


def _described(plan: Plan, position: int) -> str:
    return describe.described(plan.nouns[position], plan.attributes.get(position, []))


# --- the template engine -------------------------------------------------------------------------------

def _past(template: str) -> str:
    """Present -> past for a fact that has ended ("is married to" -> "was married to"; data/ontology/phrasing.toml)."""
    for present, past in PAST_TENSE:
        template = template.replace(present, past)
    return template


def _answer_noun(ctx: QuestionContext, path: Path) -> str | None:
    info = ctx.entities.get(path.answer) if path.answer_type == "entity" else None
    noun = type_noun(info.type) if info else "entity"
    return None if noun == "entity" else noun


def _ask(ctx: QuestionContext, path: Path, plan: Plan, subject: str, rng: random.Random) -> str:
    """The final question sentence about `subject`, relation-aware, with a varied surface form; a tree
    question asks for the object of the final relation that the branches single out."""
    relation = path.hops[-1].relation
    entry = phrase(relation, _is_work(ctx, path.hops[-1].head))
    noun = entry.noun
    ended = len(path.hops) - 1 in plan.ended
    if plan.branches:
        who = "who" if _answer_noun(ctx, path) in PERSON_NOUNS else "that"
        predicates = " and ".join(a.predicate for a in sorted(plan.branches, key=lambda a: describe.ORDER[a.kind]))
        return rng.choice([f"Name the {noun} of {{s}} {who} {predicates}.",
                           f"Which {noun} of {{s}} {predicates}?"]).format(s=subject)
    if path.answer_type in ("number", "quantity") and entry.count_ask and not ended:
        return entry.count_ask.format(s=subject)
    if entry.ask:  # the lexicon's own frames read best; "Name the ..." adds variety
        frames = [*entry.ask, "Name the {n} of {s}."] if path.answer_type == "entity" else list(entry.ask)
        if ended:
            frames = [_past(f) for f in frames if _past(f) != f] or ["Who was the {n} of {s}?"]
        return rng.choice(_fit_precision(frames, path) or frames).format(n=noun, s=subject)
    verb = "was" if ended else "is"
    frames = []
    if path.answer_type == "entity":
        answer_noun = _answer_noun(ctx, path)
        if answer_noun in PERSON_NOUNS:
            frames.append(f"Who {verb} the {{n}} of {{s}}?")
        elif answer_noun:
            frames.append(f"Which {answer_noun} {verb} the {{n}} of {{s}}?")
        frames += [f"What {verb} the {{n}} of {{s}}?", "Name the {n} of {s}."]
    elif path.answer_type == "date":
        frames += [f"What {verb} the {{n}} of {{s}}?", "What date is given as the {n} of {s}?"]
    elif path.answer_type in ("number", "quantity"):
        frames += [f"What {verb} the {{n}} of {{s}}?", "What figure is recorded as the {n} of {s}?"]
    else:
        frames += [f"What {verb} the {{n}} of {{s}}?"]
    return rng.choice(frames).format(n=noun, s=subject)


def _fit_precision(frames: list[str], path: Path) -> list[str]:
    """Ask for a year only when the answer is a bare year, and for a date only when it is more than one; a
    date relation whose answer is text ("29 July 1954 – 20 October 1955") is asked "when", not "on what date"."""
    parsed = parse_date(path.hops[-1].value or "") if path.answer_type == "date" else None
    if parsed is None:
        if path.answer_type == "string":
            return [f for f in frames if "what date" not in f and "what year" not in f] or frames
        return frames
    year_only = parsed[1] is None
    return [f for f in frames if ("what year" in f) == year_only or ("what date" not in f and "what year" not in f)]


def _is_work(ctx: QuestionContext, title: str) -> bool:
    info = ctx.entities.get(title)
    return info is not None and is_work(info.type)


def _clue_sentence(relation: str, subject: str, obj: str, ended: bool, work: bool = False,
                  several: bool = False) -> str:
    """A clue sentence for a hop; a hop with `several` objects (a tree's) states one of them, not "the" one."""
    entry = phrase(relation, work)
    template = entry.clue or ("One {n} of {s} is {o}." if several else "The {n} of {s} is {o}.")
    return sentence((_past(template) if ended else template).format(n=entry.noun, s=subject, o=obj))


def _tidy(text: str) -> str:
    for bad, good in TIDY:
        text = text.replace(bad, good)
    return text.strip()


def write_template(ctx: QuestionContext, path: Path, plan: Plan) -> Draft:
    """The offline engine: a nested noun phrase or a chain of clue sentences, as the plan's style says."""
    rng = _rng(ctx.config, path, "template")
    hops = len(path.hops)
    start = _described(plan, 0) if plan.start_described else display_title(path.start)
    if plan.style == "nested":
        subject = start
        for position in range(1, hops):
            hop = position - 1
            former = "former " if hop in plan.ended else ""
            subject = f"the {former}{phrase(path.hops[hop].relation).noun} of {subject}"
        if hops - 1 in plan.nouns:
            subject += f", {_described(plan, hops - 1)},"
        text = _ask(ctx, path, plan, subject, rng)
    else:
        # The start's noun counts as used: "a person ... is a relative of a person. When was the latter person born?"
        sentences, subject, used = [], start, Counter([plan.nouns[0]] if plan.start_described and 0 in plan.nouns else [])
        for position in range(1, hops):
            noun = plan.nouns[position]
            hop = path.hops[position - 1]
            sentences.append(_clue_sentence(hop.relation, subject, _described(plan, position),
                                            position - 1 in plan.ended, _is_work(ctx, hop.head),
                                            position in plan.tree_positions))
            used[noun] += 1
            subject = f"this {noun}" if used[noun] == 1 else f"the latter {noun}"
        sentences.append(sentence(_ask(ctx, path, plan, subject, rng)))
        text = " ".join(sentences)
    text = _tidy(sentence(text))
    if plan.as_of_text:
        lowered = text if text.startswith(start) and not plan.start_described else text[:1].lower() + text[1:]
        text = f"As of {plan.as_of_text}, {lowered}"
    return Draft(text=text, engine=TEMPLATE_ENGINE, obfuscations=list(plan.obfuscations))


# --- the LLM engine ------------------------------------------------------------------------------------


class WrittenQuestion(BaseModel):
    question: str
    obfuscations: list[str] = []


WRITER_PROMPT = """You write one multi-hop search question from a chain of facts.
Rules:
- Refer to the start entity and to every intermediate entity ONLY by the description given for it
  ("refer_to_it_as"); a start entity is named only when its "name" is given.
- Never mention the answer or any of its forms, and never name an entity you were given a description for.
- Ask for exactly the final object of the chain; the question must need every hop. When "answer_constraints"
  are given, the final relation has several objects: ask for the one that satisfies every constraint.
- Write a hop marked "ended": true in the past tense ("was married to"), never as a present fact.
- If "as_of" is given, begin with "As of <as_of>," because the facts can change.
- Write one fluent, grammatical English question (clue sentences before it are allowed).
Reply with JSON {"question": str, "obfuscations": [str]} listing how you disguised entities and dates."""


def writer_messages(ctx: QuestionContext, path: Path, plan: Plan) -> list[dict[str, str]]:
    """The writer's prompt: the plan (descriptions, branches, tenses) and the temporal context as JSON data.

    A described start entity's name is not sent, so the writer cannot leak it."""
    hops = []
    for index, hop in enumerate(path.hops):
        position = index + 1
        item = {"subject": "start" if index == 0 else f"entity {index}", "relation": hop.relation,
                "relation_meaning": phrase(hop.relation).noun, "ended": index in plan.ended}
        if position < len(path.nodes) - 1:
            info = ctx.entities.get(path.nodes[position])
            item["object"] = f"entity {position}"
            item["object_description"] = (info.description if info else "")[:300]
            item["refer_to_it_as"] = _described(plan, position)
        else:
            item["object"] = "ANSWER (do not reveal)"
        hops.append(item)
    start = {"refer_to_it_as": _described(plan, 0)} if plan.start_described else {
        "name": path.start, "description": (ctx.entities[path.start].description if path.start in ctx.entities else "")[:300]}
    payload = {
        "start": start,
        "chain": hops,
        "answer_constraints": [b.predicate for b in plan.branches],
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


def path_gate(ctx: QuestionContext, path: Path) -> tuple[str, str] | None:
    """Gates on the path alone, checked before any planning: a vague answer, a shortcut through the graph,
    an answer that a prior over the final relation would guess."""
    if (detail := gates.vague_answer(path)) is not None:
        return "vague_answer", detail
    if (detail := gates.fewer_hops(ctx.graph, path)) is not None:
        return "fewer_hops", detail
    if (detail := gates.reversed_place(ctx.graph, path, describe.attribute_table()["places"])) is not None:
        return "reversed_place", detail
    if ctx.config.reject_dominant_answer and (detail := gates.dominant_answer(ctx.facts, path)) is not None:
        return "dominant_answer", detail
    return None


def structural_gate(ctx: QuestionContext, path: Path, plan: Plan) -> tuple[str, str] | None:
    """Gates that need no text: checked before a writer spends an LLM call."""
    return path_gate(ctx, path) or plan_gate(ctx, path, plan)


def plan_gate(ctx: QuestionContext, path: Path, plan: Plan) -> tuple[str, str] | None:
    """Open-world uniqueness of what the plan states: the described start, every hop, a tree's branches."""
    if plan.unresolved is not None:
        gate = "start_not_unique" if plan.unresolved == 0 else "multi_valued_hop"
        failed = gates.unique_chain(ctx.facts, path, plan.clues, plan.start_described)
        return failed or (gate, f"no attributes single out position {plan.unresolved} ({path.nodes[plan.unresolved]})")
    if (failed := gates.unique_chain(ctx.facts, path, plan.clues, plan.start_described)) is not None:
        return failed
    if plan.branching and (detail := gates.tree_branches(ctx.facts, path, [b.clue for b in plan.branches])):
        return "tree_branch", detail
    if (detail := gates.identifying_clue(ctx.facts, plan.clues)) is not None:
        return "identifying_clue", detail
    if (detail := gates.clue_shortcut(ctx.facts, path, plan.clues)) is not None:
        return "clue_shortcut", detail
    if 0 in plan.tree_positions and (detail := gates.start_intersection(
            ctx.facts, [c for c in plan.clues if c.position == 0], gates.path_node_ids(ctx.graph, path)[0])):
        return "tree_branch", detail
    return None


def text_gate(ctx: QuestionContext, path: Path, plan: Plan, text: str, aliases: list[str],
              environment: SearchEnvironment | None = None) -> tuple[str, str] | None:
    """Gates on the written text (either engine's): leaks, the as-of date a changeable fact needs, and the
    retrieval shortcut (one search in the agents' environment)."""
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
    if plan.start_described and (name := gates.intermediate_leak(text, [path.start])) is not None:
        return "start_leak", name
    if plan.as_of_text and f"as of {plan.as_of_text}".lower() not in text.lower():
        return "missing_as_of", f"a fact can change but the text does not say 'As of {plan.as_of_text}'"
    top_k = ctx.config.one_search_top_k
    if environment is not None and top_k and (
            found := gates.one_search(environment, text, path.answer, aliases, top_k)) is not None:
        return "one_search", found
    return None


def faithfulness_gate(path: Path, plan: Plan, text: str) -> tuple[str, str] | None:
    """An LLM's text must say what its prompt gave it: the start (its name, or its description when it is
    described), each intermediate's description, the chain."""
    start = _described(plan, 0) if plan.start_described else path.start.split(" (")[0]
    mentions = [("the start entity", start)]
    mentions += [(f"entity {p}", _described(plan, p)) for p in range(1, len(path.nodes) - 1) if p in plan.nouns]
    mentions += [("an answer constraint", branch.predicate) for branch in plan.branches]
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
        plan = plan_question(ctx, path, style=None if writer is None else "clues")
        if (failed := plan_gate(ctx, path, plan)) is not None:
            return _skip(path, *failed)
        try:
            draft = write_template(ctx, path, plan) if writer is None else await write_llm(writer, ctx, path, plan)
        except LLMUnavailable:
            raise
        except LLMError as error:
            return _skip(path, "writer_failed", str(error))
        aliases = answer_aliases(ctx, path)
        failed = text_gate(ctx, path, plan, draft.text, aliases, environment)
        if failed is None and writer is not None:
            failed = faithfulness_gate(path, plan, draft.text)
        if failed is not None:
            return _skip(path, failed[0], f"{failed[1]} | {draft.text}")
        if checker is not None:
            try:
                guess = await gates.shortcut(checker, draft.text, path.answer, aliases, config.shortcut_attempts)
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


def cap_answers(questions: list[Question], share: float) -> tuple[list[Question], list[SkippedRecord]]:
    """Keep at most `cap` questions per answer (the first by path id), with the largest cap that is still
    within `share` of the questions kept (at least one per answer)."""
    counts = Counter(normalize_answer(q.answer) for q in questions)
    cap = 1
    while any(n > cap for n in counts.values()) and cap + 1 <= share * sum(min(n, cap + 1) for n in counts.values()):
        cap += 1
    kept, skipped, used = [], [], Counter()
    for question in sorted(questions, key=lambda q: q.path.path_id):
        key = normalize_answer(question.answer)
        if used[key] >= cap:
            skipped.append(_skip(question.path, "answer_cap", f"{cap} questions already answer {question.answer!r}"))
            continue
        used[key] += 1
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

    def __init__(self, out_dir: str, cache_dir: str | None, index_dir: str | None):
        self.out_dir, self.cache_dir, self.index_dir = out_dir, cache_dir, index_dir
        self._environment: SearchEnvironment | None = None

    def setup(self) -> None:
        if self.index_dir is not None:  # loaded by each worker: the bm25s index memory-maps its files
            self._environment = SearchEnvironment.load(self.index_dir)

    def process(self, unit: tuple[str, list[str]], ctx: QuestionContext) -> Iterator[str]:
        unit_id, path_ids = unit
        work = WorkUnits(self.out_dir, TABLES)
        if work.is_done(unit_id):
            return
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
    return QuestionContext(graph=graph, entities=entities, as_of=as_of, config=config, tree_share=walk_config.tree_share)


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
    run = begin_stage(STAGE, out_dir, resolved, upstream_dirs=upstream)
    if run.done:
        return run.finished
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
    kept, capped = cap_answers(kept, config.max_answer_share)
    skipped += duplicates + capped
    if config.max_questions is not None and len(kept) > config.max_questions:
        skipped += [_skip(q.path, "max_questions", q.text) for q in kept[config.max_questions :]]
        kept = kept[: config.max_questions]
    outputs = _write_outputs(out_dir, kept, skipped, config.shards)
    counts: Counter = Counter({f"rejected:{gate}": 0 for gate in gates.GATES})
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


def _pipeline_context(source: tuple[FsPath, FsPath, QuestionConfig]) -> QuestionContext:
    """The context with every path, built once inside the pipeline (never pickled into its definition)."""
    graph_dir, paths_dir, config = source
    ctx = _load_context(graph_dir, paths_dir, config)
    ctx.paths = {p.path_id: p for p in read_records(Path, paths_dir / "paths")}
    return ctx


def _run_pipeline(source, units, out_dir, cache_dir, index_dir, options, args) -> None:
    cache = str(cache_dir) if cache_dir else None
    index = str(index_dir) if index_dir is not None else None
    with beam.Pipeline(options=pipeline_options(options, args)) as pipeline:
        context = pipeline | "Source" >> beam.Create([source]) | "Context" >> beam.Map(_pipeline_context)
        (
            pipeline
            | "Units" >> beam.Create(units)
            | "Reshuffle" >> beam.Reshuffle()
            | "Write" >> beam.ParDo(_WriteUnit(str(out_dir), cache, index), ctx=beam.pvalue.AsSingleton(context))
        )


def register(subparsers) -> None:
    """`hopsmith questions`: paths -> verified multi-hop questions."""
    defaults = QuestionConfig()
    parser = subparsers.add_parser(
        "questions",
        help="stage 2b: relational paths -> verified multi-hop questions",
        description="Write one question per path (offline templates, or an LLM with --writer-base-url), gate "
        "it (a described start entity and every hop unique over the graph, tree branches, answer leaks, "
        "dominant answers, fewer hops, duplicates, one answer's share of the run, the question as one search "
        "with --index, and a closed-book shortcut check with --shortcut-base-url) and write OUT/questions/ "
        "and OUT/skipped/ (parquet). Resumable per unit of paths. Unknown --options are Apache Beam options.",
    )
    parser.add_argument("--graph", default="out/graph", help="stage 1 output folder (default: %(default)s)")
    parser.add_argument("--paths", default="out/paths", help="walk output folder (default: %(default)s)")
    parser.add_argument("--out", default="out/questions", help="output folder (default: %(default)s)")
    parser.add_argument("--cache", default="out/cache/llm", help="LLM response cache folder (default: %(default)s)")
    parser.add_argument("--index", default=None, help="the agents' search index (`hopsmith index`): questions whose "
                        "text as one search shows the answer are rejected (default: gate off)")
    parser.add_argument("--one-search-top-k", type=int, default=defaults.one_search_top_k)
    parser.add_argument("--describe-start", type=float, default=defaults.describe_start,
                        help="share of questions whose start entity is described, not named (default: %(default)s)")
    parser.add_argument("--max-answer-share", type=float, default=defaults.max_answer_share,
                        help="most questions of the run with one answer, as a share (default: %(default)s)")
    parser.add_argument("--keep-dominant-answers", action="store_true",
                        help="keep answers that are the most common object of their final relation")
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
        leak_ngram=args.leak_ngram, seed=args.seed, shards=args.shards, one_search_top_k=args.one_search_top_k,
        describe_start=args.describe_start, max_answer_share=args.max_answer_share,
        reject_dominant_answer=not args.keep_dominant_answers,
    )
    manifest = run_questions(args.graph, args.paths, args.out, config, args.cache, beam_args=beam_args,
                             index_dir=args.index)
    counts = manifest.counts
    hops = ", ".join(f"{k.split('_')[1]} hops: {v}" for k, v in counts.items() if k.startswith("questions:hops_"))
    print(f"questions: {counts['questions:kept']} kept of {counts['paths:read']} paths ({hops}) -> {args.out}")
    for key, value in counts.items():
        if key.startswith("rejected:"):
            print(f"  {key:<28} {value}")
    return 0
