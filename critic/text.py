"""Lexical helpers the offline critic shares: content tokens, phrase containment, surface forms, claims.

Everything compares text after `synth.matching.normalize_answer` (lower case, no accents, punctuation or
articles), so "Nolan, Christopher" and "christopher nolan" meet on the same tokens.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Iterable
from functools import lru_cache

from knowledge.lexicon import stop_words
from synth.matching import normalize_answer

# Observations recur turn after turn (and in every check): normalise each distinct text once.
normalize = lru_cache(maxsize=16384)(normalize_answer)

STOPWORDS = stop_words("agent_text")  # data/stop_words.toml

# Capitalised words that open sentences in agent reasoning without naming anything.
DISCOURSE_WORDS = frozenset(
    """according based since given good great yes ok okay looking searching reading checking opening thought
    action observation answer final search open find next now then so therefore thus hence however first second
    third finally let lets i i'll i'm i've we let's maybe perhaps possibly probably it this that these those there
    the a an my our hmm wait also still both either neither another other one step""".split()
)

PLAN_MARKERS = re.compile(
    r"\b(i will|i'll|i should|i need|i must|i want|i can|let me|let's|lets|next|now i|i am going|i'm going|"
    r"search(ing)? for|look(ing)? up|look(ing)? for|open(ing)?|check(ing)?|find out|try(ing)?|to find|to confirm|"
    r"to verify|to see|read(ing)?)\b",
    re.IGNORECASE,
)
# Hedged and negated clauses assert no fact about the names they mention ("X is not listed").
HEDGE_MARKERS = re.compile(
    r"\b(maybe|perhaps|might|possibly|probably|guess|unclear|unsure|whether|if|unknown|could be|"
    r"not|no|never|cannot|can't|don't|doesn't|didn't|isn't|wasn't)\b",
    re.IGNORECASE,
)
ISO_DATE = re.compile(r"\d{4}-\d{2}(?:-\d{2})?")
NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])|\n+")
_CLAUSE = re.compile(r";\s+|:\s+|,\s*(?:so|then|and then|therefore|thus|hence)\s+|\s+so\s+(?=(?:i|let|next)\b)", re.I)
_CONNECTORS = r"(?:of|the|de|del|der|den|da|di|du|la|le|les|von|van|and|for|upon|on|in|y|&)"
_NAME = re.compile(
    rf"\b\d{{4}}-\d{{2}}(?:-\d{{2}})?\b|[A-Z][\w'’.\-]*(?:\s+(?:{_CONNECTORS}\s+)*[A-Z][\w'’.\-]*)*|"
    rf"\b\d[\d,.]*\d\b|\b\d\b"
)
_QUOTED = re.compile(r"[\"“]([^\"”]{2,400})[\"”]")


def tokens(text: str) -> list[str]:
    return normalize(text).split()


@lru_cache(maxsize=16384)
def content_tokens(text: str) -> frozenset[str]:
    """Normalised tokens that carry content: stop words and one-letter tokens dropped, numbers kept. Frozen
    and cached: every check of every turn asks again for the same question and observation texts."""
    return frozenset(t for t in tokens(text) if t not in STOPWORDS and (len(t) > 1 or t.isdigit()))


def contains_phrase(normalized_haystack: str, phrase: str) -> bool:
    """True when `phrase` occurs in the (already normalised) haystack on word boundaries."""
    needle = normalize(phrase)
    return bool(needle) and f" {needle} " in f" {normalized_haystack} "


def _date_forms(value: str) -> list[str]:
    parts = value.split("-")
    try:
        if len(parts) == 3:
            day = dt.date(int(parts[0]), int(parts[1]), int(parts[2]))
            month = calendar.month_name[day.month]
            return [value, f"{day.day} {month} {day.year}", f"{month} {day.day}, {day.year}"]
        if len(parts) == 2:
            month = calendar.month_name[int(parts[1])]
            return [value, f"{month} {parts[0]}"]
    except (ValueError, IndexError):
        pass
    return [value]


def _number_forms(value: str) -> list[str]:
    forms = [value]
    try:
        number = float(value)
    except ValueError:
        return forms
    if number.is_integer():
        forms += [f"{int(number):,}", str(int(number))]
    else:
        forms.append(f"{number:,}")
    return forms


def surface_forms(value: str, value_type: str = "entity") -> list[str]:
    """The ways a path value can be written in page text (title without disambiguation, date spellings)."""
    if value_type == "date":
        return _date_forms(value)
    if value_type in ("number", "quantity"):
        return _number_forms(value)
    forms = [value]
    bare = re.sub(r"\s*\([^)]*\)\s*$", "", value).strip()
    if bare and bare != value:
        forms.append(bare)
    place, _, region = value.partition(",")  # "Cheadle, Greater Manchester" is often just "Cheadle"
    if region.strip() and place.strip():
        forms.append(place.strip())
    return forms


def value_forms(span: str) -> list[str]:
    """The spellings of a value asserted in text: an ISO date's English forms, a number with or without
    thousands separators; anything else as written."""
    span = span.strip()
    if ISO_DATE.fullmatch(span):
        return surface_forms(span, "date")
    if NUMBER.fullmatch(span):
        return list(dict.fromkeys([span, *surface_forms(span.replace(",", ""), "number")]))
    return [span]


def mentions_any(normalized_haystack: str, forms: Iterable[str]) -> bool:
    """`contains_phrase` for any of the forms, the haystack padded once (observations are long)."""
    return mentions_any_padded(f" {normalized_haystack} ", forms)


def mentions_any_padded(padded_haystack: str, forms: Iterable[str]) -> bool:
    """`mentions_any` on a normalised haystack already padded with a space at each end: a long text (all that
    is known, an observation) asked about form after form is not copied for each."""
    return any(needle in padded_haystack for needle in _padded_needles(tuple(forms)))


@lru_cache(maxsize=16384)
def _padded_needles(forms: tuple[str, ...]) -> tuple[str, ...]:
    """The forms normalised and padded for `mentions_any`: the same units' forms are asked about at every turn."""
    return tuple(f" {needle} " for needle in map(normalize, forms) if needle)


