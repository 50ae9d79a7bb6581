"""Text-side checks of a question: what its written text gives away or leaves out.

Leaks of the answer, an evidence sentence or an entity the text should not name, whether an LLM's text
says what its plan gave it (`unfaithful`), the retrieval shortcut (the text as one search) and the
closed-book shortcut (a model answering without tools). Pure functions of the text, apart from the search
environment and the LLM client they are handed; the graph-side checks are `synth.gates`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable

from pydantic import BaseModel

from knowledge.lexicon import stop_words
from llm.client import LLMClient, LLMError, LLMUnavailable
from synth.matching import match_answer, normalize_answer
from synth.phrasing import phrase


@functools.lru_cache(maxsize=1 << 14)
def _tokens(text: str) -> tuple[str, ...]:
    """Normalised tokens; cached, as every gate reads the same question text and names again."""
    return tuple(normalize_answer(text).split())


@functools.lru_cache(maxsize=1 << 14)
def _padded(text: str) -> str:
    """" token token ... ": a phrase occurs on token boundaries where its padded form is a substring."""
    return f" {' '.join(_tokens(text))} "


def contains_phrase(text: str, phrase: str) -> bool:
    """Whether the normalised phrase occurs in the normalised text on token boundaries."""
    return bool(_tokens(phrase)) and _padded(phrase) in _padded(text)


def answer_leak(text: str, answer: str, aliases: Iterable[str]) -> str | None:
    for form in (answer, *aliases):
        if contains_phrase(text, form):
            return form
    return None


def evidence_leak(text: str, evidence: Iterable[str | None], n: int) -> str | None:
    """The first n-token window shared by the question and an evidence sentence, if any."""
    question = _tokens(text)
    grams = {tuple(question[i : i + n]) for i in range(len(question) - n + 1)}
    for sentence in evidence:
        tokens = _tokens(sentence or "")
        for i in range(len(tokens) - n + 1):
            if tuple(tokens[i : i + n]) in grams:
                return " ".join(tokens[i : i + n])
    return None


def intermediate_leak(text: str, names: Iterable[str]) -> str | None:
    for name in names:
        bare = name.split(" (")[0]
        if contains_phrase(text, name) or (len(bare) > 3 and contains_phrase(text, bare)):
            return name
    return None


# Words that carry no constraint: question words, articles, auxiliaries, frame fillers.
_FILLER = stop_words("question_words", "question_frames")
STEM = 5  # words agree on their first letters: "directed" ~ "director", "married" ~ "marriage"


def content_stems(text: str) -> set[str]:
    return {t[:STEM] for t in _tokens(text) if t not in _FILLER and len(t) > 1}


def relation_stems(relation: str) -> set[str]:
    """Every content word by which the relation's phrasebook entry expresses it (noun, plural, question frames,
    its clauses either way and in either tense)."""
    entry = phrase(relation)
    frames = " ".join((entry.noun, entry.plural, *entry.ask, entry.forward, entry.forward_past, entry.inverse,
                       entry.inverse_past, entry.count_ask)).replace("{s}", " ").replace("{o}", " ")
    return content_stems(frames) | content_stems(relation.replace("_", " "))


def unfaithful(text: str, mentions: Iterable[tuple[str, str]], relations: list[str]) -> str | None:
    """Why `text` does not express its plan, or None.

    `mentions` are (what, phrase) pairs the plan gave (the start entity, each intermediate's description):
    at least half of each phrase's content words must be in the text. Of `relations` (the chain's, in
    order), the last (what is asked for) must be expressed and at least half of all of them.
    """
    words = content_stems(text)
    for what, given in mentions:
        needed = content_stems(given)
        if needed and len(needed & words) * 2 < len(needed):
            return f"{what} ({given!r}) is not in the text"
    expressed = [bool(relation_stems(r) & words) for r in relations]
    if relations and not expressed[-1]:
        return f"the asked relation {relations[-1]!r} is not in the text"
    if sum(expressed) * 2 < len(relations):
        return f"only {sum(expressed)} of {len(relations)} relations of the chain are in the text"
    return None


def one_search(environment, text: str, answer: str, forms: Iterable[str], top_k: int) -> str | None:
    """The retrieval shortcut: the question as one `search` lists the answer's page or shows the answer."""
    page = environment.resolve(answer)
    needles = [(form, _tokens(form)) for form in dict.fromkeys([answer, *forms])]
    for rank, hit in enumerate(environment.search(text, top_k), 1):
        if page is not None and hit.title == page.title:
            return f"the answer's page {hit.title!r} is result {rank}"
        shown = " ".join(_tokens(f"{hit.title} {hit.snippet}"))
        for form, tokens in needles:
            if tokens and f" {' '.join(tokens)} " in f" {shown} ":
                return f"result {rank} ({hit.title!r}) shows {form!r}"
    return None


