"""Grounding: a turn may name only what the question or an earlier observation showed.

A searcher that names an entity or a value before anything showed it knows what it could not know: the
gold path, or a guess. `ungrounded_names` lists what a turn names that way, from two reads:
- the gold path's entities and values (each spelling `critic.evidence.gold_units` knows: titles, their
  bare forms and redirects, a date's or number's spellings) named anywhere in the turn: its reasoning, plans
  and hedges included ("Perhaps she was born in Wellington"), or its call's arguments;
- the names its call acts on, gold or not: the page it opens or searches in, the names in its query and in
  its answer ("Perhaps Atlantis is connected; let me open it"). A name misspelt by a letter is the name
  seen ("Christopher Nolann"), and the text a find_in_page looks for is a hypothesis to check, not a claim.
Names a reasoning only asserts are the soundness check's (`unsupported_claim`). Spellings of two letters or
fewer ("It", a child count "3") are too common to tell a name from a word.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import lru_cache

from critic.evidence import Knowledge
from critic.text import content_tokens, mentions_any, named_spans, normalize
from schemas.trajectory import Turn

MIN_FORM_CHARS = 3
TYPO_SIMILARITY = 0.75  # difflib ratio above which an unknown word is a known one misspelt


@lru_cache(maxsize=4096)
def _distinctive(forms: tuple[str, ...]) -> tuple[str, ...]:
    """The forms long enough to tell a name from a word (each turn asks about the same units)."""
    return tuple(f for f in forms if len(normalize(f)) >= MIN_FORM_CHARS)


def _known(name: str, knowledge: Knowledge) -> bool:
    """Is a name known, allowing each of its words one slip of spelling or punctuation?"""
    if knowledge.supports(name) or len(normalize(name)) < MIN_FORM_CHARS:
        return True
    words = content_tokens(name)
    return bool(words) and all(w in knowledge.tokens or _misspelt(w, knowledge.tokens) for w in words)


def _misspelt(word: str, known: Iterable[str]) -> bool:
    """Is the word a known one misspelt: would `difflib.get_close_matches(word, known, n=1,
    cutoff=TYPO_SIMILARITY)` find one? The same tests in the same order, but a known word too long or too short
    to reach the cutoff (its `real_quick_ratio`) is skipped without a matcher, and the first match ends the search."""
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word)
    size = len(word)
    for candidate in known:
        if 2.0 * min(size, len(candidate)) / (size + len(candidate)) < TYPO_SIMILARITY:
            continue
        matcher.set_seq1(candidate)
        if matcher.quick_ratio() >= TYPO_SIMILARITY and matcher.ratio() >= TYPO_SIMILARITY:
            return True
    return False


def ungrounded_names(turn: Turn, knowledge: Knowledge) -> list[str]:
    """What the turn names that neither the question nor an observation before it showed (call before
    `knowledge.add(turn)`)."""
    call = turn.tool_call
    arguments = {k: str(v) for k, v in (call.arguments.items() if call is not None else ()) if isinstance(v, str)}
    said = normalize(" ".join([turn.reasoning, *arguments.values()]))
    found = []
    for unit in knowledge.units:
        if unit.kind not in ("entity", "fact"):
            continue
        forms = _distinctive(unit.forms)
        if mentions_any(said, forms) and not knowledge.mentions_any(forms):
            found.append(unit.label.rsplit("--> ", 1)[-1])
    if call is not None:
        title = arguments.get("title", "")
        if call.name in ("open_page", "find_in_page") and title and not _known(title, knowledge):
            found.append(title)
        acted_on = [arguments.get("query", ""), arguments.get("text", "") if call.name != "find_in_page" else ""]
        found += [name for value in acted_on for name in named_spans(value) if not _known(name, knowledge)]
    return list(dict.fromkeys(found))
