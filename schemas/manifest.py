"""The run manifest written next to every stage's output: inputs, config, counts and code version."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from schemas.base import SCHEMA_VERSION


class InputFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    sha256: str
    bytes: int


class FileDigest(BaseModel):
    """What one output file must be: readers compare its size (always) and checksum (when read whole)."""

    model_config = ConfigDict(extra="forbid")
    bytes: int
    sha256: str


class Manifest(BaseModel):
    """Describes one stage's materialised output.

    `key` hashes the inputs, config and code version: a rerun whose key matches skips the stage.
    `counts` maps outcome -> count (e.g. `kept`, `skipped:oversized`); `pages_in == kept + skipped`.
    """

    model_config = ConfigDict(extra="forbid")
    schema_version: str = SCHEMA_VERSION
    stage: str
    key: str
    code_version: str
    inputs: list[InputFile] = []
    upstream: dict[str, str] = Field(default_factory=dict, description="stage name -> manifest key read")
    config: dict[str, Any] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    outputs: dict[str, list[str]] = Field(default_factory=dict, description="table -> shard files")
    files: dict[str, FileDigest] = Field(
        default_factory=dict, description="every file of `outputs` (folders expanded), relative -> size, checksum")
    engines: dict[str, str] = Field(default_factory=dict, description="role -> engine/model that produced records")
    as_of: AwareDatetime | None = None
    as_of_reason: str | None = Field(default=None, description="why this as-of: given, or the newest plausible revision")
    window_days: int | None = None
    work_units: dict[str, int] = Field(default_factory=dict, description="the run that finished: units in all, "
                                       "`extracted` by it, `reused` from an interrupted run")
    seed: int | None = None
    started_at: AwareDatetime | None = None
    finished_at: AwareDatetime | None = None
    owned: list[str] = Field(
        default_factory=list, description="top-level entries of the folder this stage wrote: all a restart removes"
    )
