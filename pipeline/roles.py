"""Command-line flags for an LLM role, shared by every stage that has one (writer, shortcut, policy, judge).

`--<prefix>-base-url`, `--<prefix>-model`, `--<prefix>-api-key-env`, `--<prefix>-concurrency`; the key itself
is never a flag, only the name of the environment variable that holds it.
"""

from __future__ import annotations

import argparse
from typing import Any

from pipeline.errors import UserError
from schemas.config import LLMRole

_FLAGS = (("base_url", "base_url"), ("model", "model"), ("api_key_env", "api_key_env"),
          ("concurrency", "max_concurrency"))


def add_role_arguments(parser: argparse.ArgumentParser, prefix: str, who: str) -> None:
    defaults = LLMRole()
    parser.add_argument(f"--{prefix}-base-url", help=f"OpenAI-compatible endpoint of {who} (offline when absent)")
    parser.add_argument(f"--{prefix}-model", help=f"model name of {who} at that endpoint")
    parser.add_argument(f"--{prefix}-api-key-env", metavar="VAR",
                        help=f"environment variable holding the API key (default: {defaults.api_key_env})")
    parser.add_argument(f"--{prefix}-concurrency", type=int, metavar="N",
                        help=f"requests in flight at most (default: {defaults.max_concurrency})")


def role_from_args(args: argparse.Namespace, prefix: str, base: dict[str, Any] | None = None) -> LLMRole | None:
    """The role from a config's values with the flags given on top; None when it has no endpoint."""
    values = dict(base or {})
    attribute = prefix.replace("-", "_")
    for flag, field in _FLAGS:
        value = getattr(args, f"{attribute}_{flag}")
        if value is not None:
            values[field] = value
    try:
        role = LLMRole.model_validate(values)
    except ValueError as error:
        raise UserError(f"invalid --{prefix}-* settings: {error}") from None
    if role.offline:
        return None
    if not role.model:
        raise UserError(f"--{prefix}-base-url needs --{prefix}-model")
    return role
