"""The `hopsmith` entry point as a user meets it: one clear line for a user error, no import noise."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _hopsmith(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_missing_input_is_one_error_line_and_exit_2(tmp_path):
    result = _hopsmith("extract", "--dump", str(tmp_path / "missing.xml.bz2"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"hopsmith: error: dump file not found: {tmp_path / 'missing.xml.bz2'}"]
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_help_lists_every_stage_without_library_noise():
    result = _hopsmith("--help")
    assert result.returncode == 0 and result.stderr == ""
    for command in ("extract", "graph-stats", "walk", "questions", "index", "trajectories", "judge",
                    "critic-report", "dataset", "validate", "publish", "rl"):
        assert f"    {command}" in result.stdout


def test_library_debug_logs_stay_quiet_at_the_default_level(capsys):
    import logging

    from cli.main import configure_logging

    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        configure_logging(verbose=False)
        chatty = logging.getLogger("a_library_that_sets_debug")
        chatty.setLevel(logging.DEBUG)
        chatty.debug("building index")
        chatty.warning("worth seeing")
        err = capsys.readouterr().err
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
    assert "building index" not in err and "worth seeing" in err


def test_as_of_accepts_a_date_or_a_timestamp():
    import argparse
    import datetime as dt

    import pytest

    from cli.extract import parse_as_of

    assert parse_as_of("2026-10-28") == dt.datetime(2026, 10, 28, tzinfo=dt.UTC)
    assert parse_as_of("2026-10-28T12:00:00Z") == dt.datetime(2026, 10, 28, 12, tzinfo=dt.UTC)
    assert parse_as_of("2026-10-28T12:00:00") == dt.datetime(2026, 10, 28, 12, tzinfo=dt.UTC)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_as_of("yesterday")


def test_a_named_command_imports_only_its_own_module():
    """`hopsmith extract ...` registers (and imports) cli.extract alone; no command named, every one. Each
    module's command is found by its name (the module's, with '-' for '_'), so none is loaded for nothing."""
    import argparse

    from cli.main import COMMAND_MODULES, build_parser, command_modules

    assert command_modules(["-v", "extract", "--dump", "x.xml.bz2"]) == ("cli.extract",)
    assert command_modules(["--help"]) == command_modules(["no-such-command"]) == COMMAND_MODULES
    for module in COMMAND_MODULES:
        name = module.rpartition(".")[2].replace("_", "-")
        assert command_modules([name]) == (module,)
        subparsers = next(action for action in build_parser([name])._actions
                          if isinstance(action, argparse._SubParsersAction))
        assert list(subparsers.choices) == [name]