@functools.lru_cache(maxsize=1 << 16)
def _top_titles(environment, query: str, top_k: int) -> tuple[str, ...]:
    """The titles one search of `query` ranks first; cached per environment, since the planner describes the
    same entity the same way on every path through it (the gate then costs one search per description)."""
    return environment.titles(query, top_k)


def description_search(environment, descriptions: Iterable[tuple[str, str] | tuple[str, str, Iterable[str]]],
                       top_k: int) -> str | None:
    """The description shortcut: an entity's description, searched alone, lists that entity's page in the
    top k (`descriptions` are (title, description[, named anchors]) of the entities a question does not name).

    The pages the description itself names (its named anchors: "starring Sissy Spacek") are left out of the
    ranking: a searcher who reads the anchor's page first is one click from the entity, so an anchor ranked
    above it hides nothing."""
    for title, description, *named in descriptions:
        page = environment.resolve(title)
        anchors = {found.title for name in (named[0] if named else ()) if (found := environment.resolve(name))}
        anchors.discard(page.title if page is not None else None)
        titles = [t for t in _top_titles(environment, description, top_k + len(anchors)) if t not in anchors][:top_k]
        if page is not None and page.title in titles:
            named_note = f" (leaving out the {len(anchors)} page(s) it names)" if anchors else ""
            return f"{description!r} alone finds {page.title!r} at rank {titles.index(page.title) + 1}{named_note}"
    return None


def description_answer(environment, descriptions: Iterable[tuple[str, str, Iterable[str]]], answer: str,
                       forms: Iterable[str], top_k: int) -> str | None:
    """The description shortcut to the answer: a page that one search of a description puts before a reader
    (its top k results, the pages it names left out of the ranking, and those named pages themselves) states
    the answer, so the hops before the answer's page are decoration ("a company whose founders include X"
    where X's page gives the company's founding year). `descriptions` are (title, description, named anchors)
    of the entities a question does not name; `forms` the answer's written forms and aliases."""
    answer_page = environment.resolve(answer)
    needles = [f" {' '.join(tokens)} " for form in dict.fromkeys([answer, *forms]) if (tokens := _tokens(form))]
    for _, description, named in descriptions:
        anchors = [page.title for name in named if (page := environment.resolve(name)) is not None]
        hits = [t for t in _top_titles(environment, description, top_k + len(anchors)) if t not in anchors][:top_k]
        for title in dict.fromkeys([*anchors, *hits]):
            if answer_page is not None and title == answer_page.title:
                return f"{description!r} alone finds the answer's page {title!r}"
            text = _page_text(environment, title)
            if (form := next((n for n in needles if n in text), None)) is not None:
                return f"{description!r} alone finds {title!r}, whose page states {form.strip()!r}"
    return None


@functools.lru_cache(maxsize=1 << 12)
def _page_text(environment, title: str) -> str:
    """A page's whole text as padded normalised tokens (`_padded`), cached: descriptions share their results."""
    page = environment.resolve(title)
    return f" {' '.join(_tokens(' '.join(page.chunks)))} " if page is not None else " "


class ClosedBookAnswer(BaseModel):
    answer: str


SHORTCUT_PROMPT = (
    "Answer the question from memory, without searching. Reply with JSON {\"answer\": str}: a short answer "
    "(a name, date or number), your best guess even when unsure."
)


async def shortcut(client: LLMClient, text: str, answer: str, aliases: list[str], attempts: int) -> str | None:
    """Ask the model `attempts` times without tools; return the first answer that matches, if any.

    Attempts whose reply stays unusable are left out; when none is usable the last `LLMError` is raised (the
    caller falls back to the offline gates), and a transient failure (`LLMUnavailable`) always propagates."""
    messages = [{"role": "system", "content": SHORTCUT_PROMPT}, {"role": "user", "content": text}]
    results = await asyncio.gather(*[
        client.complete_json(messages, ClosedBookAnswer, cache_salt=f"shortcut-attempt-{i}") for i in range(attempts)
    ], return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    for error in errors:
        if isinstance(error, LLMUnavailable) or not isinstance(error, LLMError):
            raise error
    replies = [r for r in results if not isinstance(r, BaseException)]
    if errors and not replies:
        raise errors[-1]
    for reply in replies:
        if match_answer(reply.answer, answer, aliases).correct:
            return reply.answer
    return None
