"""English for question writing: relation phrases, entity type nouns, fuzzy dates, literal answer variants.

Relation names are ontology properties (`birthPlace`, `spouse`, `populationTotal`; knowledge/ontology.py).
The phrasebook (`data/ontology/phrasebook.toml`, read by knowledge/phrasebook.py) gives every property a
question may use a reviewed noun ("the spouse of X"), clauses ("X is married to Y") and, where a verb reads
better, question frames ("Where was X born?"); a property without a reviewed entry is not asked. Facts that
can change over time (office holders, populations, spouses, clubs) are flagged so questions state an as-of
date. Answers are written as a person writes them (`answer_form`). Entity types
are ontology classes, named by the nouns of `data/ontology/type_nouns.toml`.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import tomllib

from knowledge.lexicon import MUTABLE_HINTS
from knowledge.ontology import DATA_DIR, load_ontology
from knowledge.phrasebook import UNITS, Entry, answer_breaks, entry
from wikitext.plain_text import format_date

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def as_common_noun(name: str) -> str:
    """"Film director" -> "film director" (a page title capitalised only as a title); "CEO" stays."""
    return name[:1].lower() + name[1:] if name[:1].isupper() and name[1:2].islower() else name


WORK_CLASS = "Work"


def is_work(entity_type: str | None) -> bool:
    """Whether an entity's class is a creative work (film, book, song, ...)."""
    ontology = load_ontology()
    cls = ontology.find_class(entity_type or "")
    return cls is not None and ontology.is_a(cls, WORK_CLASS)


def phrase(relation: str, work: bool = False) -> Entry:
    """The reviewed phrasebook entry of a property (its creative-work variant when the subject is a `work`);
    a KeyError for a property without one, which questions never ask (`reviewed`)."""
    found = entry(relation, work)
    if found is None:
        raise KeyError(f"no reviewed phrasebook entry for {relation!r}")
    return found


def reviewed(relation: str) -> bool:
    """Whether the phrasebook has a reviewed entry for the property, so that a question may ask it."""
    return entry(relation) is not None


def relation_phrase(relation: str, subject: str, several: bool = False) -> str:
    """"the spouse of Angela Merkel" (one of "the children of X" with `several`), as the question text names a
    relation: the phrasebook's noun, or for a property it lacks the DBpedia label; the subject's title as it
    reads in a sentence. The scripted searcher's thoughts name relations with it."""
    found = entry(relation)
    name = display_title(subject)
    if found is not None:
        return found.of(name, several)
    ontology = load_ontology()
    label = ontology.label(relation).lower() if relation in ontology.properties else relation.replace("_", " ")
    return f"the {label} of {name}"


def answer_form(answer: str, value_type: str, relation: str, unit: str | None = None) -> str:
    """An answer as a person writes it: a title without its disambiguator ("The Shining (novel)" -> "The
    Shining"), with the suffix the phrasebook drops ("German language" -> "German"); a number grouped, with
    its unit ("81,799,600", "357,022 km²"); a date as the pages write it ("3 September 1969")."""
    found = entry(relation)
    if value_type == "entity":
        bare = re.sub(r" \([^()]*\)$", "", answer)
        drop = found.answer_drop if found else ""
        return bare[: -len(drop)] if drop and bare.endswith(drop) and len(bare) > len(drop) else bare
    if value_type == "date":
        return format_date(answer)
    if value_type in ("number", "quantity"):
        figure, _, stated = answer.partition(" ")  # a quantity may carry its unit: "2780400 km2"
        try:
            number = float(figure)
        except ValueError:
            return answer
        grouped = f"{number:,.0f}" if number.is_integer() else f"{number:,}"
        unit = stated or unit or (found.unit if found else "")
        written = UNITS.get(unit, unit)
        return f"{grouped}{written}" if written == "%" else f"{grouped} {written}" if written else grouped
    return answer


def is_list_value(answer: str, value_type: str) -> bool:
    """Whether a free-text value is a list of several ("civil servant, politician"): a multi-valued fact that
    extraction left as one string, not one answer."""
    return any(name == "list_value" for name, _ in answer_breaks(answer, value_type))


def has_ended(qualifiers: dict[str, str], as_of: dt.date) -> bool:
    """Whether a fact's end qualifier (a marriage's end, a term of office's `term_end`) lies on or before the
    snapshot: a term that ends later is still running."""
    if "end" not in qualifiers:  # most facts: nothing to read
        return False
    parsed = parse_date(qualifiers["end"])
    if parsed is None or parsed[0] <= 0:
        return True  # an end stated without a readable date ("div.") has happened
    year, month, day = parsed
    return dt.date(year, month or 1, day or 1) <= as_of


