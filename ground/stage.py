"""The life cycle every stage shares: key its output, skip when finished, resume when not, write a manifest.

A stage's output folder is finished when `manifest.json` holds the key computed from its inputs, config,
upstream manifests and code version. An unfinished folder carries `.pending-key`; a rerun with the same key
keeps the work units already written there, a rerun with another key starts the folder afresh.

hopsmith never deletes what it did not write. It only takes a folder that is new, empty or marked as a
stage folder (a manifest or a pending marker); any other folder is refused. Starting afresh removes only
the entries the manifest lists as the stage's (`owned`, else its outputs) or, in an unfinished folder,
everything but the entries the pending marker lists as not ours (lines after the key). A run holds the
folder's lock (`ground.folder_lock`) from `begin_stage` to `finish`.

A finished folder is trusted only after its files are verified against its manifest (size and checksum,
`ground.io.verify_outputs`), once per process: a stage whose own files fail is rebuilt (each failing file
named in one line), and a stage whose upstream folder fails stops before reading it (`DamagedOutput`), so
the upstream stage's own next run rebuilds it. A stage begun `beside` its previous output (every pipeline stage)
builds its new files in `.next/` and moves them into place only when it finishes, so a failed rebuild leaves
the previous output whole and loadable; its manifest is removed just before the move, so a run killed in
the middle of it leaves an unfinished folder, which the next run rebuilds.

The folder may be local or on object storage (`s3://`, `gs://`: `ground.storage`); the protocol needs
no atomic rename. Files are written under unique temporary names (`*.tmp`), the manifest is written last
and lists the stage's files, and readers trust only what it lists (`ground.io.shard_files`). A rerun
that resumes an unfinished folder first removes the temporary files a killed run left in it.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ground.errors import DamagedOutput, UserError
from ground.folder_lock import LOCK, lock_folder, unlock_folder
from ground.io import (
    MANIFEST,
    atomic_write_text,
    describe_input,
    digest_outputs,
    mark_verified,
    read_manifest,
    stage_key,
    verify_outputs,
    write_manifest,
)
from ground.storage import TEMP_SUFFIX, StorePath, as_path, move_tree, remove_tree, temporaries
from ground.version import code_version
from schemas.manifest import InputFile, Manifest

log = logging.getLogger(__name__)
PENDING = ".pending-key"
NEXT = ".next"  # where a stage begun `beside` its previous output builds the new one


@dataclass
class StageRun:
    name: str
    out_dir: Path | StorePath
    key: str
    config: dict[str, Any]
    inputs: list[InputFile]
    upstream: dict[str, str]
    finished: Manifest | None
    foreign: tuple[str, ...] = ()
    previous: Manifest | None = None  # the output kept in place while the new one is built in `.next/`
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def done(self) -> bool:
        return self.finished is not None

    @property
    def work_dir(self) -> Path | StorePath:
        """Where the stage writes its files: `.next/` while a previous output stays in place, else the folder."""
        return self.out_dir / NEXT if self.previous is not None else self.out_dir

    def finish(self, counts: dict[str, int], outputs: dict[str, list[str]], **manifest_fields: Any) -> Manifest:
        """Write the manifest last, listing every output file's size and checksum: from here on the stage
        counts as finished. A new output built beside the previous one is first moved into place."""
        files = digest_outputs(self.work_dir, outputs)
        if self.previous is not None:
            self._switch()
        manifest = Manifest(
            stage=self.name,
            key=self.key,
            code_version=code_version(),
            inputs=self.inputs,
            upstream=self.upstream,
            config=self.config,
            counts=dict(sorted(counts.items())),
            outputs=outputs,
            files=files,
            started_at=self.started_at,
            finished_at=dt.datetime.now(dt.UTC),
            owned=sorted(_entries(self.out_dir) - set(self.foreign) - {PENDING} | {MANIFEST}),
            **manifest_fields,
        )
        write_manifest(self.out_dir, manifest)
        mark_verified(self.out_dir, manifest)
        (self.out_dir / PENDING).unlink(missing_ok=True)
        self.finished = manifest
        unlock_folder(self.out_dir)
        return manifest

    def _switch(self) -> None:
        """Replace the previous output by the one built in `.next/`: the previous manifest goes first (a kill
        from here on leaves an unfinished folder, rebuilt by the next run), then the previous entries the new
        output does not have, then each new entry is moved into place."""
        new = _entries(self.work_dir)
        (self.out_dir / MANIFEST).unlink(missing_ok=True)
        for name in sorted(set(self.previous.owned) - new - {MANIFEST, PENDING, NEXT} - set(self.foreign)):
            remove_tree(self.out_dir / name)
        for name in sorted(new):
            remove_tree(self.out_dir / name)
            move_tree(self.work_dir / name, self.out_dir / name)
        remove_tree(self.work_dir)
        self.previous = None


def _entries(folder: Path | StorePath) -> set[str]:
    """Top-level names in a stage folder, except its lock."""
    return {entry.name for entry in folder.iterdir()} - {LOCK} if folder.is_dir() else set()


def _pending(folder: Path | StorePath) -> tuple[str, list[str]] | None:
    """(key, entries that are not ours) from an unfinished folder's marker, or None."""
    marker = folder / PENDING
    if not marker.is_file():
        return None
    key, *foreign = marker.read_text().splitlines() or [""]
    return key.strip(), [name for name in foreign if name]


