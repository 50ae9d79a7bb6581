"""Ctrl-C on a real `hopsmith dataset`: one line, exit status 130, whatever the run was doing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest

from cli.main import InsistentInterrupt
from tests.conftest import copy_stages
from tests.processes import restore_sigint

REPO = Path(__file__).resolve().parent.parent
TABLE_CHARS = set("│┃━─┏┓┗┛┡┩└┘├┤┼╇")


def test_the_cli_installs_its_interrupt_handler_before_any_heavy_import():
    """`cli.main` loads only the standard library and the project's light modules before `main` installs
    the Ctrl-C handler: a package `__init__` that pulls in pydantic or Beam would leave the first 0.3 s of
    every run (the while-importing case below) to Python's default handler."""
    probe = "import sys, cli.main; print(sorted(m for m in ('pydantic', 'apache_beam', 'pyarrow') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


@pytest.mark.parametrize(
    ("marker", "delay_s"),
    [(None, 0.3), ("graph/.pending-key", 2.0), ("questions/.pending-key", 0.5)],
    ids=["while-importing", "in-extract", "in-questions"],
)
def test_ctrl_c_prints_one_line_and_exits_130(tmp_path, marker, delay_s, request):
    out = tmp_path / "out"
    if marker is not None and marker.startswith("questions/"):  # the stages before it as finished by an earlier run
        copy_stages(request.getfixturevalue("sample_stages"), out)
    # its own process group, signalled as a whole: what a terminal does on Ctrl-C
    run = subprocess.Popen([sys.executable, "-m", "cli.main", "dataset", "--out", str(out)], cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=restore_sigint)
    try:
        deadline = time.monotonic() + 600
        while marker is not None and not (out / marker).exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(delay_s)
        os.killpg(run.pid, signal.SIGINT)
        _, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    text = [line for line in err.splitlines() if line.strip() and not set(line) & TABLE_CHARS]
    assert "Traceback" not in err
    assert text[-1] == "hopsmith: interrupted; rerun the same command to resume", err
    assert sum("hopsmith:" in line for line in text) == 1


def _sigint_inside_callback(_ref) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    sum(range(10_000))  # the handler runs here, inside a weakref callback, where Python swallows its exception


def test_a_ctrl_c_swallowed_by_a_weakref_callback_is_raised_again():
    """What the in-questions run showed: one Ctrl-C landed in a WeakSet callback and the run went on."""
    # SIGINT as an interactive shell hands it over, whatever the test runner was started with (a background
    # job inherits it ignored, and then hopsmith rightly leaves it ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    hook_before = sys.unraisablehook
    interrupt = InsistentInterrupt(every_s=0.05)
    interrupt.install()
    finished = False
    try:
        with pytest.raises(KeyboardInterrupt):
            payload = type("Payload", (), {})()
            ref = weakref.ref(payload, _sigint_inside_callback)
            del payload  # the callback runs now
            assert ref() is None
            for _ in range(100):
                time.sleep(0.02)
            finished = True
    finally:
        interrupt.uninstall()
        given_back = signal.signal(signal.SIGINT, outer)
    assert interrupt.received and not finished
    assert given_back is signal.default_int_handler and sys.unraisablehook is hook_before


def test_a_ctrl_c_inside_deferred_is_held_and_raised_when_the_block_ends():
    """The command's imports run `deferred`: a KeyboardInterrupt inside an extension module's initialisation
    (matplotlib's pybind11 `ft2font`) left it half made, and the interpreter aborted at exit instead of
    exiting 130. The Ctrl-C and its reminders are held until the block ends."""
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupt = InsistentInterrupt(every_s=0.05)
    interrupt.install()
    finished = False
    try:
        with pytest.raises(KeyboardInterrupt), interrupt.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10):  # the handler and two or three reminders run here, and raise nothing
                time.sleep(0.02)
            finished = True
    finally:
        interrupt.uninstall()
        signal.signal(signal.SIGINT, outer)
    assert interrupt.received and finished


def test_a_reminder_sent_after_the_interrupt_was_handled_does_nothing():
    """The insisting thread may wake just before `main` handles the interrupt: a reminder it sends after
    `uninstall` has given SIGINT back must not kill the process by SIGINT."""
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupt = InsistentInterrupt(every_s=60)
    interrupt.install()
    try:
        interrupt.handled()
    finally:
        interrupt.uninstall()
    try:
        interrupt._remind()  # what the insisting thread does when it wakes
        sum(range(10_000))  # a reminder would be raised here, under the restored handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_a_ctrl_c_caught_after_leaving_an_exec_of_source_text_still_exits_130(tmp_path):
    """The while-importing run's rare death by SIGINT (exit -2 after its one line): the KeyboardInterrupt
    left a dataclass's generated `__init__` source (`exec` of text), which CPython marks as unhandled even
    though `main` caught it, and at the exit of a `python -m` run the interpreter killed itself by SIGINT."""
    (tmp_path / "ctrl_c_in_exec.py").write_text(
        "import sys, cli.main as cli\n"
        "cli.build_parser = lambda argv: exec('raise KeyboardInterrupt')\n"
        "sys.exit(cli.main(['dataset']))\n")
    run = subprocess.run([sys.executable, "-m", "ctrl_c_in_exec"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"}, timeout=60,
                         preexec_fn=restore_sigint)
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip() == "hopsmith: interrupted; rerun the same command to resume"


def test_a_ctrl_c_that_stops_a_beam_bundle_before_its_sampler_still_exits_130(tmp_path):
    """CI: `hopsmith dataset` interrupted in its walk stage printed its line and never exited. The Ctrl-C
    stopped a Beam bundle before its state sampler's `stop`, and the sampler's thread, which is no daemon,
    kept the interpreter waiting at exit. Here the command starts a sampler and is interrupted."""
    (tmp_path / "ctrl_c_in_bundle.py").write_text(
        "import argparse, sys, cli.main as cli\n"
        "def bundle(args, beam_args):\n"
        "    from apache_beam.runners.worker.statesampler import StateSampler\n"
        "    StateSampler('bundle', None).start()\n"
        "    raise KeyboardInterrupt\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.set_defaults(func=bundle, verbose=0)\n"
        "cli.build_parser = lambda argv: parser\n"
        "sys.exit(cli.main([]))\n")
    run = subprocess.run([sys.executable, "ctrl_c_in_bundle.py"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, preexec_fn=restore_sigint)
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "hopsmith: interrupted; rerun the same command to resume"
