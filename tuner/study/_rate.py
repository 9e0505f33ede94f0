"""``[objective] kind = "max_rate"``: per trial, the highest offered rate at which the SLO holds (vLLM's
``auto_tune.sh`` answer, per config), searched on the server the trial already brought up (no restart).

The search starts from the reference's rate (the best trial's highest met rate, else the scenario's own), doubles
while the SLO holds and halves while it misses until it has a bracket, then bisects it (geometrically); at most
``rate_steps`` passes of the scenario. A rate *holds* the SLO unless its verdict is that it missed it
(:attr:`tuner.slo.SloVerdict.holds`, the search's benefit of the doubt). The answer is the bracket ``[highest
held, lowest missed]``.

With a ``floor`` (the best trial's highest met rate, when the study prunes), a miss at or below it ends the search:
the trial's highest rate is then confidently below the best's, and its remaining passes could not change that.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from tuner.bench import BaseBenchmark, ScenarioResult
from tuner.config import Scenario

__all__ = ["RateBracket", "search_rate"]


@dataclass(frozen=True, kw_only=True)
class RateBracket:
    met: float | None
    """The highest rate tried at which the SLO held (None: it held at none)."""
    missed: float | None
    """The lowest rate tried at which it missed, above ``met`` (None: it held at every rate tried)."""
    tried: tuple[tuple[float, bool], ...] = ()
    """Every step: its rate and whether the SLO held."""
    below: float | None = None
    """The ``floor`` the search stopped at: the SLO missed at or below it (None: the search ran its course)."""

    def describe(self) -> str:
        met = f"{self.met:.3g}" if self.met is not None else "none"
        missed = f"{self.missed:.3g}" if self.missed is not None else "not reached"
        return f"max rate [{met}, {missed}] req/s in {len(self.tried)} steps"


def _next_rate(met: float | None, missed: float | None, last: float) -> float:
    if missed is None:
        return last * 2
    if met is None:
        return last / 2
    return math.sqrt(met * missed)


def search_rate(
    bench: BaseBenchmark,
    scenario: Scenario,
    *,
    start: float,
    steps: int,
    floor: float | None = None,
    on_step: Callable[[float, ScenarioResult, bool], None] | None = None,
) -> RateBracket:
    """The bracket of ``scenario``'s highest rate that keeps its SLO, from ``start``, in at most ``steps`` passes
    (fewer when it misses at or below ``floor``: module docstring)."""
    met: float | None = None
    missed: float | None = None
    tried: list[tuple[float, bool]] = []
    rate = start
    for _ in range(steps):
        # The scenario's own name: its arrivals come from the same draws at every rate (common random numbers).
        probe = dataclasses.replace(scenario, rate=rate)
        result = bench.run_scenario(probe)
        ok = (verdict := result.verdict) is not None and verdict.holds
        tried.append((rate, ok))
        if on_step:
            on_step(rate, result, ok)
        if ok:
            met = max(met or 0.0, rate)
        else:
            missed = rate if missed is None else min(missed, rate)
            if floor is not None and missed <= floor:
                return RateBracket(met=met, missed=missed, tried=tuple(tried), below=floor)
        rate = _next_rate(met, missed, rate)
    return RateBracket(met=met, missed=missed, tried=tuple(tried))
