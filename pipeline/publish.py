"""`hopsmith publish DIR --repo-id ORG/NAME`: upload a validated dataset folder to the Hugging Face Hub.

The token comes from the `HF_TOKEN` environment variable only (never a flag, a config file or the
Hub client's stored login) and never appears in output: messages from the Hub are scrubbed before they
are printed. `--dry-run` validates and lists what would be uploaded without a token or a request.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import warnings
from pathlib import Path

from ground.errors import UserError
from ground.io import file_size
from ground.log_scrubbing import ScrubLogs
from ground.storage import StorePath, as_path, readable_folder
from pipeline.layout import CHECKSUMS, DATA_DIR
from pipeline.validate import add_low_yield_argument, validate_dataset
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


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "publish",
        help="upload a dataset folder to the Hugging Face Hub (token from HF_TOKEN)",
        description="Validate DIR and upload its card, shards, plots and checksums to a Hub dataset repo. "
        f"The token is read from the {TOKEN_ENV} environment variable only.",
    )
    parser.add_argument("dir", help="a dataset folder written by `hopsmith dataset` (e.g. out/dataset)")
    parser.add_argument("--repo-id", required=True, help="the Hub dataset repo, ORG/NAME")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--dry-run", action="store_true", help="validate and list the files; upload nothing")
    parser.add_argument("--message", default="Upload hopsmith dataset", help="commit message")
    add_low_yield_argument(parser)
    parser.set_defaults(func=_handle)


def _handle(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise UserError(f"unknown arguments: {' '.join(beam_args)}")
    root = as_path(args.dir)
    files = publish(root, args.repo_id, private=args.private, dry_run=args.dry_run, message=args.message,
                    allow_low_yield=args.allow_low_yield)
    verb = "would upload" if args.dry_run else "uploaded"
    visibility = "private" if args.private else "public"
    from huggingface_hub import constants

    print(f"{verb} {len(files)} files to {constants.ENDPOINT}/datasets/{args.repo_id} ({visibility}):")
    for path in files:
        print(f"  {path}  ({file_size(root / path):,} bytes)")
    return 0
