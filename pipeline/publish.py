"""`hopsmith publish DIR --repo-id ORG/NAME`: upload a validated dataset folder to the Hugging Face Hub.

The token comes from the `HF_TOKEN` environment variable only (never a flag, a config file or the
Hub client's stored login) and never appears in output: messages from the Hub are scrubbed before they
are printed. `--dry-run` validates and lists what would be uploaded without a token or a request.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from pathlib import Path

from ground.errors import UserError
from ground.log_scrubbing import ScrubLogs
from ground.storage import StorePath, as_path, readable_folder
from pipeline.layout import CHECKSUMS, DATA_DIR
from pipeline.validate import validate_dataset
from schemas.secrets import scrub

TOKEN_ENV = "HF_TOKEN"
_REPO_ID = re.compile(r"\A[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*\Z")
PUBLISHED_PATTERNS = ("README.md", CHECKSUMS, "manifest.json", f"{DATA_DIR}/*/*.parquet", "plots/*.png")


def files_to_publish(root: Path | StorePath) -> list[Path]:
    """Every file of the folder that belongs on the Hub, relative to it, in a stable order."""
    files = {path for pattern in PUBLISHED_PATTERNS for path in root.glob(pattern) if path.is_file()}
    return sorted(path.relative_to(root) for path in files)


@contextlib.contextmanager
def _scrubbed_logs():
    """Mask secrets on every handler of every logger while the Hub client runs (it logs server replies,
    which may echo the token, and some libraries attach handlers of their own)."""
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger))]
    handlers = {handler for logger in loggers for handler in logger.handlers}
    scrubber = ScrubLogs()
    for handler in handlers:
        handler.addFilter(scrubber)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(scrubber)


def publish(
    root: str | Path,
    repo_id: str,
    private: bool = False,
    dry_run: bool = False,
    message: str = "Upload hopsmith dataset",
    allow_low_yield: bool = False,
) -> list[Path]:
    """Validate, then upload; returns the uploaded (or, for a dry run, the listed) files."""
    root = as_path(root)
    if not _REPO_ID.match(repo_id):
        raise UserError(f"--repo-id must look like ORG/NAME, got {repo_id!r}")
    report = validate_dataset(root, allow_low_yield=allow_low_yield)
    if not report.ok:
        raise UserError(
            f"{root} does not validate ({len(report.errors)} problem(s), first: {report.errors[0]}); "
            f"run `hopsmith validate {root}`"
        )
    files = files_to_publish(root)
    if dry_run:
        return files
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise UserError(
            f"{TOKEN_ENV} is not set: create a write token at https://huggingface.co/settings/tokens "
            f"and export {TOKEN_ENV}=... (the token is read from the environment only)"
        )
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    with _scrubbed_logs(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Hub warnings may quote server replies; failures raise below
        _upload(api, root, repo_id, files, private, message, token)
    return files


def _upload(api, root: Path, repo_id: str, files: list[Path], private: bool, message: str, token: str) -> None:
    from huggingface_hub.errors import HfHubHTTPError

    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(
            folder_path=str(readable_folder(root)),  # a dataset on object storage: a local copy
            repo_id=repo_id,
            repo_type="dataset",
            allow_patterns=[str(path) for path in files],
            commit_message=message,
        )
    except HfHubHTTPError as error:
        raise UserError(f"the Hub refused the upload: {scrub(str(error), token)}") from None
    except OSError as error:
        raise UserError(f"could not reach the Hub: {scrub(str(error), token)}") from None
