"""English as data: the phrasing rules that rewrite question text, and the stop words.

Read once per process from `data/ontology/phrasing.toml` (tense rewriting, punctuation fixes, mutable-fact
hints) and `data/stop_words.toml` (one stop-word list with named
extensions), so a reviewer reads them in tables. The relations' own phrasing is the phrasebook
(knowledge/phrasebook.py). synth/ writes questions with them; synth/ and critic/ tokenize with the stop words.
"""

from __future__ import annotations

import functools
import tomllib

from knowledge.ontology import DATA_DIR

PHRASING_FILE = DATA_DIR / "phrasing.toml"
STOP_WORDS_FILE = DATA_DIR.parent / "stop_words.toml"


_PHRASING = tomllib.loads(PHRASING_FILE.read_text(encoding="utf-8"))
PAST_TENSE: tuple[tuple[str, str], ...] = tuple(tuple(pair) for pair in _PHRASING["past_tense"])  # present -> past
TIDY: tuple[tuple[str, str], ...] = tuple(tuple(pair) for pair in _PHRASING["tidy"])  # bad -> good punctuation
MUTABLE_HINTS: tuple[str, ...] = tuple(_PHRASING["mutable_hints"])


@functools.cache
def stop_words(*extensions: str) -> frozenset[str]:
    """The base stop words with the named extensions of `data/stop_words.toml` (a KeyError for an unknown one)."""
    table = tomllib.loads(STOP_WORDS_FILE.read_text(encoding="utf-8"))
    return frozenset(table["base"]).union(*(table["extensions"][name] for name in extensions))
