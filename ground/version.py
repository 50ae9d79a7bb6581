"""The code version recorded in manifests: package version plus a hash of the source that ran and of the
knowledge tables it read (`data/`, less the shipped sample, which is an input and hashed as one)."""

from __future__ import annotations

import hashlib
import importlib.metadata
from functools import cache
from pathlib import Path

from ground.levels import PACKAGES

INPUT_DATA = "sample"  # data/sample/ is the default input, not knowledge


@cache
def code_version() -> str:
    """`<version>+<source hash>`: a change to any stage's code, or to a table of its knowledge (an ontology
    mapping, a stop word), changes every manifest key that uses it."""
    try:
        version = importlib.metadata.version("hopsmith")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    return f"{version}+{source_hash(Path(__file__).resolve().parent.parent)}"


def source_hash(root: Path) -> str:
    """12 hex digits over every package's `.py` files and every knowledge table under `root/data`."""
    digest = hashlib.sha256()
    files = [path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))]
    files += [path for path in sorted((root / "data").rglob("*")) if path.is_file()
              and path.relative_to(root / "data").parts[0] != INPUT_DATA and "__pycache__" not in path.parts]
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
