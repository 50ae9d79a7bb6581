"""Secret-free output: log records, tracebacks, the CLI's error lines and worker processes' stdout/stderr, each
masked by `schemas.secrets.scrub` before anything writes it."""

from __future__ import annotations

import io
import logging
import sys
import traceback

from schemas.secrets import scrub


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