def refuse_foreign_folder(folder: Path | StorePath, stage: str) -> None:
    """Stop unless `folder` is new, empty or this stage's folder: hopsmith never takes over user files, nor
    another stage's output."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a folder: choose another output folder")
    if (folder / MANIFEST).is_file() or (folder / PENDING).is_file() or not _entries(folder):
        other = read_manifest(folder) if (folder / MANIFEST).is_file() else None
        if other is not None and other.stage != stage:
            raise UserError(f"{folder} holds the output of stage {other.stage!r}, not {stage!r}: choose another folder")
        return
    raise UserError(
        f"{folder} already exists and was not written by hopsmith (it has no {MANIFEST} or {PENDING}); "
        "hopsmith never deletes what it did not write: choose another output folder, or empty this one"
    )


def _start_afresh(folder: Path | StorePath, previous: Manifest | None, keep_previous: bool = False) -> list[str]:
    """Remove what an earlier run of this stage wrote into `folder` (with `keep_previous`, only what an
    unfinished build beside the previous output left); returns the entries kept (not ours)."""
    entries = _entries(folder)
    pending = _pending(folder)
    if previous is not None:
        listed = previous.owned or [path.split("/")[0] for files in previous.outputs.values() for path in files]
        ours = set(listed) | {MANIFEST, PENDING, NEXT, "parts"} | {e for e in entries if e.endswith(TEMP_SUFFIX)}
    else:
        ours = entries - set(pending[1] if pending else ())
    foreign = sorted(entries - ours)
    kept_previous = keep_previous and previous is not None  # else there is nothing to keep in place
    removed = ({NEXT, PENDING} | {e for e in entries if e.endswith(TEMP_SUFFIX)}) if kept_previous else ours
    for name in sorted(entries & removed):
        remove_tree(folder / name)
    if foreign:
        log.warning("%s: kept %d entries hopsmith did not write: %s", folder, len(foreign), ", ".join(foreign[:5]))
    return foreign


def _remove_temporaries(folder: Path | StorePath, foreign: list[str]) -> None:
    """Delete the `*.tmp` files a killed run left anywhere in the stage's own entries (never in foreign ones)."""
    for name in sorted(_entries(folder) - set(foreign)):
        entry = folder / name
        if name.endswith(TEMP_SUFFIX):
            remove_tree(entry)
        else:
            for temporary in temporaries(entry):
                remove_tree(temporary)


def begin_stage(
    name: str,
    out_dir: str | Path | StorePath,
    config: BaseModel | dict[str, Any],
    input_files: list[str | Path] = (),
    upstream_dirs: dict[str, str | Path] | None = None,
    beside: bool = False,
) -> StageRun:
    """Key a stage run and prepare its folder. `run.done` tells the caller to skip the work: its files
    match its manifest. A stage that runs writes into `run.work_dir`; with `beside`, a previous finished
    output stays in place until `finish` (see the module's docstring)."""
    out_dir = as_path(out_dir)
    config_dict = config.model_dump(mode="json") if isinstance(config, BaseModel) else dict(config)
    inputs = [describe_input(p) for p in input_files]
    upstream: dict[str, str] = {}
    upstream_manifests: dict[str, tuple[Path | StorePath, Manifest]] = {}
    for stage, folder in (upstream_dirs or {}).items():
        manifest = read_manifest(folder)
        if manifest is None:
            raise FileNotFoundError(f"stage {stage!r} has no finished output in {folder}")
        upstream[stage] = manifest.key
        upstream_manifests[stage] = as_path(folder), manifest
    key = stage_key(name, config_dict, inputs, upstream, code_version())
    refuse_foreign_folder(out_dir, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock_folder(out_dir)
    existing = read_manifest(out_dir)
    if existing is not None and existing.key == key:
        damaged = verify_outputs(out_dir, existing)
        if not damaged:
            unlock_folder(out_dir)
            return StageRun(name, out_dir, key, config_dict, inputs, upstream, finished=existing)
        for line in damaged:
            log.warning("%s: rebuilding the stage", line)
    try:
        _verify_upstream(upstream_manifests)
    except DamagedOutput:
        unlock_folder(out_dir)
        raise
    pending = _pending(out_dir)
    if pending is not None and pending[0] == key and (existing is None or beside):  # resume (in `.next/`)
        foreign = pending[1]
        _remove_temporaries(out_dir, foreign)
        if existing is None:  # killed while moving `.next/` into place: rebuilt in place, the rest goes
            remove_tree(out_dir / NEXT)
    else:
        foreign = _start_afresh(out_dir, existing, keep_previous=beside)
    atomic_write_text(out_dir / PENDING, "\n".join([key, *foreign]) + "\n")
    previous = existing if beside else None
    return StageRun(name, out_dir, key, config_dict, inputs, upstream, finished=None, foreign=tuple(foreign),
                    previous=previous)


def _verify_upstream(manifests: dict[str, tuple[Path | StorePath, Manifest]]) -> None:
    """Stop before reading an upstream folder whose files do not match its manifest: its own stage, run
    again, finds the same and rebuilds it."""
    for stage, (folder, manifest) in manifests.items():
        if damaged := verify_outputs(folder, manifest):
            more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
            raise DamagedOutput(f"{damaged[0]}{more}: stage {stage!r} counts as unfinished; rerun it (or "
                                "`hopsmith dataset`) to rebuild it")
