"""The life cycle every stage shares: key its output, skip when finished, resume when not, write a manifest.

A stage's output folder is finished when `manifest.json` holds the key computed from its inputs, config,
upstream manifests and code version. An unfinished folder carries `.pending-key`; a rerun with the same key
keeps the work units already written there, a rerun with another key starts the folder afresh.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pipeline.io import atomic_write_text, describe_input, read_manifest, stage_key, write_manifest
from pipeline.version import code_version
from schemas.manifest import InputFile, Manifest

PENDING = ".pending-key"


@dataclass
class StageRun:
    name: str
    out_dir: Path
    key: str
    config: dict[str, Any]
    inputs: list[InputFile]
    upstream: dict[str, str]
    finished: Manifest | None
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def done(self) -> bool:
        return self.finished is not None

    def finish(self, counts: dict[str, int], outputs: dict[str, list[str]], **manifest_fields: Any) -> Manifest:
        """Write the manifest last: from here on the stage counts as finished."""
        manifest = Manifest(
            stage=self.name,
            key=self.key,
            code_version=code_version(),
            inputs=self.inputs,
            upstream=self.upstream,
            config=self.config,
            counts=dict(sorted(counts.items())),
            outputs=outputs,
            started_at=self.started_at,
            finished_at=dt.datetime.now(dt.UTC),
            **manifest_fields,
        )
        write_manifest(self.out_dir, manifest)
        (self.out_dir / PENDING).unlink(missing_ok=True)
        self.finished = manifest
        return manifest


def begin_stage(
    name: str,
    out_dir: str | Path,
    config: BaseModel | dict[str, Any],
    input_files: list[str | Path] = (),
    upstream_dirs: dict[str, str | Path] | None = None,
) -> StageRun:
    """Key a stage run and prepare its folder. `run.done` tells the caller to skip the work."""
    out_dir = Path(out_dir)
    config_dict = config.model_dump(mode="json") if isinstance(config, BaseModel) else dict(config)
    inputs = [describe_input(p) for p in input_files]
    upstream: dict[str, str] = {}
    for stage, folder in (upstream_dirs or {}).items():
        manifest = read_manifest(folder)
        if manifest is None:
            raise FileNotFoundError(f"stage {stage!r} has no finished output in {folder}")
        upstream[stage] = manifest.key
    key = stage_key(name, config_dict, inputs, upstream, code_version())
    existing = read_manifest(out_dir)
    if existing is not None and existing.key == key:
        return StageRun(name, out_dir, key, config_dict, inputs, upstream, finished=existing)
    pending = out_dir / PENDING
    if out_dir.exists() and not (pending.is_file() and pending.read_text().strip() == key):
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(pending, key)
    return StageRun(name, out_dir, key, config_dict, inputs, upstream, finished=None)
