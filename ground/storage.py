"""Stage folders on object storage (`s3://`, `gs://`, any scheme Beam's FileSystems registers).

`as_path` gives a `pathlib.Path` for a local path and a `StorePath` for a URL, so a stage addresses its
folder the same way on both: `out / "entities" / name`, `is_file()`, `glob("*.parquet")`, `iterdir()`.
A StorePath goes through `apache_beam.io.filesystems.FileSystems` (with the run's options, see
`runtime.beam.use_filesystem_options`); nothing here opens a socket itself.

An object store has no directories and no atomic rename. A "folder" is the prefix `url/`: it exists when
some object lies under it, and `mkdir` is a no-op. `put_bytes` writes each object under a unique temporary
name and then renames it (Beam: copy, then delete), so no reader ever sees a partial object under its
final name on any scheme, including those whose writes are visible while in progress. The copy and the
delete are not one atomic step, and need not be: hopsmith trusts only what a stage's manifest lists, which
is written last, and a rerun removes leftover `*.tmp` objects of its own folders (see `ground.stage`).
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import functools
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ground.errors import DamagedOutput

TEMP_SUFFIX = ".tmp"
_CHUNK = 1 << 22  # bytes a streamed upload or download holds in memory at once


def is_url(path: object) -> bool:
    """True for `scheme://...` (object storage or any FileSystems scheme), False for a local path."""
    return isinstance(path, StorePath) or "://" in str(path)


def as_path(path: str | os.PathLike | StorePath) -> Path | StorePath:
    """A local `Path`, or a `StorePath` for a URL (`Path("s3://b/x")` would silently become `s3:/b/x`)."""
    if isinstance(path, (Path, StorePath)):
        return path
    return StorePath(str(path)) if is_url(path) else Path(path)


def _filesystems():
    """Beam's FileSystems, with default options when no run set its own (S3 refuses to work without)."""
    from apache_beam.io.filesystems import FileSystems

    if FileSystems._pipeline_options is None:
        from apache_beam.options.pipeline_options import PipelineOptions

        FileSystems.set_options(PipelineOptions([]))
    _share_botocore_models()
    return FileSystems


