"""The one place that keeps secrets out of text hopsmith prints, logs or stores.

A secret is the value of an environment variable whose name says it holds one (`HF_TOKEN`,
`OPENAI_API_KEY`, any `*_KEY`/`*_TOKEN`/`*_SECRET`/... and any variable an LLM role names with
`api_key_env`, see `register_secret_env`), plus whatever follows `Bearer` or an `Authorization` /
`api-key` header in a text, so that a server echoing the request's headers leaks nothing. `scrub` replaces
each with `***`; `ScrubLogs` applies it to every log record, its traceback included; `SkippedRecord.detail`
and the CLI's error lines go through it. Worker processes (Beam's multi-processing workers) get the same
scrubbing from `scrub_process_output`: every log record scrubbed when it is created, and stdout/stderr
scrubbed line by line; the names registered with `register_secret_env` reach them through the environment.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import traceback

MASK = "***"
# a value shorter than this is not treated as a secret: masking "1" or "EMPTY" everywhere would garble text
MIN_SECRET_CHARS = 8
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_named: set[str] = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY"}
# the names `register_secret_env` was given, for child processes (which never see the role configs built here)
SECRET_NAMES_ENV = "HOPSMITH_SECRET_ENV_NAMES"
# header-shaped secrets, whoever echoes them: `Bearer x`, `Authorization: x`, `"api-key": "x"`, hf_/sk- tokens
_PATTERNS = (
    re.compile(r"(?i)(\bbearer\s+)[^\s'\",;}\]]+"),
    re.compile(r"(?i)(\b(?:authorization|x-api-key|api[-_]?key)[\"']?\s*[:=]\s*[\"']?)(?!bearer\b)[^\s'\",;}\]]+"),
    re.compile(r"()\bhf_[A-Za-z0-9]{16,}"),
    re.compile(r"()\bsk-[A-Za-z0-9_-]{16,}"),
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
    """The secret values in the environment now, longest first (so a key containing another is masked whole)."""
    names = set(registered_secret_names()) | {name for name in os.environ if _SECRET_NAME.search(name)}
    values = {os.environ.get(name, "").strip() for name in names}
    return sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


def scrub(text: str, *extra: str | None) -> str:
    """`text` with every known secret (and the `extra` values given) replaced by `***`."""
    if not text:
        return text
    values = secret_values() + [v for v in extra if v and len(v) >= MIN_SECRET_CHARS]
    for value in sorted(set(values), key=len, reverse=True):
        text = text.replace(value, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda match: match.group(1) + MASK, text)
    return text


def scrubbed_traceback(error: BaseException) -> str:
    """The full (chained) traceback of `error`, scrubbed: what `--debug` prints."""
    return scrub("".join(traceback.format_exception(error)))


def one_line(error: BaseException) -> str:
    """`Type: first line of the message`, scrubbed: what the CLI prints for an unexpected error."""
    message = scrub(str(error)).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


class ScrubLogs(logging.Filter):
    """Masks secrets in a log record's message, arguments, traceback and stack before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a format string its arguments do not fit: shown, not raised into the caller
            message = f"{record.msg!r} (arguments that do not fit it: {record.args!r})"
        record.msg, record.args = scrub(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


def install_log_scrubber(logger: logging.Logger | None = None) -> None:
    """Put one `ScrubLogs` on every handler of `logger` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubLogs) for f in handler.filters):
            handler.addFilter(ScrubLogs())


def _scrubbed_record_factory(make_record):
    scrubber = ScrubLogs()

    def make_scrubbed(*args, **kwargs) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        scrubber.filter(record)
        return record

    make_scrubbed.scrubs = True
    return make_scrubbed


class ScrubbedLines(io.TextIOBase):
    """A text stream that writes whole lines to `target`, each scrubbed (a secret split over two `write`
    calls is masked too); what is left without a newline goes out on `flush`."""

    def __init__(self, target):
        self.target, self._pending = target, ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            lines, _, self._pending = self._pending.rpartition("\n")
            self.target.write(scrub(lines + "\n"))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.target.write(scrub(self._pending))
            self._pending = ""
        self.target.flush()

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return self.target.isatty()

    @property
    def encoding(self) -> str:
        return self.target.encoding


def scrub_process_output() -> None:
    """Scrub everything this process logs or prints through Python: each log record as it is created
    (whatever handler writes it, including those a library adds later), and stdout/stderr line by line.
    For processes whose log handlers hopsmith does not set up (Beam's SDK workers)."""
    factory = logging.getLogRecordFactory()
    if not getattr(factory, "scrubs", False):
        logging.setLogRecordFactory(_scrubbed_record_factory(factory))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ScrubbedLines):
            setattr(sys, name, ScrubbedLines(stream))
