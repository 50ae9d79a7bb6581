"""Command-line flags for an LLM role, shared by every command that has one (writer, shortcut, policy, judge).

`--<prefix>-base-url`, `--<prefix>-model`, `--<prefix>-api-key-env`, `--<prefix>-concurrency`,
`--<prefix>-max-tokens`, `--<prefix>-timeout`, `--<prefix>-tool-choice`; the key itself is never a flag,
only the name of the environment variable that holds it.
"""

from __future__ import annotations

import argparse
from typing import Any

from ground.errors import UserError
from schemas.config import LLMRole, ValidationError, config_error_line

_FLAGS = (("base_url", "base_url"), ("model", "model"), ("api_key_env", "api_key_env"),
          ("concurrency", "max_concurrency"), ("max_tokens", "max_tokens"), ("timeout", "timeout_s"),
          ("tool_choice", "tool_choice"))


def add_role_arguments(parser: argparse.ArgumentParser, prefix: str, who: str) -> None:
    defaults = LLMRole()
    parser.add_argument(f"--{prefix}-base-url", help=f"OpenAI-compatible endpoint of {who} (offline when absent)")
    parser.add_argument(f"--{prefix}-model", help=f"model name of {who} at that endpoint")
    parser.add_argument(f"--{prefix}-api-key-env", metavar="VAR",
                        help=f"environment variable holding the API key (default: {defaults.api_key_env})")
    parser.add_argument(f"--{prefix}-concurrency", type=int, metavar="N",
                        help=f"requests in flight at most; starts at {defaults.start_concurrency} and adapts "
                        f"(default: {defaults.max_concurrency})")
    parser.add_argument(f"--{prefix}-max-tokens", type=int, metavar="N",
                        help="completion tokens per request (default: the role's own budget)")
    parser.add_argument(f"--{prefix}-timeout", type=float, metavar="SECONDS",
                        help=f"seconds per request before it is retried (default: {defaults.timeout_s:g})")
    parser.add_argument(f"--{prefix}-tool-choice", choices=["auto", "required", "none"],
                        help="sent with tool declarations (some servers only return tool_calls when it is set)")


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
    except ValidationError as error:
        raise UserError(config_error_line(error, f"--{prefix}-* settings")) from None
    if role.offline:
        return None
    if not role.model:
        raise UserError(f"--{prefix}-base-url needs --{prefix}-model")
    return role
