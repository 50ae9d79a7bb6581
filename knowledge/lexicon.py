"""English as data: the relation lexicon, the phrasing rules that rewrite question text, and the stop words.

Read once per process from `data/ontology/lexicon.toml` (a noun, question and clue frames per ontology property,
and its creative-work variant), `data/ontology/phrasing.toml` (tense rewriting, punctuation fixes, the words of
unmapped parameter names, mutable-fact hints) and `data/stop_words.toml` (one stop-word list with named
extensions), so a reviewer reads them in tables. synth/ writes questions with them; synth/ and critic/ tokenize
with the stop words.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from knowledge.ontology import DATA_DIR

LEXICON_FILE = DATA_DIR / "lexicon.toml"
PHRASING_FILE = DATA_DIR / "phrasing.toml"
STOP_WORDS_FILE = DATA_DIR.parent / "stop_words.toml"


@dataclass(frozen=True)
class RelationPhrase:
    noun: str  # "the {noun} of X"
    ask: tuple[str, ...] = ()  # final-hop question frames with {s}; empty -> built from the noun
    clue: str = ""  # clue sentence "{s} ... {o}" used by the chained style; empty -> "The {noun} of {s} is {o}."
    mutable: bool = False  # the fact can change over time: state the as-of date
    count_ask: str = ""  # frame for a numeric answer ("How many children does {s} have?")
    common_objects: bool = False  # objects are common nouns, lower case in running text ("include screenwriter")
    guessable: bool = False  # never asked for: its value is one of a handful that the question's words suggest


def _entry(entry: dict) -> RelationPhrase:
    return RelationPhrase(entry["noun"], tuple(entry.get("ask", ())), entry.get("clue", ""),
                          entry.get("mutable", False), entry.get("count_ask", ""),
                          entry.get("common_objects", False), entry.get("guessable", False))


def _load_lexicon(path: Path = LEXICON_FILE) -> tuple[dict[str, RelationPhrase], dict[str, RelationPhrase]]:
    """The entries, and the variants of those whose subject reads differently when it is a creative work
    (a sub-table `work`: a novel is *from* a country, a city is *in* one)."""
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    works = {name: _entry({**entry, **entry["work"]}) for name, entry in table.items() if "work" in entry}
    return {name: _entry(entry) for name, entry in table.items()}, works


LEXICON, WORK_LEXICON = _load_lexicon()
_PHRASING = tomllib.loads(PHRASING_FILE.read_text(encoding="utf-8"))
PAST_TENSE: tuple[tuple[str, str], ...] = tuple(tuple(pair) for pair in _PHRASING["past_tense"])  # present -> past
TIDY: tuple[tuple[str, str], ...] = tuple(tuple(pair) for pair in _PHRASING["tidy"])  # bad -> good punctuation
PARAMETER_WORDS: dict[str, str] = _PHRASING["parameter_words"]  # "num" -> "number of"
MUTABLE_HINTS: tuple[str, ...] = tuple(_PHRASING["mutable_hints"])


@functools.cache
def stop_words(*extensions: str) -> frozenset[str]:
    """The base stop words with the named extensions of `data/stop_words.toml` (a KeyError for an unknown one)."""
    table = tomllib.loads(STOP_WORDS_FILE.read_text(encoding="utf-8"))
    return frozenset(table["base"]).union(*(table["extensions"][name] for name in extensions))
