"""The two question writers: each renders a plan (`synth.question_plan`) as text, a `Draft`.

The offline template engine (the default; relation-aware frames, two styles, varied surface forms) and
the LLM writer (`write_llm`, through `llm.client.LLMClient`), whose prompt sends the plan as JSON data.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field

from pydantic import BaseModel

from knowledge.lexicon import PAST_TENSE, TIDY
from knowledge.phrasebook import VAGUE_NOUNS, Entry
from llm.client import LLMClient
from schemas.questions import Path
from synth import describe
from synth.phrasing import (
    PERSON_NOUNS,
    display_title,
    is_work,
    parse_date,
    phrase,
    sentence,
)
from synth.question_plan import Plan, QuestionContext, answer_type_noun, described_as, seeded_rng

TEMPLATE_ENGINE = "template"


@dataclass
class Draft:
    text: str
    engine: str
    model: str | None = None
    obfuscations: list[str] = field(default_factory=list)


def _past(template: str) -> str:
    """Present -> past for a fact that has ended ("is married to" -> "was married to"; data/ontology/phrasing.toml)."""
    for present, past in PAST_TENSE:
        template = template.replace(present, past)
    return template


def _ask(ctx: QuestionContext, path: Path, plan: Plan, subject: str, rng: random.Random) -> str:
    """The final question sentence about `subject`, relation-aware, with a varied surface form; a tree
    question asks for the object of the final relation that the branches single out. The wh-word follows the
    answer's class ("Who is the child of X?"), from its page's type or else the phrasebook's answer class."""
    relation = path.hops[-1].relation
    entry = phrase(relation, _is_work(ctx, path.hops[-1].head))
    noun = entry.noun
    ended = len(path.hops) - 1 in plan.ended
    answer_noun = answer_type_noun(ctx, path)
    person = answer_noun in PERSON_NOUNS or (answer_noun is None and entry.answer == "person")
    if plan.branches:
        # not "Name the spouse of this person who was born in X": the clause reads as the subject's (the fifth reading)
        predicates = " and ".join(a.predicate for a in sorted(plan.branches, key=lambda a: describe.ORDER[a.kind]))
        return f"Which {noun} of {subject} {predicates}?"
    if path.answer_type in ("number", "quantity") and entry.count_ask and not ended:
        return entry.count_ask.format(s=subject)
    frames = final_frames(entry, path.answer_type, person, answer_noun, ended)
    chosen = _fit_precision(frames, path) if entry.ask else frames
    return rng.choice(chosen or frames).format(n=noun, s=subject)


def final_frames(entry: Entry, answer_type: str, person: bool, answer_noun: str | None, ended: bool) -> list[str]:
    """The final question's frames ({n} the noun, {s} the subject): the phrasebook's own, reviewed, where it
    has them ("Where was {s} born?"); else "<wh> is the {n} of {s}?", the wh-word by answer class, and a
    "Which <answer noun> ..." form for variety. No "Name the {n} of {s}.": readers found it stilted ("Name the
    award of this novel", "Name the mother of this royal": docs/QUESTION_REVIEW.md)."""
    wh = "Who" if person else entry.wh
    if entry.ask:
        frames = list(entry.ask)
        if ended:
            frames = [_past(f) for f in frames if _past(f) != f] or [f"{wh} was the {{n}} of {{s}}?"]
        return frames
    verb = "was" if ended else "is"
    frames = [f"{wh} {verb} the {{n}} of {{s}}?"]
    if answer_type == "entity":
        if answer_noun and not person:
            frames.append(f"Which {answer_noun} {verb} the {{n}} of {{s}}?")
    elif answer_type == "date":
        frames.append("What date is given as the {n} of {s}?")
    elif answer_type in ("number", "quantity"):
        frames.append("What figure is recorded as the {n} of {s}?")
    return frames


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
    """A clue sentence for a hop, subject first and object last (so "the latter" then means the object); a hop
    with `several` objects (a tree's) states one of them, not "the" one."""
    entry = phrase(relation, work)
    if several and entry.forward.startswith(f"The {entry.noun} of "):
        return sentence(f"{entry.of(subject, several=True)} {'was' if ended else 'is'} {obj}.")
    return sentence(entry.clause(subject, obj, past=ended))


