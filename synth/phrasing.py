"""English for question writing: relation phrases, entity type nouns, fuzzy dates, literal answer variants.

Relation names are infobox parameters (`birth_place`, `spouse`, `population_total`). The lexicon gives
the common ones a noun ("the spouse of X") and, where a verb reads better, a question frame ("Where was
X born?"); unknown parameters fall back to a readable noun built from the parameter name. Facts that can
change over time (office holders, populations, spouses, clubs) are flagged so questions state an as-of
date.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


@dataclass(frozen=True)
class RelationPhrase:
    noun: str  # "the {noun} of X"
    ask: tuple[str, ...] = ()  # final-hop question frames with {s}; empty -> built from the noun
    clue: str = ""  # clue sentence "{s} ... {o}" used by the chained style; empty -> "The {noun} of {s} is {o}."
    mutable: bool = False  # the fact can change over time: state the as-of date
    count_ask: str = ""  # frame for a numeric answer ("How many children does {s} have?")


def _r(noun: str, *ask: str, clue: str = "", mutable: bool = False, count_ask: str = "") -> RelationPhrase:
    return RelationPhrase(noun, tuple(ask), clue, mutable, count_ask)


LEXICON: dict[str, RelationPhrase] = {
    "birth_place": _r("birthplace", "Where was {s} born?", "In which place was {s} born?", clue="{s} was born in {o}."),
    "birth_date": _r("date of birth", "When was {s} born?", "On what date was {s} born?"),
    "death_place": _r("place of death", "Where did {s} die?", "In which place did {s} die?", clue="{s} died in {o}."),
    "death_date": _r("date of death", "When did {s} die?", "On what date did {s} die?"),
    "resting_place": _r("resting place", "Where is {s} buried?", clue="{s} is buried in {o}."),
    "spouse": _r("spouse", "Who is the spouse of {s}?", "Who is {s} married to?", clue="{s} is married to {o}.", mutable=True),
    "partner": _r("partner", clue="{s} is the partner of {o}.", mutable=True),
    "children": _r("child", clue="{o} is a child of {s}.", count_ask="How many children does {s} have?"),
    "child": _r("child"),
    "parents": _r("parent"),
    "father": _r("father"),
    "mother": _r("mother"),
    "relatives": _r("relative"),
    "nationality": _r("nationality"),
    "occupation": _r("occupation"),
    "alma_mater": _r("alma mater", "Where did {s} study?", "Which institution did {s} attend?", clue="{s} studied at {o}."),
    "education": _r("place of education", "Where was {s} educated?", clue="{s} was educated at {o}."),
    "known_for": _r("best-known work"),
    "party": _r("political party", "Which political party does {s} belong to?", clue="{s} is a member of {o}.", mutable=True),
    "office": _r("office", mutable=True),
    "predecessor": _r("predecessor", clue="{o} preceded {s} in office."),
    "successor": _r("successor", clue="{o} succeeded {s} in office."),
    "president": _r("president", mutable=True),
    "leader_name": _r("leader", mutable=True),
    "leader": _r("leader", mutable=True),
    "mayor": _r("mayor", mutable=True),
    "governor": _r("governor", mutable=True),
    "key_people": _r("key figure", mutable=True),
    "ceo": _r("chief executive", mutable=True),
    "chairman": _r("chair", mutable=True),
    "owner": _r("owner", mutable=True),
    "parent": _r("parent organisation", mutable=True),
    "founder": _r("founder", "Who founded {s}?", clue="{s} was founded by {o}."),
    "founders": _r("founder", "Who founded {s}?", clue="{s} was founded by {o}."),
    "founded": _r("founding date", "When was {s} founded?", "In what year was {s} founded?"),
    "foundation": _r("founding date", "When was {s} founded?"),
    "established": _r("date of establishment", "When was {s} established?"),
    "established_date": _r("date of establishment", "When was {s} established?"),
    "opened": _r("opening date", "When did {s} open?"),
    "released": _r("release date", "When was {s} released?"),
    "release_date": _r("release date", "When was {s} released?"),
    "first_aired": _r("first broadcast date", "When was {s} first broadcast?"),
    "headquarters": _r("headquarters", "Where is {s} headquartered?", clue="{s} is headquartered in {o}.", mutable=True),
    "hq_location": _r("headquarters", "Where is {s} headquartered?", clue="{s} is headquartered in {o}.", mutable=True),
    "hq_location_city": _r("headquarters city", "In which city is {s} headquartered?", clue="{s} is headquartered in {o}.", mutable=True),
    "location": _r("location", "Where is {s} located?", clue="{s} is located in {o}."),
    "location_city": _r("city", "In which city is {s} located?", clue="{s} is located in {o}."),
    "city": _r("city", "In which city is {s} located?", clue="{s} is located in {o}."),
    "country": _r("country", "In which country is {s}?", clue="{s} is in {o}."),
    "state": _r("state", "In which state is {s}?", clue="{s} is in {o}."),
    "capital": _r("capital", "What is the capital of {s}?", clue="The capital of {s} is {o}."),
    "largest_city": _r("largest city", mutable=True),
    "official_languages": _r("official language"),
    "language": _r("language"),
    "currency": _r("currency"),
    "industry": _r("industry"),
    "genre": _r("genre"),
    "label": _r("record label", mutable=True),
    "associated_acts": _r("associated act"),
    "employer": _r("employer", "Who employs {s}?", clue="{s} works for {o}.", mutable=True),
    "team": _r("team", "Which team does {s} play for?", clue="{s} plays for {o}.", mutable=True),
    "current_team": _r("current team", "Which team does {s} play for?", clue="{s} plays for {o}.", mutable=True),
    "club": _r("club", "Which club does {s} play for?", clue="{s} plays for {o}.", mutable=True),
    "clubs": _r("club", mutable=True),
    "manager": _r("manager", mutable=True),
    "coach": _r("coach", mutable=True),
    "ground": _r("home ground", "Where does {s} play its home games?", mutable=True),
    "stadium": _r("home stadium", mutable=True),
    "director": _r("director", "Who directed {s}?", clue="{s} was directed by {o}."),
    "producer": _r("producer", "Who produced {s}?", clue="{s} was produced by {o}."),
    "writer": _r("writer", "Who wrote {s}?", clue="{s} was written by {o}."),
    "author": _r("author", "Who wrote {s}?", clue="{s} was written by {o}."),
    "starring": _r("lead actor"),
    "music": _r("composer of the score"),
    "composer": _r("composer", "Who composed {s}?", clue="{s} was composed by {o}."),
    "artist": _r("artist", "Who recorded {s}?", clue="{s} was recorded by {o}."),
    "publisher": _r("publisher", "Who published {s}?", clue="{s} was published by {o}."),
    "developer": _r("developer", "Who developed {s}?", clue="{s} was developed by {o}."),
    "manufacturer": _r("manufacturer", "Who makes {s}?", clue="{s} is made by {o}."),
    "designer": _r("designer", "Who designed {s}?", clue="{s} was designed by {o}."),
    "architect": _r("architect", "Who designed {s}?", clue="{s} was designed by {o}."),
    "builder": _r("builder", "Who built {s}?", clue="{s} was built by {o}."),
    "operator": _r("operator", "Who operates {s}?", clue="{s} is operated by {o}.", mutable=True),
    "population": _r("population", mutable=True),
    "population_total": _r("population", mutable=True),
    "area_total_km2": _r("total area"),
    "area_km2": _r("area"),
    "elevation_m": _r("elevation"),
    "num_employees": _r("number of employees", "How many people does {s} employ?", mutable=True),
    "revenue": _r("revenue", mutable=True),
    "years_active": _r("active period", "When was {s} active?", "During which years was {s} active?"),
    "instrument": _r("instrument"),
    "instruments": _r("instrument"),
    "religion": _r("religion"),
    "mouth": _r("mouth", "Where does {s} flow into?", clue="{s} flows into {o}."),
    "source": _r("source"),
    "discipline": _r("field"),
    "field": _r("field"),
    "fields": _r("field"),
    "awards": _r("award"),
    "screenplay": _r("screenwriter", "Who wrote the screenplay of {s}?", clue="The screenplay of {s} was written by {o}."),
    "story": _r("story writer", "Who wrote the story of {s}?", clue="The story of {s} was written by {o}."),
    "production_companies": _r("production company", "Which company produced {s}?", clue="{s} was produced by {o}."),
    "distributor": _r("distributor", "Which company distributed {s}?", clue="{s} was distributed by {o}."),
    "notable_works": _r("notable work", clue="{o} is a notable work of {s}."),
    "works": _r("work", clue="{o} is a work of {s}."),
    "followed_by": _r("sequel", "What followed {s}?", clue="{s} was followed by {o}."),
    "preceded_by": _r("predecessor", "What preceded {s}?", clue="{s} was preceded by {o}."),
    "pub_date": _r("publication date", "When was {s} published?", "On what date was {s} first published?"),
    "editor": _r("editor", "Who edited {s}?", clue="{s} was edited by {o}."),
    "cities": _r("city on its course", "Which city lies on {s}?", clue="{s} flows through {o}."),
    "hq_location_country": _r("headquarters country", "In which country is {s} headquartered?",
                              clue="{s} is headquartered in {o}.", mutable=True),
    "former_name": _r("former name", "What was {s} formerly called?"),
    "pseudonym": _r("pen name", "Under which pen name did {s} write?"),
    "citizenship": _r("citizenship", "Which country is {s} a citizen of?", clue="{s} is a citizen of {o}."),
    "runtime": _r("running time", "How long does {s} run?"),
    "budget": _r("budget"),
    "length": _r("length", "How long is {s}?"),
    "subdivision_name": _r("region", "In which region or country does {s} lie?", clue="{s} lies in {o}."),
    "affiliations": _r("affiliation", clue="{s} is affiliated with {o}."),
    "products": _r("product", clue="{s} makes {o}."),
    "organization": _r("associated organisation", clue="{s} is associated with {o}."),
    "campus": _r("campus setting"),
    "religious_affiliation": _r("religious affiliation"),
    "government_type": _r("form of government"),
    "source1_location": _r("source location", "Where does {s} rise?", clue="{s} rises in {o}."),
}

# Fallback word fixes for unlisted parameters ("num" -> "number of", "loc" -> "location").
_WORD_FIXES = {"num": "number of", "loc": "location", "hq": "headquarters", "pop": "population", "km2": "in km²",
               "yr": "year", "org": "organisation", "dept": "department"}
_MUTABLE_HINTS = ("leader", "president", "mayor", "ceo", "chair", "owner", "population", "spouse", "team", "club",
                  "manager", "coach", "employer", "members", "incumbent", "holder", "party", "current")


def phrase(relation: str) -> RelationPhrase:
    """The lexicon entry of a relation, or one derived from its parameter name."""
    if relation in LEXICON:
        return LEXICON[relation]
    words = [_WORD_FIXES.get(w, w) for w in relation.split("_") if w]
    noun = " ".join(words) or relation
    return RelationPhrase(noun=f"listed {noun}" if noun.endswith("ed") else noun,
                          mutable=any(h in relation for h in _MUTABLE_HINTS))


def is_mutable(relation: str, value_type: str, qualifiers: dict[str, str]) -> bool:
    """Whether a fact can change after the snapshot: an as-of date must then be stated."""
    if "start" in qualifiers and "end" not in qualifiers:
        return True
    return phrase(relation).mutable or value_type in ("number", "quantity")


# --- entity types --------------------------------------------------------------------------------------

_TYPE_NOUNS = (
    (("officeholder", "politician", "president", "prime minister", "senator"), "politician"),
    (("football", "soccer", "athlete", "sportsperson", "cricketer", "basketball", "baseball", "tennis",
      "ice hockey", "racing driver", "boxer", "swimmer", "cyclist"), "athlete"),
    (("musical artist", "musician", "singer", "band"), "musician"),
    (("actor", "actress"), "actor"),
    (("writer", "author", "poet", "novelist"), "writer"),
    (("scientist", "academic", "physicist", "chemist", "mathematician"), "scientist"),
    (("royalty", "monarch", "noble"), "royal"),
    (("person", "biography", "people"), "person"),
    (("university", "college", "school", "school district"), "educational institution"),
    (("settlement", "city", "town", "village", "municipality", "commune", "hamlet"), "place"),
    (("country", "sovereign state"), "country"),
    (("river",), "river"),
    (("mountain", "peak"), "mountain"),
    (("lake",), "lake"),
    (("island",), "island"),
    (("company", "corporation", "organization", "organisation", "brand"), "organisation"),
    (("political party",), "political party"),
    (("film",), "film"),
    (("television", "tv series", "show"), "television series"),
    (("album",), "album"),
    (("song", "single"), "song"),
    (("book", "novel"), "book"),
    (("video game",), "video game"),
    (("building", "skyscraper", "tower", "castle", "church", "stadium", "venue", "bridge", "station"), "structure"),
    (("airport",), "airport"),
    (("aircraft", "automobile", "ship", "vehicle", "weapon"), "vehicle"),
    (("military conflict", "battle", "war", "election", "event"), "event"),
    (("sports team", "football club", "club"), "sports club"),
)
PERSON_NOUNS = {"politician", "athlete", "musician", "actor", "writer", "scientist", "royal", "person"}


def type_noun(entity_type: str) -> str:
    """A common noun for an entity type ("Infobox officeholder" -> "politician"); "entity" when unknown."""
    lowered = entity_type.lower().replace("_", " ").removeprefix("infobox ").strip()
    for keys, noun in _TYPE_NOUNS:
        if any(k in lowered for k in keys):
            return noun
    return "entity"


_DESCRIPTION_NOUN = re.compile(r"\b(?:is|was) (?:an?) ([^,.;:()]+)")
_NOUN_STOP = {"directed", "written", "by", "in", "on", "from", "who", "that", "which", "based", "and", "with", "of",
              "for", "set", "known", "best", "starring", "produced", "released", "published", "founded", "located",
              "at", "near", "born", "created", "whose", "where", "to", "as", "about", "adapted", "the", "first"}


def description_noun(description: str) -> str | None:
    """The head noun phrase of a lead sentence: "Amy Adams (born 1974) is an American actress." -> "American actress".

    Numbers are dropped (they would state dates exactly); None when no short phrase is found.
    """
    first_sentence = re.sub(r"\([^)]*\)", "", description).split(". ")[0]
    match = _DESCRIPTION_NOUN.search(first_sentence)
    if not match:
        return None
    words, after_number = [], False
    for word in match.group(1).split():
        if word in _NOUN_STOP or (words and word.endswith(("ing", "ed"))):  # "a country comprising ..."
            break
        number = any(ch.isdigit() for ch in word)
        # a number's unit goes with it: "a 39-mile (63 km) river" -> "river", not "mi river"
        if not number and not (after_number and word.islower() and len(word) <= 3):
            words.append(word)
        after_number = number
    if not 1 <= len(words) <= 5 or not words[-1].isalpha() or not words[-1].islower():
        return None
    return " ".join(words)


_THE_PREFIXES = ("United ", "University of ", "River ", "Republic of ", "Kingdom of ", "State of ", "City of ",
                 "Museum of ", "Bank of ", "Church of ", "Commonwealth of ", "Federation of ", "Isle of ")
_THE_SUFFIXES = (" Islands", " Mountains", " States", " Kingdom", " Republic", " Emirates", " River", " Ocean", " Sea")
_THE_NAMES = {"Netherlands", "Philippines", "Bahamas", "Gambia", "Maldives", "Vatican City", "Congo"}


def proper_name(name: str) -> str:
    """A name as it reads mid-sentence, with "the" where English wants it ("the United States")."""
    if name in _THE_NAMES or name.startswith(_THE_PREFIXES) or name.endswith(_THE_SUFFIXES):
        return f"the {name}"
    return name


def display_title(title: str) -> str:
    """A page title as it reads in a sentence: "King Kong (2005 film)" -> "the 2005 film King Kong"."""
    match = re.fullmatch(r"(.+?) \(([^()]+)\)", title)
    if not match:
        return proper_name(title)
    bare, qualifier = match.groups()
    if qualifier[:1].isupper():  # "Paris (Texas)", "Georgia (U.S. state)": keep as written
        return title
    return f"the {qualifier} {bare}"


def with_article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


# --- dates ---------------------------------------------------------------------------------------------


def parse_date(value: str) -> tuple[int, int | None, int | None] | None:
    """(year, month, day) of an ISO date `YYYY[-MM[-DD]]` (negative years are BCE); None otherwise."""
    match = re.fullmatch(r"(-?\d{1,4})(?:-(\d{2})(?:-(\d{2}))?)?", value.strip())
    if not match:
        return None
    year, month, day = match.groups()
    return int(year), int(month) if month else None, int(day) if day else None


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def fuzz_year(year: int, style: int) -> tuple[str, tuple[int, int]]:
    """A vague period containing `year` and the year range it stands for.

    style 0: "the early 1990s" (third of a decade); style 1: "the 1990s"; style 2: "the late 19th century".
    """
    if year <= 0:
        return "antiquity", (-10_000, 0)
    if style == 1:
        decade = year - year % 10
        return f"the {decade}s", (decade, decade + 9)
    if style == 2:
        century = (year - 1) // 100 + 1
        start = (century - 1) * 100 + 1
        part = (year - start) * 3 // 100
        label = ("early", "mid-", "late")[part]
        span = (start + part * 33, start + 99 if part == 2 else start + part * 33 + 32)
        return f"the {label}{'' if label.endswith('-') else ' '}{_ordinal(century)} century", span
    decade = year - year % 10
    part = year % 10
    label, span = ("early", (0, 3)) if part <= 3 else ("mid", (4, 6)) if part <= 6 else ("late", (7, 9))
    return f"the {label} {decade}s" if label != "mid" else f"the mid-{decade}s", (decade + span[0], decade + span[1])


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
