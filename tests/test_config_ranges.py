"""Every numeric and date field of the dataset config and of the RL config has its range in the schema, and a
value outside it is refused before any stage runs: exit 2, one line naming the key, the value and what is
allowed.

The cases are generated from `DatasetConfig` and `RLConfig` themselves, so a new field without a range fails here."""

from __future__ import annotations

import datetime as dt
import json
import types
import typing

import annotated_types
import pytest
from pydantic import BaseModel

from cli.main import main
from rl.config import RLConfig
from schemas.config import NOT_AFTER_RUN, DatasetConfig, LLMRole

BOUNDS = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)
# a value just outside each kind of bound
OUTSIDE = {annotated_types.Ge: lambda b, step: b.ge - step, annotated_types.Gt: lambda b, step: b.gt,
           annotated_types.Le: lambda b, step: b.le + step, annotated_types.Lt: lambda b, step: b.lt}
FUTURE = {dt.date: "9999-01-01", dt.datetime: "9999-01-01T00:00:00Z"}
SAMPLE_KEYS = {"error_rates": "repeated_search", "thresholds": "tool_accuracy", "weights": "tool_accuracy"}


def _plain(annotation):
    """(type, metadata) of an annotation with Optional and Annotated taken off."""
    metadata = []
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation, *extra = typing.get_args(annotation)
            metadata += extra
        elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        else:
            return annotation, metadata


def _field_metadata(metadata):
    """Bounds and validators, also those inside a nested `Field(...)` (a FieldInfo) of an Annotated type."""
    found = []
    for item in metadata:
        found += getattr(item, "metadata", [item]) if hasattr(item, "metadata") else [item]
    return found


def _cases(model: type[BaseModel], prefix: tuple[str, ...]):
    """(dotted key, TOML-able path, bad value, kind) for every bounded leaf; unbounded ones yield kind None."""
    for name, info in model.model_fields.items():
        kind, metadata = _plain(info.annotation)
        metadata = _field_metadata(metadata + list(info.metadata))
        path = (*prefix, name)
        origin = typing.get_origin(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _cases(kind, path)
        elif origin is dict and typing.get_args(kind)[1] is LLMRole:
            continue  # LLMRole's own fields are covered through `questions.writer`
        elif origin in (list, dict):
            item, item_metadata = _plain(typing.get_args(kind)[-1])
            if item in (int, float):
                bad = _outside(item, _field_metadata(item_metadata))
                value = [bad] if origin is list else {SAMPLE_KEYS.get(name, "x"): bad}
                yield ".".join(path), path, value if bad is not None else None
        elif kind in (bool, str, dict, list) or origin is typing.Literal:  # no range: names, flags, free-form
            continue
        elif kind in (int, float):
            yield ".".join(path), path, _outside(kind, metadata)
        elif kind in FUTURE or getattr(kind, "__origin__", None) in FUTURE or _is_datetime(kind):
            base = dt.datetime if _is_datetime(kind) else dt.date
            yield ".".join(path), path, FUTURE[base] if NOT_AFTER_RUN in metadata else None
        else:
            raise AssertionError(f"{'.'.join(path)}: a field type this test does not know: {kind!r}")


def _is_datetime(kind) -> bool:
    return isinstance(kind, type) and issubclass(kind, dt.datetime) or "Datetime" in getattr(kind, "__name__", "")


def _outside(kind: type, metadata) -> int | float | None:
    step = 1 if kind is int else 0.5
    bounds = [m for m in metadata if isinstance(m, BOUNDS)]
    return OUTSIDE[type(bounds[0])](bounds[0], step) if bounds else None


CASES = sorted(_cases(DatasetConfig, ()), key=lambda case: case[0])
RL_CASES = sorted(_cases(RLConfig, ()), key=lambda case: case[0])


def _toml(path: tuple[str, ...], value) -> str:
    def literal(v):
        if isinstance(v, list):
            return "[" + ", ".join(literal(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {literal(x)}" for k, x in v.items()) + " }"
        return f'"{v}"' if isinstance(v, str) else repr(v)

    *tables, key = path
    header = f"[{'.'.join(tables)}]\n" if tables else ""
    return f"{header}{key} = {literal(value)}\n"


def test_the_generator_covers_the_fields_the_issue_named():
    keys = {case[0] for case in CASES}
    assert {"extract.window_days", "trajectories.search_top_k", "walk.max_paths", "walk.max_literal_chars",
            "questions.shortcut_attempts", "as_of", "walk.walks_per_start", "walk.hub_quantile",
            "beam.direct_num_workers", "trajectories.error_rates", "questions.writer.backoff_s"} <= keys


@pytest.mark.parametrize(("key", "path", "bad"), CASES, ids=[case[0] for case in CASES])
def test_an_out_of_range_value_is_refused_before_any_stage_runs(tmp_path, capsys, key, path, bad):
    assert bad is not None, f"{key} has no range in the schema: give it ge/gt/le/lt (or NOT_AFTER_RUN for a date)"
    config = tmp_path / "run.toml"
    config.write_text(_toml(path, bad))
    out = tmp_path / "out"
    assert main(["dataset", "--config", str(config), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert error.startswith("hopsmith: error: invalid dataset config: ") and key in error, error
    assert "must" in error or "should" in error, error  # what is allowed
    assert not out.exists()  # no stage ran, not even the run's folder was made


def test_a_negative_worker_count_passed_to_beam_is_refused_before_any_stage_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["dataset", "--out", str(out), "--direct_num_workers", "-2"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == "hopsmith: error: --direct_num_workers = -2: must be >= 0 (0: one per CPU)"
    assert not (out / "graph").exists()


def test_the_rl_generator_reaches_nested_and_optional_fields():
    keys = {case[0] for case in RL_CASES}
    assert {"lr", "group_size", "gamma", "max_trajectories", "tiny.hidden_size"} <= keys


@pytest.mark.parametrize(("key", "path", "bad"), RL_CASES, ids=[case[0] for case in RL_CASES])
def test_an_out_of_range_rl_value_is_refused_before_training_starts(tmp_path, capsys, key, path, bad):
    assert bad is not None, f"{key} has no range in RLConfig: give it ge/gt/le/lt"
    value = bad
    for part in reversed(path):
        value = {part: value}
    config = tmp_path / "rl.json"
    config.write_text(json.dumps(value))
    out = tmp_path / "rl"
    assert main(["rl", "--config", str(config), "--shards", str(tmp_path / "no-dataset"), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert error.startswith("hopsmith: error: invalid rl config: ") and key in error, error
    assert "must" in error, error
    assert not out.exists()