def _noun(ctx: QuestionContext, path: Path, plan: Plan, position: int) -> str:
    """The noun a described entity goes by in the text: the plan's, or where the plan has only "entity" (no
    page type), the answer class of the hop into it ("a person", "a place") or else that hop's noun."""
    noun = plan.nouns[position]
    if noun != "entity" or not position:
        return noun
    entry = phrase(path.hops[position - 1].relation, _is_work(ctx, path.hops[position - 1].head))
    return entry.answer if entry.answer in ("person", "place") else entry.noun


def _reads_through_relation(plan: Plan, noun: str, position: int, entry: Entry) -> bool:
    """An intermediate with nothing said of it that reads better through its relation ("the location of X",
    "the home ground of this football club") than as a clue sentence: one the text could only call "a place"
    or "an entity", or one the hop names by a noun ("The home ground of X is a venue." says nothing the hop
    does not; "X studied at a university." does). A tree's branch point keeps its sentence: it has several."""
    if plan.attributes.get(position) or position in plan.tree_positions:
        return False
    return noun in VAGUE_NOUNS or entry.forward.startswith(f"The {entry.noun} of ")


def _tidy(text: str) -> str:
    for bad, good in TIDY:
        text = text.replace(bad, good)
    return text.strip()


def write_template(ctx: QuestionContext, path: Path, plan: Plan) -> Draft:
    """The offline engine: a nested noun phrase or a chain of clue sentences, as the plan's style says."""
    rng = seeded_rng(ctx.config, path, "template")
    hops = len(path.hops)
    start = described_as(plan, 0) if plan.start_described else display_title(path.start)
    if plan.style == "nested":
        subject = start
        for position in range(1, hops):
            hop = position - 1
            former = "former " if hop in plan.ended else ""
            subject = f"the {former}{phrase(path.hops[hop].relation).noun} of {subject}"
        if hops - 1 in plan.nouns:
            subject += f", {describe.described(_noun(ctx, path, plan, hops - 1), plan.attributes.get(hops - 1, []))},"
        text = _ask(ctx, path, plan, subject, rng)
    else:
        # The start's noun counts as used: "a person ... is a relative of a person. When was the latter person born?"
        sentences, subject, used = [], start, Counter([plan.nouns[0]] if plan.start_described and 0 in plan.nouns else [])
        for position in range(1, hops):
            noun = _noun(ctx, path, plan, position)
            hop = path.hops[position - 1]
            entry = phrase(hop.relation, _is_work(ctx, hop.head))
            if _reads_through_relation(plan, noun, position, entry):
                former = "former " if position - 1 in plan.ended else ""
                subject = f"the {former}{entry.noun} of {subject}"
                continue
            sentences.append(_clue_sentence(hop.relation, subject,
                                            describe.described(noun, plan.attributes.get(position, [])),
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
            item["refer_to_it_as"] = described_as(plan, position)
        else:
            item["object"] = "ANSWER (do not reveal)"
        hops.append(item)
    start = {"refer_to_it_as": described_as(plan, 0)} if plan.start_described else {
        "name": path.start, "description": (ctx.entities[path.start].description if path.start in ctx.entities else "")[:300]}
    payload = {
        "start": start,
        "chain": hops,
        "answer_constraints": [b.predicate for b in plan.branches],
        "answer_type": path.answer_type,
        "answer_to_hide": path.answer,
        "as_of": plan.as_of_text,
        "snapshot_date": (plan.as_of or ctx.as_of).isoformat(),
    }
    return [{"role": "system", "content": WRITER_PROMPT},
            {"role": "user", "content": json.dumps(payload, ensure_ascii=False, indent=1)}]


async def write_llm(client: LLMClient, ctx: QuestionContext, path: Path, plan: Plan) -> Draft:
    written = await client.complete_json(writer_messages(ctx, path, plan), WrittenQuestion, seed=ctx.config.seed)
    text = " ".join(written.question.split())
    obfuscations = [o for o in plan.obfuscations if not o.startswith("style:")]
    return Draft(text=text, engine=client.engine, model=client.served_model,
                 obfuscations=[*obfuscations, "style:llm", *(f"llm:{o}" for o in written.obfuscations)])
