"""The phrasebook: how questions name each ontology property, and the known breaks of question English.

Read once per process from `data/ontology/phrasebook.toml` (one reviewed entry per property a question may
use: noun and plural, the answer class that picks the wh-word, question frames, a clause for each direction
in the present and the past) and `data/ontology/phrasebook_breaks.toml` (patterns that never occur in a
well-formed question or answer). Only reviewed entries are served: a property without one is not asked.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from knowledge.ontology import DATA_DIR

PHRASEBOOK_FILE = DATA_DIR / "phrasebook.toml"
BREAKS_FILE = DATA_DIR / "phrasebook_breaks.toml"
ANSWER_CLASSES = ("person", "place", "date", "number", "thing")


@dataclass(frozen=True)
class Entry:
    """One property's phrasing; the clause templates hold {s} (the subject) and {o} (the object)."""

    noun: str
    plural: str
    answer: str  # answer class of its objects: person, place, date, number, thing
    forward: str  # "{s} is married to {o}." (subject first, object last)
    forward_past: str
    inverse: str  # "{o} is married to {s}."
    inverse_past: str
    ask: tuple[str, ...] = ()
    count_ask: str = ""
    mutable: bool = False
    common_objects: bool = False
    guessable: bool = False
    answer_drop: str = ""
    unit: str = ""  # the unit its bare numbers are in ("%"), where the value states none

    @property
    def wh(self) -> str:
        """"Who" for a person, else "What" (`[wh]` of the table)."""
        return WH[self.answer]

    def clause(self, subject: str, obj: str, past: bool = False, inverse: bool = False) -> str:
        template = (self.inverse_past if past else self.inverse) if inverse else (
            self.forward_past if past else self.forward)
        return template.format(s=subject, o=obj)

    def of(self, subject: str, several: bool = False) -> str:
        """"the spouse of X"; with `several`, "one of the children of X"."""
        return f"one of the {self.plural} of {subject}" if several else f"the {self.noun} of {subject}"


def _entry(fields: dict) -> Entry:
    return Entry(fields["noun"], fields["plural"], fields["answer"], fields["forward"], fields["forward_past"],
                 fields["inverse"], fields["inverse_past"], tuple(fields.get("ask", ())), fields.get("count_ask", ""),
                 fields.get("mutable", False), fields.get("common_objects", False), fields.get("guessable", False),
                 fields.get("answer_drop", ""), fields.get("unit", ""))


def _load() -> tuple[dict, dict[str, Entry], dict[str, Entry]]:
    table = tomllib.loads(PHRASEBOOK_FILE.read_text(encoding="utf-8"))
    reviewed = {name: fields for name, fields in table["relations"].items() if fields.get("reviewed")}
    works = {name: _entry({**fields, **fields["work"]}) for name, fields in reviewed.items() if "work" in fields}
    return table, {name: _entry(fields) for name, fields in reviewed.items()}, works


_TABLE, PHRASEBOOK, WORK_PHRASEBOOK = _load()
WH: dict[str, str] = _TABLE["wh"]
UNITS: dict[str, str] = _TABLE["units"]
VAGUE_NOUNS = frozenset(_TABLE["vague"]["nouns"])


def entry(relation: str, work: bool = False) -> Entry | None:
    """The reviewed entry of a property (its creative-work variant when the subject is a `work`); None when
    the phrasebook has no reviewed entry, and the property is then not to be asked."""
    if work and relation in WORK_PHRASEBOOK:
        return WORK_PHRASEBOOK[relation]
    return PHRASEBOOK.get(relation)


# --- the break scanner ---------------------------------------------------------------------------------

_BREAKS = tomllib.loads(BREAKS_FILE.read_text(encoding="utf-8"))
_TEXT_BREAKS = {name: re.compile(p, re.IGNORECASE) for name, p in _BREAKS["text"].items()}
_ANSWER_BREAKS = {name: re.compile(p, re.IGNORECASE) for name, p in _BREAKS["answer"].items()}
_STRING_ANSWER_BREAKS = {name: re.compile(p, re.IGNORECASE) for name, p in _BREAKS["string_answer"].items()}


def breaks(text: str) -> list[tuple[str, str]]:
    """The known breaks in a question's text: (pattern name, the text it matched), in table order."""
    return [(name, found.group(0)) for name, pattern in _TEXT_BREAKS.items() if (found := pattern.search(text))]


def scan_question(text: str, answer: str, value_type: str = "entity") -> list[str]:
    """The names of the known breaks in a question's text and its written answer (the question report's
    `BreakScanner` signature)."""
    return [name for name, _ in breaks(text)] + [f"answer:{name}" for name, _ in answer_breaks(answer, value_type)]


def answer_breaks(answer: str, value_type: str = "entity") -> list[tuple[str, str]]:
    """The known breaks of an answer as a person would write it (a disambiguator, an ungrouped number, an ISO
    date; for a free-text answer also a list)."""
    patterns = {**_ANSWER_BREAKS, **(_STRING_ANSWER_BREAKS if value_type == "string" else {})}
    return [(name, found.group(0)) for name, pattern in patterns.items() if (found := pattern.search(answer))]