def is_mutable(relation: str, value_type: str, qualifiers: dict[str, str]) -> bool:
    """Whether a fact can change after the snapshot: an as-of date must then be stated (for a property the
    phrasebook lacks, when its name holds a mutable hint)."""
    if "start" in qualifiers and "end" not in qualifiers:
        return True
    found = entry(relation)
    mutable = found.mutable if found else any(h in relation.lower() for h in MUTABLE_HINTS)
    return mutable or value_type in ("number", "quantity")


# --- entity types --------------------------------------------------------------------------------------

_TYPE_NOUNS_TABLE = tomllib.loads((DATA_DIR / "type_nouns.toml").read_text(encoding="utf-8"))
CLASS_NOUNS: dict[str, str] = _TYPE_NOUNS_TABLE["nouns"]
PERSON_NOUNS = frozenset(_TYPE_NOUNS_TABLE["persons"])


def type_noun(entity_type: str) -> str:
    """A common noun for an entity's ontology class (`Politician` -> "politician", `SoccerClub` -> "sports
    club" through its ancestors); "entity" for an untyped entity or an unknown type."""
    ontology = load_ontology()
    for cls in ontology.ancestors(ontology.find_class(entity_type) or ""):
        if cls in CLASS_NOUNS:
            return CLASS_NOUNS[cls]
    return "entity"


_THE_PREFIXES = ("United ", "University of ", "River ", "Republic of ", "Kingdom of ", "State of ", "City of ",
                 "Museum of ", "Bank of ", "Church of ", "Commonwealth of ", "Federation of ", "Isle of ",
                 "Duchy of ", "Grand Duchy of ", "Province of ", "Principality of ", "Electorate of ")
_THE_SUFFIXES = (" Islands", " Mountains", " States", " Kingdom", " Republic", " Emirates", " River", " Ocean", " Sea",
                 " Empire", " Union", " Confederation", " national football team", " national team",
                 # a scientist's best-known work: "the Ising model", "the Riemann hypothesis" (the sixth reading)
                 " model", " theorem", " equation", " equations", " effect", " principle", " hypothesis",
                 " conjecture", " paradox", " experiment", " transformation", " transform", " problem")
_THE_NAMES = {"Netherlands", "Philippines", "Bahamas", "Gambia", "Maldives", "Vatican City", "Congo"}
# "the Humboldt University of Berlin", "the Courant Institute of Mathematical Sciences", "the National Gallery of
# Canada" ("Bradley University" stays bare)
_THE_INFIXES = (" University of ", " Institute of ", " College of ", " School of ", " Academy of ", " Gallery of ",
                " Museum of ", " Library of ")


def proper_name(name: str) -> str:
    """A name as it reads mid-sentence, with "the" where English wants it ("the United States")."""
    if (name in _THE_NAMES or name.startswith(_THE_PREFIXES) or name.endswith(_THE_SUFFIXES)
            or any(infix in name for infix in _THE_INFIXES)):
        return f"the {name}"
    return name


_PLACE_KIND_QUALIFIERS = frozenset({"city", "town", "village", "county", "borough", "parish"})


def display_title(title: str) -> str:
    """A page title as it reads in a sentence, never with its parenthesis: "King Kong (2005 film)" -> "the
    2005 film King Kong", "New York (state)" -> "the state of New York", "Cork (city)" -> "the city of Cork",
    "Congress of Deputies (Spain)" -> "Congress of Deputies, Spain"."""
    match = re.fullmatch(r"(.+?) \(([^()]+)\)", title)
    if not match:
        return proper_name(title)
    bare, qualifier = match.groups()
    if qualifier[:1].isupper() and not any(word[:1].islower() for word in qualifier.split()):
        return f"{proper_name(bare)}, {qualifier}"  # "Paris (Texas)" -> "Paris, Texas"
    if qualifier.endswith(("state", "province")) or qualifier in _PLACE_KIND_QUALIFIERS:
        return f"the {qualifier} of {bare}"  # "the state of New York", "the city of Cork", never "the city Cork"
    return f"the {qualifier} {bare}"  # "the 2005 film King Kong"


