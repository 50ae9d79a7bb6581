"""The wikitext template vocabulary as data: which templates list, wrap, flag, marry, convert or print a separator.

Read once per process from `data/ontology/template_vocabulary.toml` (the template families and the words their
arguments use) and `data/separator_templates.tsv` (symbols and separators, with the text each reader renders),
so a reviewer reads the vocabulary in tables, not in code. wikitext/ (infobox facts, the index's plain text and
lead sentences) reads it here.
"""

from __future__ import annotations

import functools
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
VOCABULARY_FILE = DATA_DIR / "ontology" / "template_vocabulary.toml"
SEPARATOR_FILE = DATA_DIR / "separator_templates.tsv"
_NOT_RENDERED = "-"


@dataclass(frozen=True)
class TemplateVocabulary:
    """The template families of `template_vocabulary.toml` (see its comments for what each means)."""

    lists: frozenset[str]
    unwrap: frozenset[str]
    keep_last: frozenset[str]
    flags: frozenset[str]
    decorative_flags: frozenset[str]
    marriage: frozenset[str]
    convert: frozenset[str]
    first_argument_text: frozenset[str]
    range_words: frozenset[str]
    date_parameter_tokens: frozenset[str]
    not_founding_titles: frozenset[str]
    note_start_words: frozenset[str]
    note_end_words: frozenset[str]
    note_present_words: frozenset[str]
    phrase_connectors: frozenset[str]
    transparent_phrase_heads: frozenset[str]
    list_title_heads: frozenset[str]
    end_reasons: dict[str, str]
    lead_first_argument: frozenset[str]
    lead_last_argument: frozenset[str]


@functools.cache
def template_vocabulary(path: Path = VOCABULARY_FILE) -> TemplateVocabulary:
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    lead = table.pop("lead")
    end_reasons = table.pop("end_reasons")
    return TemplateVocabulary(**{name: frozenset(words) for name, words in table.items()}, end_reasons=end_reasons,
                              lead_first_argument=frozenset(lead["first_argument"]),
                              lead_last_argument=frozenset(lead["last_argument"]))


@functools.cache
def separator_templates(reader: str, path: Path = SEPARATOR_FILE) -> dict[str, str]:
    """Template name -> the text `reader` ("index" or "lead") renders for it; a template the reader does not
    render as a symbol is absent."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and line[0] != "#"]
    header, rows = lines[0].split("\t"), [line.split("\t") for line in lines[1:]]
    column = header.index(reader)
    return {row[0]: json.loads(row[column]) for row in rows if row[column] != _NOT_RENDERED}
