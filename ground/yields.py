"""Yield floors: the counts below which a stage's output is not a usable dataset, said in plain words.

A run whose walk found no path, whose question stage kept no question or whose train split is empty ends
with exit status 0 like any other, so the run summary names each floor missed and `validate` (and with it
`publish`) fails on such a dataset unless told `--allow-low-yield`. An empty dataset is always refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from schemas.dataset import CONFIGS

# stage -> (manifest count, floor, what it means when the count is below the floor)
FLOORS: dict[str, list[tuple[str, int, str]]] = {
    "walk": [("paths:kept", 1, "the walk found no relational path")],
    "questions": [("questions:kept", 1, "no question passed the checks")],
    "index": [("kept", 1, "the search index holds no page")],
    "trajectories": [("trajectories", 1, "no agent trajectory was written")],
    "judge": [("judged", 1, "no trajectory was judged")],
    "dataset": [(f"rows:{config}:train", 1, f"the train split of `{config}` is empty") for config in CONFIGS],
}


# stage -> (manifest count that, when present and zero, explains a missed floor, the explanation)
CAUSES: dict[str, list[tuple[str, str]]] = {
    "walk": [("graph:chain_edges", "no mapped fact leads from a page to another page with facts: the input's "
              "infobox facts name pages it does not hold, so no path of two or more hops exists")],
}


def below_floor(stage: str, counts: Mapping[str, int]) -> list[str]:
    """One plain sentence per floor a finished stage's counts miss, with its cause where the counts show it."""
    missed = [f"{stage}: {meaning} ({count} = {counts.get(count, 0):,}, floor {floor:,})"
              for count, floor, meaning in FLOORS.get(stage, []) if counts.get(count, 0) < floor]
    causes = [f"{stage}: {why}" for count, why in CAUSES.get(stage, []) if missed and counts.get(count, 1) == 0]
    return missed + causes


def split_floor_problems(rows: Mapping[str, Mapping[str, int]]) -> list[str]:
    """What `validate` reports as low yield, from rows per config and split of a dataset folder."""
    problems = [f"the train split of `{config}` is empty" for config in sorted(rows) if not rows[config].get("train")]
    if not rows.get("questions", {}).get("train") and not rows.get("questions", {}).get("test"):
        problems.append("the dataset holds no question")
    return problems
