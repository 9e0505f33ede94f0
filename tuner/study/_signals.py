"""Ctrl-C, SIGTERM and SIGHUP stop a run the same way, and always stop it.

A Python signal handler that raises lands wherever the main thread happens to be. Two places turned out to
break the run instead of stopping it:

- inside a database session (Optuna's, or the fleet's claims): the session is left mid-transaction on a stale
  snapshot, and the run's own "mark the trial FAIL" write then fails as "database is locked" (SQLite WAL
  refuses to upgrade a stale read), so the stop is reported as a storage fault;
- inside a weakref callback or a ``__del__`` run by the garbage collector: Python prints "Exception ignored"
  and drops the exception, so the stop is lost and the run goes on to its last trial.

:func:`stop_signals` therefore defers a signal that arrives while the main thread holds a database connection
(:func:`defer_during_connections` hooks each engine's pool checkout/checkin) and raises it once the connection
is back in the pool, and re-raises a stop that Python swallowed (``sys.unraisablehook``). A signal that comes
while an event loop runs (the benchmark's ``asyncio.run``) is raised from one of the loop's callbacks rather than
inside whichever task was running, so every task of the trial is cancelled and awaited by ``asyncio.run``. Either
way the loop sees exactly one :class:`Stop` (a ``KeyboardInterrupt``) per signal, at a point where the storage is
sound and no task is left holding it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from sqlalchemy import event

__all__ = ["MAX_DEFER_S", "Stop", "defer_during_connections", "stop_signals"]

MAX_DEFER_S = 10.0
"""A connection held longer than this (a leak, a stuck driver) no longer delays the stop."""

_REDELIVER_AFTER_S = 0.05  # lets the pool finish returning the connection before the stop lands


class Stop(KeyboardInterrupt):
    """The stop a signal asked for, raised in the main thread."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


class _Guard:
    """The main thread's open database connections, and the signal waiting for them to close.

    At most one re-delivery is scheduled at a time, so a deferred signal stops the run once, never twice.
    """

    def __init__(self) -> None:
        self.active = False
        self.held: set[int] = set()
        self.pending: int | None = None
        self.deferred_since = 0.0
        self.in_hook = False
        self._timer: threading.Timer | None = None
        self._lock = threading.RLock()  # the handler may run while the main thread holds it

    def checkout(self, record: object) -> None:
        if threading.current_thread() is threading.main_thread():
            self.held.add(id(record))

    def checkin(self, record: object) -> None:
        # From any thread: a connection the main thread dropped unclosed is checked in by whichever thread runs
        # the garbage collector.
        self.held.discard(id(record))
        if not self.held and self.pending is not None:
            self._redeliver(after_s=_REDELIVER_AFTER_S)

    def handler(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if (self.held or self.in_hook) and (self.pending is None or now - self.deferred_since < MAX_DEFER_S):
            if self.pending is None:
                self.deferred_since = now
            self.pending = signum
            # Out of the hook it is a moment; a connection gets until the deferral's end, when checkin is late.
            wait = _REDELIVER_AFTER_S if self.in_hook else MAX_DEFER_S - (now - self.deferred_since)
            self._redeliver(after_s=wait)
            return
        self.pending = None
        self._cancel()
        loop = _running_loop()
        if loop is not None:
            self._stop_loop(loop, signum, now)
            return
        raise Stop(signum)

    def _stop_loop(self, loop: asyncio.AbstractEventLoop, signum: int, now: float) -> None:
        """Raise the stop from a callback of the running event loop, never inside one of its tasks: a task that
        ended in the stop would keep it ("Task exception was never retrieved"), while a callback's stop leaves
        every task to ``asyncio.run``, which cancels and awaits them all. Should the loop end before it runs the
        callback, the signal is delivered again, to the code after it."""
        self.pending, self.deferred_since = signum, now

        def stop() -> None:
            with self._lock:
                if self.pending != signum or not self.active:
                    return  # stopped already, by an earlier callback or the redelivered signal
                self.pending = None
                self._cancel_locked()
            raise Stop(signum)

        loop.call_soon_threadsafe(stop)
        self._redeliver(after_s=_REDELIVER_AFTER_S * 4)

    def unraisable(self, previous: Any, unraisable: Any) -> None:
        if not (isinstance(unraisable.exc_value, Stop) and self.active):
            previous(unraisable)
            return
        # The garbage collector ran a finaliser at the moment the signal arrived and dropped the stop. A stop
        # raised in this hook would be dropped too, so the handler waits until it has returned.
        self.in_hook = True
        try:
            if self.pending is None:
                self.deferred_since = time.monotonic()
            self.pending = unraisable.exc_value.signum
            self._redeliver(after_s=_REDELIVER_AFTER_S)
        finally:
            self.in_hook = False

    def reset(self, *, active: bool) -> None:
        self._cancel()
        self.active, self.pending = active, None

    def _redeliver(self, *, after_s: float) -> None:
        def send() -> None:
            with self._lock:
                if self._timer is not timer:
                    return
                self._timer = None
                signum = self.pending if self.active else None
            if signum is not None:
                os.kill(os.getpid(), signum)

        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            timer = self._timer = threading.Timer(max(after_s, 0.0), send)
        timer.daemon = True
        timer.start()

    def _cancel(self) -> None:
        with self._lock:
            self._cancel_locked()

    def _cancel_locked(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None


_guard = _Guard()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this (the main) thread, if any: a benchmark's ``asyncio.run``."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def defer_during_connections(engine: Any) -> None:
    """Hold a stop back while the main thread uses one of ``engine``'s connections (see the module doc)."""
    event.listen(engine, "checkout", lambda _conn, record, _proxy: _guard.checkout(record))
    event.listen(engine, "checkin", lambda _conn, record: _guard.checkin(record))


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP (the SSH session running tune dropped) raise :class:`Stop`
    in the main thread: the loop marks the trial and puts the server back. Elsewhere than the main thread
    (tests driving a run from a thread) signals are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _guard.handler) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    previous_hook = sys.unraisablehook
    sys.unraisablehook = lambda u: _guard.unraisable(previous_hook, u)
    _guard.reset(active=True)
    try:
        yield
        late = _guard.pending
    finally:
        _guard.reset(active=False)
        sys.unraisablehook = previous_hook
        for sig, old in previous.items():
            signal.signal(sig, old)
    if late is not None:  # deferred past the block's end (its last storage write): still a stop, not lost
        raise Stop(late)
