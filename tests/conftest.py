"""Fixtures shared across test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.dataset import load_config, run_dataset

SMALL_CONFIG = Path(__file__).resolve().parent / "data" / "dataset_small.toml"


@pytest.fixture(scope="session")
def small_dataset_run(tmp_path_factory) -> Path:
    """One offline `hopsmith dataset` run of the small config over the shipped sample: the run's out folder."""
    out = tmp_path_factory.mktemp("small-run") / "out"
    run_dataset(load_config(str(SMALL_CONFIG), {"out": str(out)}))
    return out
