"""Every config of a finite search space: how many there are, and which are left to measure.

A space of a few discrete knobs is small (vLLM's ``num_speculative_tokens`` 1-8 is 8 configs): a study asked for
20 trials there must end after 8 as a normal ending, not spin on duplicates until "the search space looks
exhausted". A float without a ``step`` makes a space infinite; a big space is not counted past ``limit``.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.space._model import Param, SearchSpace, Value

__all__ = ["count_configs", "iter_configs", "param_values"]


def param_values(p: Param) -> list[Value] | None:
    """Every value ``p`` can take, in order (None: a continuous float, which has infinitely many)."""
    if p.kind == "categorical":
        return list(p.choices)
    if p.kind == "bool":
        return [False, True]
    assert p.low is not None and p.high is not None
    if p.kind == "int":
        return list(range(int(p.low), int(p.high) + 1, int(p.step or 1)))
    if p.step is None:
        return None
    n = round((p.high - p.low) / p.step)
    return [float(f"{p.low + i * p.step:.10g}") for i in range(n + 1)]


def iter_configs(space: SearchSpace) -> Iterator[dict[str, Value]]:
    """Every parameter set of the space (active parameters only) that breaks no constraint.

    Raises ValueError for a space with a continuous float (use :func:`count_configs` to ask first).
    """
    grids = {p.name: param_values(p) for p in space.params}
    if any(v is None for v in grids.values()):
        raise ValueError("the space has a continuous parameter: its configs cannot be listed")

    def walk(i: int, params: dict[str, Value]) -> Iterator[dict[str, Value]]:
        if i == len(space.params):
            yield dict(params)
            return
        p = space.params[i]
        if not p.active(params):
            yield from walk(i + 1, params)
            return
        for v in grids[p.name] or ():
            params[p.name] = v
            yield from walk(i + 1, params)
        del params[p.name]

    for params in walk(0, {}):
        if not space.violations(params):
            yield params


def count_configs(space: SearchSpace, *, limit: int = 100_000) -> int | None:
    """How many configs the space holds, or None when it holds more than ``limit`` (or infinitely many)."""
    if any(param_values(p) is None for p in space.params):
        return None
    n = 0
    for _ in iter_configs(space):
        n += 1
        if n > limit:
            return None
    return n
