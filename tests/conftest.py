"""Fixtures shared across test modules.

The shipped sample's stages are built once per session, lazily, and reused: a module that only reads a
run's folders reads the shared one; a module that writes copies the finished stage folders it needs
(`copy_stages`) into its own folder, where a run then reuses them as finished by an earlier run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.dataset import load_config, run_dataset, stage_dirs

ROOT = Path(__file__).resolve().parent.parent
SMALL_CONFIG = ROOT / "tests" / "data" / "dataset_small.toml"
SAMPLE_CONFIG = ROOT / "configs" / "sample.toml"
QWEN3_TEMPLATE = ROOT / "data" / "chat_templates" / "qwen3_tool_calling.jinja"
FRONT_STAGES = ("extract", "walk", "index")  # what configs/sample.toml and the library defaults share


def copy_stages(source: Path, out: Path, stages=FRONT_STAGES) -> Path:
    """Copy the finished `stages` of the run folder `source` into the run folder `out`; returns `out`."""
    for stage in stages:
        shutil.copytree(stage_dirs(source)[stage], stage_dirs(out)[stage])
    return out


@pytest.fixture(scope="session")
def sample_stages(tmp_path_factory) -> Path:
    """A run folder holding the shipped sample's finished graph, paths and index stages, as `make dataset`
    (configs/sample.toml, equal to the stage configs' defaults) writes them: built once, read-only."""
    from extract.stage import run_extract
    from graph.walk_stage import run_walks
    from pipeline.dataset import with_sources
    from synth.environment import build_index

    out = tmp_path_factory.mktemp("sample-stages") / "out"
    config = with_sources(load_config(str(SAMPLE_CONFIG), {"out": str(out)}))
    dirs = stage_dirs(out)
    run_extract(config=config.extract, out_dir=dirs["extract"])
    run_walks(dirs["extract"], dirs["walk"], config.walk)
    build_index(dirs["extract"], dirs["index"], config.index)
    return out


@pytest.fixture(scope="session")
def small_dataset_run(tmp_path_factory, sample_stages) -> Path:
    """One offline `hopsmith dataset` run of the small config over the shipped sample: the run's out folder."""
    out = copy_stages(sample_stages, tmp_path_factory.mktemp("small-run") / "out", ("extract", "index"))
    run_dataset(load_config(str(SMALL_CONFIG), {"out": str(out)}))
    return out


@pytest.fixture(scope="session")
def sample_dataset_run(tmp_path_factory, sample_stages) -> Path:
    """`make dataset` as shipped (configs/sample.toml): the run's out folder, read-only."""
    out = copy_stages(sample_stages, tmp_path_factory.mktemp("sample-run") / "out")
    run_dataset(load_config(str(SAMPLE_CONFIG), {"out": str(out)}))
    return out


@pytest.fixture(scope="module")
def template_tokenizer():
    """A tiny tokenizer carrying the shipped Qwen3 tool-calling chat template (nothing downloaded)."""
    pytest.importorskip("transformers")
    from rl.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(["hopsmith"], vocab_size=300)
    tokenizer.chat_template = QWEN3_TEMPLATE.read_text()
    return tokenizer