@functools.cache
def _share_botocore_models() -> None:
    """Beam's S3 filesystem builds a new boto3 session for every call (exists, open, rename, ...), and each
    session parses botocore's JSON service models again: 0.1-0.3 s a call, most of a stage's time on S3.
    The models are read-only data, so every session of this process shares one loader (and its cache)."""
    try:
        import botocore.loaders
        import botocore.session
    except ImportError:  # no AWS support installed: nothing to share
        return
    loaders: dict[object, botocore.loaders.Loader] = {}
    create = botocore.loaders.create_loader

    def shared_loader(search_path_string=None):
        if search_path_string not in loaders:
            loaders[search_path_string] = create(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared_loader


def _uncompressed():
    from apache_beam.io.filesystem import CompressionTypes

    return CompressionTypes.UNCOMPRESSED


class StorePath:
    """A file or folder on object storage, with the part of `pathlib.Path`'s interface stages use."""

    __slots__ = ("url",)

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"StorePath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorePath) and other.url == self.url

    def __lt__(self, other: StorePath) -> bool:
        return self.url < other.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __truediv__(self, part: str | os.PathLike) -> StorePath:
        return StorePath(f"{self.url}/{os.fspath(part).strip('/')}")

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    @property
    def stem(self) -> str:
        return PurePosixPath(self.name).stem

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def parent(self) -> StorePath:
        return StorePath(self.url.rsplit("/", 1)[0])

    def relative_to(self, other: StorePath) -> PurePosixPath:
        prefix = f"{StorePath(str(other)).url}/"
        if not self.url.startswith(prefix):
            raise ValueError(f"{self.url} is not under {other}")
        return PurePosixPath(self.url[len(prefix):])

    def _objects(self, limit: int | None = None) -> Iterator[tuple[str, int]]:
        """(relative name, size) of every object under this folder, at any depth (the first `limit`)."""
        prefix = f"{self.url}/"
        for result in _filesystems().match([f"{prefix}**"], limits=[limit]):
            for metadata in result.metadata_list:
                yield metadata.path[len(prefix):], metadata.size_in_bytes

    def _level(self) -> tuple[list[str], list[str]]:
        """(objects, sub-folders) directly in this folder, by name: on S3 and GCS one listing of the folder's
        exact prefix (`url/`) with the delimiter `/`, so the objects deeper down are never listed; on other
        schemes the folder's whole listing, cut at the first level (Beam's FileSystems take no delimiter)."""
        if self.url.startswith("s3://"):
            return _s3_level(self.url)
        if self.url.startswith("gs://"):
            return _gcs_level(self.url)
        files, folders = set(), set()
        for relative, _ in self._objects():
            head, slash, _ = relative.partition("/")
            (folders if slash else files).add(head)
        return sorted(files - {""}), sorted(folders - {""})

    def is_file(self) -> bool:
        return _filesystems().exists(self.url)

    def is_dir(self) -> bool:
        return next(self._objects(limit=1), None) is not None  # one listing page, not the whole prefix

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to create: an object store's folders are the prefixes of its objects."""

    def iterdir(self) -> Iterator[StorePath]:
        """The folder's direct entries (objects and sub-folders), each once: one level is listed."""
        files, folders = self._level()
        return iter([self / name for name in sorted({*files, *folders})])

    def glob(self, pattern: str) -> list[StorePath]:
        """Objects matching `pattern` (`*` stays within one level, as `pathlib` does), found level by level:
        only the folders the pattern's parts match are listed."""
        *parts, last = pattern.split("/")
        folders = [self]
        for part in parts:
            folders = [folder / name for folder in folders for name in folder._level()[1]
                       if fnmatch.fnmatchcase(name, part)]
        return sorted(folder / name for folder in folders for name in folder._level()[0]
                      if fnmatch.fnmatchcase(name, last))

    def rglob(self, pattern: str) -> list[StorePath]:
        """Objects at any depth whose name matches `pattern`."""
        return [self / relative for relative, _ in sorted(self._objects())
                if fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern)]

    def as_posix(self) -> str:
        return self.url

    def resolve(self) -> StorePath:
        """A URL is absolute already."""
        return self

    def size(self) -> int:
        return _filesystems().match([self.url])[0].metadata_list[0].size_in_bytes

    def open_input(self) -> BinaryIO:
        return _filesystems().open(self.url, compression_type=_uncompressed())

    def read_bytes(self) -> bytes:
        with self.open_input() as handle:
            return handle.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> None:
        put_bytes(self, data)

    def write_text(self, text: str, encoding: str = "utf-8") -> None:
        put_bytes(self, text.encode(encoding))

    def unlink(self, missing_ok: bool = False) -> None:
        if missing_ok and not self.is_file():
            return
        _filesystems().delete([self.url])


def _s3_level(url: str) -> tuple[list[str], list[str]]:
    """Objects and sub-folders directly under the S3 folder `url`, through the boto3 client Beam's S3
    filesystem builds from the run's options (endpoint, credentials), asked with a delimiter."""
    from apache_beam.io.aws.clients.s3.boto3_client import Client
    from apache_beam.io.aws.s3io import parse_s3_path

    bucket, key = parse_s3_path(f"{url}/", object_optional=True)
    pages = Client(_filesystems()._pipeline_options).client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=key, Delimiter="/")
    files, folders = [], []
    for page in pages:
        files += [item["Key"][len(key):] for item in page.get("Contents", [])]
        folders += [item["Prefix"][len(key):].rstrip("/") for item in page.get("CommonPrefixes", [])]
    return sorted(set(files) - {""}), sorted(set(folders) - {""})  # "": a console's folder marker


def _gcs_level(url: str) -> tuple[list[str], list[str]]:
    """As `_s3_level`, through the google-cloud-storage client Beam's GCS filesystem builds."""
    from apache_beam.io.gcp.gcsio import GcsIO, parse_gcs_path

    bucket, key = parse_gcs_path(f"{url}/", object_optional=True)
    listing = GcsIO(pipeline_options=_filesystems()._pipeline_options).client.list_blobs(
        bucket, prefix=key, delimiter="/")
    files = [blob.name[len(key):] for page in listing.pages for blob in page]  # `prefixes` fill as pages come
    folders = [prefix[len(key):].rstrip("/") for prefix in listing.prefixes]
    return sorted(set(files) - {""}), sorted(set(folders) - {""})


def put_bytes(path: StorePath, data: bytes) -> None:
    """Write one object: under a unique temporary name first, then renamed (copied) to its final name."""
    _put(path, lambda handle: handle.write(data))


