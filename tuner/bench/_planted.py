"""A test hook: a client stall planted in the first measured pass, so that tune runs that pass again.

tune runs a measured pass again when its load generator stalled (:mod:`tuner.bench._alarm`); on a loaded machine
that happens by chance. A test that plants a one-time event in a server during a pass (a stall, a death) must
hold either way, so it runs once with this hook set as well, to take the rerun path on purpose.

``TUNE_TEST_CLIENT_STALL=PATH``, PATH a file holding seconds (``0.5``): the first try of a counted pass (never a
warm-up, never a rerun) that finds PATH claims it (renames it to ``PATH.armed``); the first measured window that
then opens, in this process or in a client process (they inherit the variable), takes that (removes it) and
blocks its event loop for that long, 20 ms in, as a starved core would. The window measures the stall like any
other, so the pass is client-bound when the stall exceeds the bound (10% of a request's latency, at least 50 ms)
and is run again. The file is gone afterwards: a test can tell that the stall was planted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

__all__ = ["CLIENT_STALL_ENV", "arm_client_stall", "plant_client_stall"]

CLIENT_STALL_ENV = "TUNE_TEST_CLIENT_STALL"
#: How far into the window the loop blocks: after the first requests are under way.
_AFTER_S = 0.02


def _armed(path: str) -> str:
    return path + ".armed"


def arm_client_stall() -> None:
    """The first try of a counted pass begins: claim the planted stall for it, if one is waiting."""
    path = os.environ.get(CLIENT_STALL_ENV)
    if path:
        with contextlib.suppress(OSError):  # none waiting (or it was claimed already): nothing to plant
            os.rename(path, _armed(path))


def plant_client_stall(loop: asyncio.AbstractEventLoop) -> None:
    """A measured window opens on ``loop``: block it once, if a stall was armed for this pass."""
    path = os.environ.get(CLIENT_STALL_ENV)
    if not path:
        return
    armed = _armed(path)
    try:
        with open(armed, encoding="utf-8") as f:
            seconds = float(f.read())
        os.remove(armed)  # the first window to remove it stalls: one stall, whatever the number of processes
    except (OSError, ValueError):
        return
    loop.call_later(_AFTER_S, time.sleep, seconds)
