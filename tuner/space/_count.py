from __future__ import annotations

import math
from collections.abc import Iterator

from tuner.space._model import Param, SearchSpace, Value

__all__ = ["count_configs"]


def _values(p: Param) -> list[Value] | None:
    """Every value ``p`` can take, or None for a continuous range (no step)."""
    if p.kind == "categorical":
        return list(p.choices)
    if p.kind == "bool":
        return [False, True]
    assert p.low is not None and p.high is not None
    if p.kind == "int":
        return list(range(int(p.low), int(p.high) + 1, int(p.step or 1)))
    if p.step is None:
        return None
    n = math.floor((p.high - p.low) / p.step + 1e-9)
    return [float(f"{p.low + i * p.step:.10g}") for i in range(n + 1)]


def _configs(space: SearchSpace, index: int, params: dict[str, Value]) -> Iterator[dict[str, Value]]:
    if index == len(space.params):
        yield params
        return
    p = space.params[index]
    if not p.active(params):
        yield from _configs(space, index + 1, params)
        return
    for value in _values(p) or ():
        yield from _configs(space, index + 1, {**params, p.name: value})


def count_configs(space: SearchSpace, *, stop_at: int) -> int | None:
    """How many distinct configurations the space holds (conditions and constraints applied), counting no
    further than ``stop_at``; None when a parameter is continuous (a float range without a step)."""
    if any(_values(p) is None for p in space.params):
        return None
    count = 0
    for params in _configs(space, 0, {}):
        if not space.violations(params):
            count += 1
            if count >= stop_at:
                break
    return count