# "a university", "a European", "a one-off", "a Ukrainian", "a Uruguayan", "a Ugandan"
CONSONANT_SOUND = ("uni", "use", "usu", "eu", "one", "once", "ukr", "uru", "uga", "uta")


def with_article(noun: str) -> str:
    vowel = noun[:1].lower() in "aeiou" and not noun.lower().startswith(CONSONANT_SOUND)
    return f"{'an' if vowel else 'a'} {noun}"


# --- dates ---------------------------------------------------------------------------------------------


_ISO_DATE = re.compile(r"(-?\d{1,4})(?:-(\d{2})(?:-(\d{2}))?)?")


def parse_date(value: str) -> tuple[int, int | None, int | None] | None:
    """(year, month, day) of an ISO date `YYYY[-MM[-DD]]` (negative years are BCE); None otherwise."""
    match = _ISO_DATE.fullmatch(value.strip())
    if not match:
        return None
    year, month, day = match.groups()
    return int(year), int(month) if month else None, int(day) if day else None


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


DATE_PERIODS_FILE = DATA_DIR.parent / "questions" / "date_periods.toml"
MIN_PERIOD_YEAR = 100  # "the 40s" would read as the 1940s: earlier years are not stated as periods


@functools.cache
def _period_forms() -> tuple[dict, ...]:
    """The period forms of `data/questions/date_periods.toml`, in the table's order."""
    with DATE_PERIODS_FILE.open("rb") as handle:
        return tuple(tomllib.load(handle)["forms"])


def date_periods(year: int) -> list[tuple[str, tuple[int, int]]]:
    """The periods a date in `year` may be stated as ("the early 1990s", "the 1990s", "the late 20th century"),
    each with the years a reader takes it to mean (`data/questions/date_periods.toml`): a clue built from one
    is checked by those years, so it tells two entities apart only when a reader would. In a century's first
    decade before 2000 no decade form but its own ("the first decade of the 20th century"), since "the
    1900s" reads as a century."""
    if year < MIN_PERIOD_YEAR:
        return []
    century = year - year % 100  # as a reader counts: 1900-1999 is the 20th century
    first_decade = year % 100 < 10 and year < 2000
    periods = []
    for form in _period_forms():
        by_century = form.get("scope") == "century"
        origin = century if by_century else year - year % 10
        if not by_century and form.get("first_decade", False) != first_decade:
            continue
        if form["stated"][0] <= year - origin <= form["stated"][1]:
            label = form["label"].format(decade=origin, century=_ordinal(century // 100 + 1))
            periods.append((label, (origin + form["read"][0], origin + form["read"][1])))
    return periods


@functools.cache
def period_years(label: str) -> tuple[int, int] | None:
    """The years a stated period means to a reader ("the mid-1960s" -> 1964-1966), read back from the table:
    what the scripted searcher checks a page's years against. None for words no form writes."""
    digits = re.search(r"\d+", label)
    if digits is None:
        return None
    number = int(digits.group())
    first, span = ((number - 1) * 100, 100) if label.endswith(" century") else (number, 10)
    return next((found for year in range(first, first + span) for said, found in date_periods(year) if said == label),
                None)


def month_year(day: dt.date) -> str:
    return f"{MONTHS[day.month - 1]} {day.year}"


def date_variants(value: str) -> list[str]:
    """Surface forms of an ISO date: "1990-05-12", "12 May 1990", "May 12, 1990" (partial dates likewise)."""
    parsed = parse_date(value)
    if parsed is None:
        return [value]
    year, month, day = parsed
    if month is None:
        return [str(year)]
    name = MONTHS[month - 1]
    if day is None:
        return [value, f"{name} {year}"]
    return [value, f"{day} {name} {year}", f"{name} {day}, {year}"]


def number_variants(value: str, unit: str | None = None) -> list[str]:
    """Surface forms of a number with and without thousands separators and unit."""
    forms = [value]
    try:
        number = float(value)
    except ValueError:
        number = None
    if number is not None:
        grouped = f"{number:,.0f}" if number.is_integer() else f"{number:,}"
        plain = f"{number:.0f}" if number.is_integer() else repr(number)
        forms += [grouped, plain]
    if unit:
        forms = [f"{f} {unit}" for f in forms] + forms
    return list(dict.fromkeys(forms))


def sentence(text: str) -> str:
    """Capitalise the first letter and collapse spaces (keeps proper nouns untouched)."""
    text = " ".join(text.split())
    return text[:1].upper() + text[1:]
