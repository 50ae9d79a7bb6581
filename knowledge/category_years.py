"""The year categories that date a page's own facts (data/ontology/category_years.toml): "1920 births" says
the year of the page's birth date, "2003 American television series endings" the year its series ended."""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path

CATEGORY_YEARS_FILE = Path(__file__).resolve().parents[1] / "data" / "ontology" / "category_years.toml"
YEAR, ANY_WORDS = "{year}", "*"


@functools.cache
def category_forms() -> dict[str, tuple[re.Pattern, ...]]:
    """Ontology property -> the compiled category names that date it."""
    with CATEGORY_YEARS_FILE.open("rb") as handle:
        table = tomllib.load(handle)["relations"]
    return {relation: tuple(map(form_pattern, forms)) for relation, forms in table.items()}


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


def dated_years(relation: str, categories: Iterable[str]) -> set[int]:
    """The years the page's `categories` give the fact `relation` (empty: none of them dates it)."""
    forms = category_forms().get(relation, ())
    return {int(match.group("year")) for category in categories for form in forms
            if (match := form.fullmatch(category.strip()))}