def put_file(path: StorePath, local: str | os.PathLike, chunk: int = _CHUNK) -> None:
    """Upload a local file as one object, streamed (memory holds one chunk), as `put_bytes` does."""
    def copy(handle: BinaryIO) -> None:
        with open(local, "rb") as source:
            shutil.copyfileobj(source, handle, chunk)

    _put(path, copy)


def _put(path: StorePath, write) -> None:
    filesystems = _filesystems()
    temporary = f"{path.parent.url}/.{path.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
    try:
        with filesystems.create(temporary, compression_type=_uncompressed()) as handle:
            write(handle)
        filesystems.rename([temporary], [path.url])
    except BaseException:
        if filesystems.exists(temporary):
            filesystems.delete([temporary])
        raise


def rename_file(source: Path | StorePath, target: Path | StorePath) -> None:
    """Move a file to its final name: `os.replace` locally; on object storage a copy and a delete."""
    if isinstance(source, StorePath):
        _filesystems().rename([source.url], [str(target)])
    else:
        os.replace(source, target)


def move_tree(source: Path | StorePath, target: Path | StorePath) -> None:
    """Move a file or folder to `target` (absent): one rename locally; on object storage each object is
    copied and deleted (`rename_file`)."""
    if isinstance(source, Path):
        os.replace(source, target)
        return
    if source.is_file():
        rename_file(source, target)
    for relative, _ in sorted(source._objects()):
        rename_file(source / relative, target / relative)


def temporaries(folder: Path | StorePath) -> list[Path | StorePath]:
    """The temporary files (`*.tmp`) anywhere under `folder`: what a killed write left behind."""
    if isinstance(folder, StorePath):
        return [folder / relative for relative, _ in sorted(folder._objects()) if relative.endswith(TEMP_SUFFIX)]
    return sorted(folder.rglob(f"*{TEMP_SUFFIX}")) if folder.is_dir() and not folder.is_symlink() else []


@contextlib.contextmanager
def writable_folder(path: Path | StorePath) -> Iterator[Path]:
    """A local folder for a library that writes files itself (bm25s): `path` when local; on object storage
    a temporary folder whose files are uploaded under `path` when the block ends without error."""
    with working_copy(path, download=False) as (local, upload):
        yield local
        upload(".")


@contextlib.contextmanager
def working_copy(path: Path | StorePath, download: bool = True) -> Iterator[tuple[Path, Callable[[str], None]]]:
    """(local folder, upload) for code that writes files into a folder as it goes (torch checkpoints).
    Local: `path` itself, and `upload` does nothing. On object storage: a temporary folder, first holding
    what `path` holds (`download`, so that a resumed run finds its earlier work), and `upload(relative)`,
    which uploads that file or folder (every file under it, streamed) under `path`; the temporary folder
    is removed when the block ends."""
    if isinstance(path, Path):
        path.mkdir(parents=True, exist_ok=True)
        yield path, lambda relative: None
        return
    with tempfile.TemporaryDirectory(prefix="hopsmith-work-") as temporary:
        local = Path(temporary)
        if download:
            _download(path, local)

        def upload(relative: str) -> None:
            source = local / relative
            files = [source] if source.is_file() else sorted(f for f in source.rglob("*") if f.is_file())
            for file in files:
                put_file(path / file.relative_to(local).as_posix(), file)

        yield local, upload


DOWNLOAD_CACHE = "hopsmith-download-cache"  # under the temporary folder
CACHE_BYTES_ENV = "HOPSMITH_DOWNLOAD_CACHE_BYTES"
DEFAULT_CACHE_BYTES = 16 << 30
MANIFEST = "manifest.json"  # a stage folder's manifest, written last and trusted alone
_MANIFEST_DEPTH = 3  # how far above a folder its stage's manifest may lie (`index/bm25_body`)


