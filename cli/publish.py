"""`hopsmith publish DIR --repo-id ORG/NAME`: its flags and the handler that uploads with
`pipeline.publish.publish` and lists the files (the token comes from `HF_TOKEN` only, never a flag)."""

from __future__ import annotations

import argparse

from cli.validate import add_low_yield_argument
from ground.errors import UserError
from ground.io import file_size
from ground.storage import as_path
from pipeline.publish import TOKEN_ENV, publish


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
