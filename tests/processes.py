"""Starting real hopsmith processes that a test will interrupt."""

from __future__ import annotations

import signal


def restore_sigint() -> None:
    """`preexec_fn` for a child the test sends SIGINT: give it SIGINT's default disposition.

    A shell without job control starts background jobs with SIGINT ignored, children inherit that, and a
    Python started with SIGINT ignored never raises KeyboardInterrupt. A Ctrl-C test must not depend on
    how the test runner itself was launched.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