def readable_folder(path: Path | StorePath) -> Path:
    """A local folder with `path`'s files, for a library that reads (or memory-maps) files itself: `path`
    when local. From object storage, a folder of a finished stage is downloaded (streamed) once into a
    cache in the temporary folder, keyed by the URL and its stage manifest's checksum: an unchanged folder
    is not downloaded again (by any process of this machine), a rebuilt one (new manifest) is. The cache
    keeps the most recently used folders up to `HOPSMITH_DOWNLOAD_CACHE_BYTES` (default 16 GiB). A folder
    no manifest covers (an unfinished stage) is downloaded on every call, into a folder removed at exit."""
    if isinstance(path, Path):
        return path
    found = _enclosing_manifest(path)
    digest = None if found is None else hashlib.sha256(found[1]).hexdigest()
    if digest is None:
        local = Path(tempfile.mkdtemp(prefix="hopsmith-download-"))
        atexit.register(shutil.rmtree, local, ignore_errors=True)
        _download(path, local)
        return local
    cache = Path(tempfile.gettempdir()) / DOWNLOAD_CACHE
    cache.mkdir(exist_ok=True)
    entry = cache / hashlib.sha256(f"{path.url}\n{digest}".encode()).hexdigest()[:32]
    if entry.is_dir():
        os.utime(entry)  # most recently used
        return entry
    partial = Path(tempfile.mkdtemp(prefix=f".{entry.name}.{os.getpid()}.", dir=cache))
    try:
        _download(path, partial)
        _check_download(path, partial, *found)
        os.rename(partial, entry)  # whole or absent under its final name
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if not entry.is_dir():  # not another process finishing the same folder first
            raise
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _evict(cache, keep=entry)
    return entry


def _enclosing_manifest(path: StorePath) -> tuple[StorePath, bytes] | None:
    """(stage folder, manifest bytes) of the nearest stage manifest at or above `path` (within the bucket)."""
    base = path
    for _ in range(_MANIFEST_DEPTH):
        manifest = base / MANIFEST
        if manifest.is_file():
            return base, manifest.read_bytes()
        if base.url.count("/") <= 3:  # `scheme://bucket/x`: nothing above the bucket's top level
            return None
        base = base.parent
    return None


def _check_download(path: StorePath, local: Path, stage_folder: StorePath, manifest_bytes: bytes) -> None:
    """Every downloaded file the stage's manifest lists has the size and checksum it lists (each was read
    whole): a damaged object is named with its stage (`DamagedOutput`), and nothing is cached."""
    manifest = json.loads(manifest_bytes)
    prefix = f"{path.relative_to(stage_folder)}/" if path != stage_folder else ""
    for name, expected in manifest.get("files", {}).items():
        if not name.startswith(prefix):
            continue
        file = local / name[len(prefix):]
        size = file.stat().st_size if file.is_file() else None
        if size != expected["bytes"] or _sha256_local(file) != expected["sha256"]:
            found = "is missing" if size is None else f"has {size:,} bytes" if size != expected["bytes"] \
                else "does not match its manifest's checksum (altered or swapped)"
            said = f", its manifest says {expected['bytes']:,}" if found.startswith("has") else ""
            raise DamagedOutput(f"stage {manifest.get('stage')!r}: {stage_folder / name} {found}{said}")


def _sha256_local(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _download(path: StorePath, local: Path) -> None:
    """Every object under `path` into `local`, streamed, but for hidden ones (a temporary upload, a lock)."""
    for relative, _ in sorted(path._objects()):
        if any(part.startswith(".") for part in relative.split("/")):
            continue
        target = local / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with (path / relative).open_input() as source, open(target, "wb") as sink:
            shutil.copyfileobj(source, sink, _CHUNK)


def _evict(cache: Path, keep: Path) -> None:
    """Remove the least recently used entries beyond the byte budget (never `keep`), and what a download
    killed before its rename left (a partial folder whose process is gone)."""
    budget = int(os.environ.get(CACHE_BYTES_ENV, DEFAULT_CACHE_BYTES))
    entries = sorted((e for e in cache.iterdir() if not e.name.startswith(".")), key=lambda e: e.stat().st_mtime,
                     reverse=True)
    used = _tree_bytes(keep)
    for entry in entries:
        if entry == keep:
            continue
        used += _tree_bytes(entry)
        if used > budget:
            shutil.rmtree(entry, ignore_errors=True)
    for partial in cache.glob(".*.*.*"):
        if not process_alive(int(partial.name.split(".")[2])):
            shutil.rmtree(partial, ignore_errors=True)


def _tree_bytes(folder: Path) -> int:
    return sum(file.stat().st_size for file in folder.rglob("*") if file.is_file())


def process_alive(pid: int) -> bool:
    """Whether process `pid` of this host still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_tree(path: Path | StorePath) -> None:
    """Delete a file or a whole folder (every object under the prefix), whichever it is."""
    if isinstance(path, StorePath):
        objects = [f"{path.url}/{relative}" for relative, _ in path._objects()]
        if path.is_file():
            objects.append(path.url)
        if objects:
            _filesystems().delete(objects)
        return
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
