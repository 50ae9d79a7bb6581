"""The floors of the project: each package's level, lowest first.

A module may import its own package and packages on lower floors, never a package on its own floor or
above: so no import runs upward and no package cycle can form. `tests/test_levels.py` checks every import
(lazy ones inside functions and `importlib` strings included) against this table; `docs/ARCHITECTURE.md`
describes what each floor holds.
"""

from __future__ import annotations

LEVELS: tuple[tuple[str, ...], ...] = (
    ("schemas",),                        # records only: pydantic models, the secret-masking rule
    ("ground",),                         # storage, record IO, sorted runs, stage life cycle, deadlines, progress
    ("runtime", "llm", "knowledge"),     # Beam/Dask runners; the LLM client; ontology and lexicon tables
    ("wikitext",),                       # markup, infobox values, plain text
    ("extract",),                        # stage 1: sources -> entities and relations
    ("graph",),                          # the CSR graph, its statistics, the walks
    ("synth",),                          # questions, the search environment, agent frameworks, trajectories
    ("critic",),                         # turn scores and the judge stage
    ("pipeline",),                       # the dataset run, renders, card, validate, publish, run summary
    ("rl",),                             # RL on the shards, the verl export
    ("cli",),                            # `hopsmith`: one module per command
)

PACKAGES: tuple[str, ...] = tuple(package for floor in LEVELS for package in floor)

