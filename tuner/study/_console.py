"""What the loop prints: one line per trial and verdict, and a live status line (or periodic lines in a log)."""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any

from tuner.space import Value, format_value

__all__ = ["Console", "describe_params", "fmt_duration", "fmt_values"]


class Console:
    """Progress lines on stderr; a live, rewritten status line when stderr is a terminal."""

    def __init__(self, *, stream: Any = None, live: bool | None = None) -> None:
        self._stream = stream or sys.stderr
        self._live = self._stream.isatty() if live is None else live
        self._last_live = -math.inf
        self._last_key = ""
        self._dirty = False

    def line(self, text: str) -> None:
        if self._dirty:
            self._dirty = False
            self._write("\r\033[K")
        self._write(text + "\n")

    def status(self, text: str) -> None:
        if self._live:
            self._write("\r\033[K  " + text[:150])
            self._dirty = True
            return
        # A log file gets updates of one activity (the text before its first ':') every 15 s at most: enough to
        # see a 6-minute load progress. A new activity (the next scenario's result) is always written.
        now = time.monotonic()
        key = text.split(":", 1)[0]
        if key != self._last_key or now - self._last_live >= 15:
            self._last_live, self._last_key = now, key
            self.line("  " + text)


    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except OSError:
            # The terminal hung up (EIO) or the reader left (EPIPE): the run still has to mark its trial and
            # put the server back, so it goes on without anyone to tell.
            self._stream = open(os.devnull, "w")  # noqa: SIM115 - kept for the console's life
            self._live = False


def fmt_duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def describe_params(params: dict[str, Value]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())


def fmt_values(values: Any) -> str:
    return "/".join(f"{v:.1f}" for v in values if isinstance(v, float) and math.isfinite(v))
