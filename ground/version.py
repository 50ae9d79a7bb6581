"""The code version recorded in manifests: package version plus a hash of the source that ran."""

from __future__ import annotations

import hashlib
import importlib.metadata
from functools import cache
from pathlib import Path

from ground.levels import PACKAGES


@cache
def code_version() -> str:
    """`<version>+<source hash>`: a change to any stage's code changes every manifest key that uses it."""
    try:
        version = importlib.metadata.version("hopsmith")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return f"{version}+{digest.hexdigest()[:12]}"
