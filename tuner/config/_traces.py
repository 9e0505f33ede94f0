"""Arrival traces: ``[[benchmark.scenarios]] trace = "FILE.jsonl"`` replays recorded arrivals and lengths.

One request per line, in any order (they are sorted by time)::

    {"timestamp": 0.0, "input_length": 512, "output_length": 128}
    {"timestamp": 0.41, "messages": [{"role": "user", "content": "..."}], "output_length": 200}

``timestamp`` is seconds (any origin: the first request is sent at the start of the window); each line has
either ``input_length`` (prompt tokens, random words as ``prompts = "random"`` builds them) or a chat
``messages`` list. ``output_length`` caps the answer; a line without it takes the scenario's ``output_tokens``.
``trace_speed`` divides the offsets: 2.0 replays the trace twice as fast.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tuner.config._workloads import read_jsonl
from tuner.errors import ConfigError

__all__ = ["TraceRequest", "load_trace"]


@dataclass(frozen=True, kw_only=True)
class TraceRequest:
    """One line of a trace: when it arrives (seconds from the trace's first arrival) and what it asks."""

    offset_s: float
    input_length: int | None = None
    output_length: int | None = None
    messages: tuple[tuple[str, str], ...] | None = None


def _length(row: dict[str, object], key: str, *, path: Path, number: int) -> int | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(file=path, key=f"line {number}: {key}", expected="a whole number of tokens >= 1", got=value)
    return value


def _messages(row: dict[str, object], *, path: Path, number: int) -> tuple[tuple[str, str], ...] | None:
    turns = row.get("messages")
    if turns is None:
        return None
    ok = isinstance(turns, list) and turns and all(
        isinstance(t, dict) and isinstance(t.get("role"), str) and isinstance(t.get("content"), str) for t in turns
    )
    if not ok:
        raise ConfigError(
            file=path, key=f"line {number}: messages", expected='a list of {"role": ..., "content": ...} turns'
        )
    assert isinstance(turns, list)
    return tuple((str(t["role"]), str(t["content"])) for t in turns)


def _request(row: object, *, path: Path, number: int) -> tuple[float, TraceRequest]:
    if not isinstance(row, dict):
        raise ConfigError(file=path, key=f"line {number}", expected="a JSON object per line")
    stamp = row.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or stamp < 0:
        raise ConfigError(file=path, key=f"line {number}: timestamp", expected="a number of seconds >= 0", got=stamp)
    messages = _messages(row, path=path, number=number)
    input_length = _length(row, "input_length", path=path, number=number)
    if (messages is None) == (input_length is None):
        raise ConfigError(
            file=path, key=f"line {number}", expected='either "input_length" or "messages" (exactly one of them)'
        )
    output = _length(row, "output_length", path=path, number=number)
    return float(stamp), TraceRequest(offset_s=0.0, input_length=input_length, output_length=output, messages=messages)


@cache
def load_trace(path: str) -> tuple[TraceRequest, ...]:
    """The trace at ``path`` sorted by arrival, offsets from its first arrival; ConfigError for a bad file."""
    file = Path(path)
    rows = [_request(row, path=file, number=number) for number, row in read_jsonl(file, "request")]
    rows.sort(key=lambda r: r[0])
    first = rows[0][0]
    return tuple(dataclasses.replace(r, offset_s=t - first) for t, r in rows)
