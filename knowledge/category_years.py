"""The year categories that date a page's own facts, and the lead words that state them
(data/ontology/category_years.toml): "1920 births" says the year of the page's birth date, "2003 American
television series endings" the year its series ended, "founded in 1911" in its lead the year it was founded."""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CATEGORY_YEARS_FILE = Path(__file__).resolve().parents[1] / "data" / "ontology" / "category_years.toml"
YEAR, ANY_WORDS = "{year}", "*"


@dataclass(frozen=True)
class YearCheck:
    """How one relation's year is checked: the category names that date it, the lead words that state it."""

    categories: tuple[re.Pattern, ...]
    lead_words: re.Pattern | None


@functools.cache
def year_checks() -> dict[str, YearCheck]:
    """Ontology property -> its `YearCheck`."""
    with CATEGORY_YEARS_FILE.open("rb") as handle:
        table = tomllib.load(handle)["relations"]
    return {relation: YearCheck(tuple(map(form_pattern, entry["categories"])),
                                _words_pattern(entry.get("lead_words", [])))
            for relation, entry in table.items()}


def checks_year(relation: str) -> bool:
    return relation in year_checks()


def form_pattern(form: str) -> re.Pattern:
    """A category name of the table as a pattern: `{year}` a four-digit year (group `year`), `*` any words or
    none ("{year} * films" reads "2010 films" and "2010 American drama films")."""
    words = form.split()
    if words.count(YEAR) != 1:
        raise ValueError(f"category form {form!r} must hold {YEAR} once")
    pieces: list[str] = []
    leading = ""  # "* established in {year}": any words, or none, before the first
    for word in words:
        if word == ANY_WORDS and not pieces:
            leading = r"(?:.+ )?"
        elif word == ANY_WORDS:  # the words, if any, between the piece before and the next
            pieces[-1] += r"(?: .+)?"
        else:
            pieces.append(r"(?P<year>\d{4})" if word == YEAR else re.escape(word))
    return re.compile(leading + " ".join(pieces))


def _words_pattern(words: list[str]) -> re.Pattern | None:
    return re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE) if words else None


def dated_years(relation: str, categories: Iterable[str]) -> set[int]:
    """The years the page's `categories` give the fact `relation` (empty: none of them dates it)."""
    check = year_checks().get(relation)
    forms = check.categories if check else ()
    return {int(match.group("year")) for category in categories for form in forms
            if (match := form.fullmatch(category.strip()))}


def stated_in_lead(relation: str, year: int, sentences: list[str]) -> bool:
    """Whether the page's lead states the fact's year: its first sentence names the year ("(born January 4,
    1985)"), or a lead sentence names it beside one of the relation's lead words ("The company began in
    1911, founded in Endicott"; "In 2015 the company transformed" states no founding)."""
    named = re.compile(rf"\b{year}\b")
    if sentences and named.search(sentences[0]):
        return True
    words = year_checks()[relation].lead_words
    return words is not None and any(named.search(s) and words.search(s) for s in sentences)
