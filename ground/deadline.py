"""A page's time budget: one page that makes a parser spin must cost a counted skip, not the run.

`Deadline.alarm` interrupts the block when the time is up: SIGALRM in the main thread, a per-process
watchdog thread elsewhere (threads cannot receive signals); `Deadline.check` is the cooperative form.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import signal
import threading
import time
from collections.abc import Iterator


class PageTimeout(Exception):
    pass


def _set_async_exception(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise `exception` in another thread at its next bytecode (None clears a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception is not None else None)


class _ThreadWatchdog:
    """One daemon thread per process that interrupts threads whose page deadline passed (threads cannot
    receive SIGALRM). `arm` registers the calling thread; `disarm` removes it and clears an exception that
    fired but was not yet raised, so it can never escape the page it was meant for. Until disarmed, a late
    thread is interrupted again every _REFIRE_S seconds."""

    def __init__(self):
        self._wake = threading.Condition()
        self._armed: dict[int, tuple[float, int, type[PageTimeout]]] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        self._sleeps_until = float("inf")  # when the watchdog wakes next: a later deadline need not wake it
        self._fired: set[int] = set()

    def arm(self, expires: float, exception: type[PageTimeout]) -> int:
        with self._wake:
            token = next(self._tokens)
            self._armed[token] = (expires, threading.get_ident(), exception)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="hopsmith-page-watchdog", daemon=True)
                self._thread.start()
            if expires < self._sleeps_until:
                self._wake.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._wake:  # under the lock, so the watchdog cannot fire again between these lines
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                _set_async_exception(threading.get_ident(), None)

    def _run(self) -> None:
        with self._wake:
            while True:
                now = time.monotonic()
                for token in [t for t, (expires, _, _) in self._armed.items() if expires <= now]:
                    _, thread_id, exception = self._armed[token]
                    _set_async_exception(thread_id, exception)
                    # Raised again until disarmed: one raised inside a weakref callback or __del__ is
                    # printed and swallowed by the interpreter instead of ending the page.
                    self._armed[token] = (now + _REFIRE_S, thread_id, exception)
                    self._fired.add(token)
                upcoming = min((expires for expires, _, _ in self._armed.values()), default=None)
                self._sleeps_until = float("inf") if upcoming is None else upcoming
                self._wake.wait(None if upcoming is None else max(upcoming - now, 1e-3))


_WATCHDOG = _ThreadWatchdog()
_REFIRE_S = 0.05


@functools.cache
def _watchdog_timeout(seconds: float) -> type[PageTimeout]:
    """The exception the watchdog raises (raised by class, so its message is built in)."""
    return type("PageTimeout", (PageTimeout,),
                {"__init__": lambda self: PageTimeout.__init__(self, f"over {seconds:g}s (watchdog)")})


class Deadline:
    """A page's time budget: SIGALRM in the main thread, the watchdog in others, cooperative checks everywhere."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expires = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.expires:
            raise PageTimeout(f"over {self.seconds:g}s")

    @contextlib.contextmanager
    def alarm(self) -> Iterator[None]:
        """Interrupt the block when the time is up: SIGALRM in the main thread, the watchdog elsewhere.
        An interval timer already running (a test runner's own timeout) keeps its deadline: it is re-armed
        with its remaining time afterwards."""
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            token = _WATCHDOG.arm(self.expires, _watchdog_timeout(self.seconds))
            try:
                yield
            finally:
                _WATCHDOG.disarm(token)
            return
        outer_left, outer_interval = signal.getitimer(signal.ITIMER_REAL)
        outer_first = 0 < outer_left < self.seconds
        started = time.monotonic()

        def expire(signum, frame):
            if outer_first and callable(previous):
                previous(signum, frame)
            raise PageTimeout(f"over {self.seconds:g}s (alarm)")

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, outer_left if outer_first else self.seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer_left > 0:
                left = max(outer_left - (time.monotonic() - started), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, left, outer_interval)
