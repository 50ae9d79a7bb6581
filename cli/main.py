"""`hopsmith` command line: one subcommand per stage, each registered by its own module under `cli/`.

Each module in COMMAND_MODULES exposes `register(subparsers)`, which adds its subcommand and sets
`func(args, beam_args) -> int` as the handler. Arguments the subcommand does not know are Apache Beam
pipeline options (`--runner`, `--direct_num_workers`, ...) and are passed through to the runner.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import importlib
import logging
import signal
import sys
import threading

from ground.errors import UserError
from ground.log_scrubbing import install_log_scrubber, one_line, scrubbed_traceback
from runtime.heap import fewer_young_collections
from schemas.secrets import scrub

COMMAND_MODULES = (
    "cli.extract",
    "cli.graph_stats",
    "cli.walk",
    "cli.questions",
    "cli.question_report",
    "cli.census",
    "cli.index",
    "cli.trajectories",
    "cli.eval",
    "cli.export_benchmark",
    "cli.dataset",
    "cli.validate",
    "cli.publish",
    "cli.judge",
    "cli.critic_report",
    "cli.rl",
)


def command_modules(argv: list[str] | None = None) -> tuple[str, ...]:
    """The module of the command `argv` names (its first word that is not an option), when one does: each
    module imports its stage, and importing all of them cost a second of every command's start-up; every
    module when none is named (`--help`, a mistyped command), so that argparse lists them all."""
    words = [word for word in (sys.argv[1:] if argv is None else argv) if not word.startswith("-")]
    named = [m for m in COMMAND_MODULES if words and m.rpartition(".")[2].replace("_", "-") == words[0]]
    return tuple(named) or COMMAND_MODULES


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hopsmith",
        description="Deep-search data synthesis from a Wikipedia snapshot. Unknown --options of a stage "
        "are passed to Apache Beam (e.g. --runner DataflowRunner, --direct_num_workers 2).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument(
        "--debug", action="store_true", help="on an unexpected error, print its full traceback (secrets masked)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in command_modules(argv):
        importlib.import_module(module_name).register(subparsers)
    return parser


def configure_logging(verbose: bool) -> None:
    """Log at WARNING (INFO with -v). The level is set on the handler too, because some libraries (bm25s)
    set their own loggers to DEBUG when imported."""
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    for handler in logging.getLogger().handlers:
        handler.setLevel(level)
    install_log_scrubber()
    for handler in logging.getLogger().handlers:
        handler.addFilter(_drop_interrupt_reports)


def _drop_interrupt_reports(record: logging.LogRecord) -> bool:
    """Ctrl-C is reported once, by `main`: Beam's own error log of the interrupted DoFn (with its traceback)
    is dropped."""
    interrupted = record.exc_info is not None and isinstance(record.exc_info[1], KeyboardInterrupt)
    return not (interrupted or str(record.msg).startswith("KeyboardInterrupt"))


def _interrupted(error: BaseException | None) -> bool:
    """Whether Ctrl-C caused `error`: Beam re-raises a KeyboardInterrupt in a DoFn as a RuntimeError whose
    message starts with `KeyboardInterrupt`, sometimes without chaining it."""
    while error is not None:
        if isinstance(error, KeyboardInterrupt) or str(error).startswith("KeyboardInterrupt"):
            return True
        error = error.__cause__ or error.__context__
    return False


class InsistentInterrupt:
    """Ctrl-C that cannot be lost: after the first SIGINT, KeyboardInterrupt is raised again every second
    until `main` has handled it.

    Python swallows an exception raised while it runs a weakref callback or `__del__` ("Exception ignored
    in ...", with a traceback), so one Ctrl-C landing there would let the run go on to the end; such a
    swallowed KeyboardInterrupt is not printed either, since it is raised again. A SIGINT that was ignored
    when hopsmith started (`nohup`, a background job) stays ignored. Inside `deferred` a Ctrl-C is only
    noted, and raised when the block ends.
    """

    def __init__(self, every_s: float = 1.0):
        self.every_s = every_s
        self.received = False
        self._deferring = False
        self._handled = threading.Event()
        self._reminding = threading.Lock()  # "not handled yet, so remind" happens whole or not at all
        self._previous = None
        self._previous_hook = sys.unraisablehook

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._previous_hook, sys.unraisablehook = sys.unraisablehook, self._on_unraisable

    def handled(self) -> None:
        """From here on no reminder is sent. One already sent may still be pending: it can land inside
        this call (it is caught and this call is retried), and `uninstall`'s `signal.signal` runs any still
        pending through this handler, which ignores it, before giving SIGINT back."""
        while not self._handled.is_set():
            try:
                with self._reminding:
                    self._handled.set()
            except KeyboardInterrupt:
                continue

    def uninstall(self) -> None:
        """Stop insisting and give SIGINT back to whoever had it (an embedding program, pytest)."""
        self.handled()
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            sys.unraisablehook = self._previous_hook

    @contextlib.contextmanager
    def deferred(self):
        """Hold a Ctrl-C until the block ends, then raise it: for imports. A KeyboardInterrupt inside an
        extension module's initialisation leaves it half made (matplotlib's pybind11 `ft2font` while the
        dataset command imported its stage), and the interpreter then aborted at exit ("Fatal Python error:
        PyThreadState_Get") instead of exiting 130."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self.received:
            raise KeyboardInterrupt

    def _on_unraisable(self, unraisable) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            self._previous_hook(unraisable)

    def _on_sigint(self, signum, frame) -> None:
        if self._handled.is_set():
            return
        if not self.received:
            self.received = True
            threading.Thread(target=self._insist, name="hopsmith-interrupt", daemon=True).start()
        if not self._deferring:
            raise KeyboardInterrupt

    def _insist(self) -> None:
        while not self._handled.wait(self.every_s):
            self._remind()

    def _remind(self) -> None:
        """Interrupt the main thread unless it has handled the interrupt: a reminder sent after `handled`
        would run after `uninstall` under the restored handler and kill the process by SIGINT."""
        with self._reminding:
            if not self._handled.is_set():
                _thread.interrupt_main(signal.SIGINT)


def _config_error(error: BaseException) -> str | None:
    """One line for a stage config a command built from its flags that is out of range, else None (pydantic
    is imported only once it is already loaded: the Ctrl-C handler comes first)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(error, pydantic.ValidationError):
        return None
    from schemas.config import config_error_line

    return config_error_line(error)


def _forget_caught_interrupt() -> None:
    """CPython marks a KeyboardInterrupt that leaves any `exec` of source text (dataclasses builds every
    `__init__` that way while Beam imports) as unhandled, even when `main` catches it later; at exit the
    interpreter then kills itself by SIGINT instead of exiting 130. Running source text clears that mark."""
    exec("")  # noqa: S102 - a constant empty string


def _stop_beam_samplers() -> None:
    """Stop the Beam state samplers a Ctrl-C left running. A sampler samples on a thread that is no daemon,
    stopped when its bundle ends; a bundle interrupted before that leaves the thread running, and the
    interpreter then waits for it at exit for ever (CI: the dataset command interrupted in its walk stage
    printed its line and never exited). Beam is looked up only where it was imported."""
    samplers = sys.modules.get("apache_beam.runners.worker.statesampler")
    if samplers is None:
        return
    for thread in threading.enumerate():
        owner = getattr(getattr(thread, "_target", None), "__self__", None)
        if isinstance(owner, samplers.StateSampler):
            owner.stop_if_still_running()


def _report_interrupt(interrupt: InsistentInterrupt) -> int:
    interrupt.handled()
    _forget_caught_interrupt()
    _stop_beam_samplers()
    print("hopsmith: interrupted; rerun the same command to resume", file=sys.stderr)
    return 130


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    interrupt = InsistentInterrupt()
    interrupt.install()
    try:
        # Importing Beam warns on the root logger about optional GCP clients; only errors matter until the
        # user's verbosity is known.
        logging.basicConfig(level=logging.ERROR, force=True)
        with interrupt.deferred():  # the command's module imports its stage, Beam and their extensions
            parser = build_parser(argv)
        args, beam_args = parser.parse_known_args(argv)
        beam_args = [a for a in beam_args if a != "--debug"]  # also accepted after the subcommand
        configure_logging(args.verbose)
        # a stage's records hold no cycles: collecting every 700 allocations scanned them for nothing (a third
        # of the judge's and of the dataset stage's reading of records on the sample)
        with fewer_young_collections():
            status = int(args.func(args, beam_args) or 0)
        if interrupt.received:  # the KeyboardInterrupt was swallowed and the work went on: still honour it
            return _report_interrupt(interrupt)
        return status
    except UserError as error:
        print(f"hopsmith: error: {scrub(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # also while Beam or the command modules are still importing
        return _report_interrupt(interrupt)
    except Exception as error:  # noqa: BLE001 - the last resort: one scrubbed line instead of a raw traceback
        if _interrupted(error) or interrupt.received:
            return _report_interrupt(interrupt)
        if (line := _config_error(error)) is not None:
            print(f"hopsmith: error: {scrub(line)}", file=sys.stderr)
            return 2
        if debug:
            print(scrubbed_traceback(error), file=sys.stderr, end="")
        hint = "" if debug else " (rerun with --debug for the traceback)"
        print(f"hopsmith: unexpected error: {one_line(error)}{hint}", file=sys.stderr)
        return 1
    finally:
        interrupt.uninstall()


if __name__ == "__main__":
    sys.exit(main())
