"""The one polling loop: call a check until it gives an answer or the time is up.

Every wait in `tune` (a server becoming ready, a process group exiting, GPU memory draining, a lock coming free)
is this loop with a different check, so the timing rules live in one place: the check runs at least once, even
with a zero timeout; the final check runs at (or just after) the deadline, never long after it; and the clock
and the sleep are injectable, so tests drive a wait without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Every", "wait_until"]

T = TypeVar("T")


def wait_until(
    check: Callable[[float], T | None],
    *,
    timeout: float,
    interval: float,
    on_tick: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T | None:
    """Call ``check(elapsed_seconds)`` until it returns something other than None; return that, or None at the
    timeout. ``on_tick(elapsed)`` runs after each unanswered check (progress lines). ``check`` may raise to end
    the wait early (a process that died will never become ready)."""
    start = clock()
    while True:
        elapsed = clock() - start
        answer = check(elapsed)
        if answer is not None:
            return answer
        if elapsed >= timeout:
            return None
        if on_tick is not None:
            on_tick(elapsed)
        sleep(max(0.0, min(interval, timeout - (clock() - start))))


class Every:
    """Call ``action`` every ``interval`` seconds on a daemon thread, until stopped or it returns False.

    Heartbeats (a running trial's, the target lock's) are this; ``action`` handles its own errors, since a
    missed beat must never take down the work it vouches for.
    """

    def __init__(self, interval: float, action: Callable[[], bool | None], *, name: str) -> None:
        self._interval = interval
        self._action = action
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            if self._action() is False:
                return

    def start(self) -> Every:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def __enter__(self) -> Every:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