@lru_cache(maxsize=1024)
def phrase_pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    """`mentions_any` for many forms as one regex, for many short haystacks (each clause of an observation):
    any form's normalisation between spaces or the ends of normalised text; never matches without a form."""
    needles = sorted({needle for needle in map(normalize, forms) if needle})
    if not needles:
        return re.compile(r"(?!)")
    return re.compile(rf"(?<!\S)(?:{'|'.join(map(re.escape, needles))})(?!\S)")


@lru_cache(maxsize=4096)
def clauses(text: str) -> tuple[str, ...]:
    """Sentences split further at ';', ':' and ', so'/', then' so a claim and a plan are judged apart
    (cached: several checks split the same reasoning and observations)."""
    pieces = []
    for sentence in _SENTENCE.split(text):
        pieces.extend(p.strip() for p in _CLAUSE.split(sentence) if p and p.strip())
    return tuple(pieces)


@lru_cache(maxsize=16384)
def is_assertion(clause: str) -> bool:
    """A clause states a fact unless it is a question, a plan, or hedged."""
    return not (clause.rstrip().endswith("?") or PLAN_MARKERS.search(clause) or HEDGE_MARKERS.search(clause))


_LEADING_FILLER = DISCOURSE_WORDS | STOPWORDS


def _strip_discourse(span: str) -> str:
    words = span.split()
    while words and words[0].lower().strip("'’.") in _LEADING_FILLER:
        words = words[1:]
    return " ".join(words).strip(" .,'’")


def quoted_spans(clause: str) -> list[str]:
    return [m.group(1) for m in _QUOTED.finditer(clause)]


@lru_cache(maxsize=16384)
def named_spans(clause: str) -> tuple[str, ...]:
    """Names, ISO dates and numbers a clause mentions outside quotes: the checkable parts of a claim (cached:
    the rollouts of a question repeat each other's reasoning)."""
    spans = []
    for match in _NAME.finditer(_QUOTED.sub(" ", clause)):
        span = _strip_discourse(match.group(0))
        if span and normalize(span):
            spans.append(span)
    return tuple(spans)
