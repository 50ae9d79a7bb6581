"""What a secret is and how text is masked: the rule every record, log line and error message goes through.

A secret is the value of an environment variable whose name says it holds one (`HF_TOKEN`,
`OPENAI_API_KEY`, any `*_KEY`/`*_TOKEN`/`*_SECRET`/... and any variable an LLM role names with
`api_key_env`, see `register_secret_env`), plus whatever follows `Bearer` or an `Authorization` /
`api-key` header in a text, so that a server echoing the request's headers leaks nothing. `scrub` replaces
each with `***`; `SkippedRecord.detail` goes through it here, and `ground.log_scrubbing` applies it to every
log record, traceback, CLI error line and worker output. The names registered with `register_secret_env`
reach worker processes through the environment.
"""

from __future__ import annotations

import functools
import os
import re

MASK = "***"
# a value shorter than this is not treated as a secret: masking "1" or "EMPTY" everywhere would garble text
MIN_SECRET_CHARS = 8
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_named: set[str] = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY"}
# the names `register_secret_env` was given, for child processes (which never see the role configs built here)
SECRET_NAMES_ENV = "HOPSMITH_SECRET_ENV_NAMES"
# header-shaped secrets, whoever echoes them: `Bearer x`, `Authorization: x`, `"api-key": "x"`, hf_/sk- tokens;
# each after a mark that every match of it holds, searched first (a text without it, most skip records'
# details, is not read by the slower pattern)
_PATTERNS = (
    (re.compile(r"(?i)bearer"), re.compile(r"(?i)(\bbearer\s+)[^\s'\",;}\]]+")),
    (re.compile(r"(?i)authorization|api"),
     re.compile(r"(?i)(\b(?:authorization|x-api-key|api[-_]?key)[\"']?\s*[:=]\s*[\"']?)(?!bearer\b)[^\s'\",;}\]]+")),
    (re.compile(r"hf_"), re.compile(r"()\bhf_[A-Za-z0-9]{16,}")),
    (re.compile(r"sk-"), re.compile(r"()\bsk-[A-Za-z0-9_-]{16,}")),
)


def register_secret_env(name: str) -> None:
    """Treat the value of environment variable `name` as a secret (an LLM role's `api_key_env`), here and in
    the processes started from here."""
    _named.add(name)
    os.environ[SECRET_NAMES_ENV] = ",".join(registered_secret_names())


def registered_secret_names() -> list[str]:
    """The names `register_secret_env` was given here or in a parent process: for workers started apart."""
    inherited = set(filter(None, os.environ.get(SECRET_NAMES_ENV, "").split(",")))
    return sorted(_named | inherited)


def secret_values() -> list[str]:
    """The secret values in the environment now, longest first (so a key containing another is masked whole).
    Read again only when the environment or the registered names changed since the last call: every stored
    skip record's detail is scrubbed, and comparing the environment's own mapping (`os.environ._data`, what
    `os.environ` writes through) with a copy costs a fraction of decoding and scanning it."""
    global _last_read
    environment, registered, values = _last_read
    if environment != os.environ._data or registered != _named:
        names = set(registered_secret_names()) | {name for name in os.environ if _secret_name(name)}
        found = {os.environ.get(name, "").strip() for name in names}
        values = sorted((v for v in found if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)
        _last_read = dict(os.environ._data), set(_named), values
    return list(values)


# `secret_values`' last reading: (a copy of the environment's mapping, the registered names, the values)
_last_read: tuple[dict, set[str], list[str]] = ({}, set(), [])


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret; kept, as every record's text is
    scrubbed."""
    return _SECRET_NAME.search(name) is not None


def scrub(text: str, *extra: str | None) -> str:
    """`text` with every known secret (and the `extra` values given) replaced by `***`."""
    if not text:
        return text
    values = secret_values() + [v for v in extra if v and len(v) >= MIN_SECRET_CHARS]
    for value in sorted(set(values), key=len, reverse=True):
        text = text.replace(value, MASK)
    for mark, pattern in _PATTERNS:
        if mark.search(text):
            text = pattern.sub(lambda match: match.group(1) + MASK, text)
    return text
