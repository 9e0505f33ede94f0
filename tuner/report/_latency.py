"""Latency percentiles as the views give them, each with its interval where one was recorded: the ``latency``
object of ``tune best``'s rows (which its text prints) and the report's latency table. A bound too few requests
allow is said (``null`` / ``none``), never filled in; a study recorded before the intervals existed shows its
percentiles without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optuna.trial import FrozenTrial

from tuner.metrics import INTERVAL_PERCENTILES, LATENCY_MEASURES, LATENCY_PERCENTILES, interval_key, interval_text
from tuner.trials import record_of

__all__ = ["Percentile", "latency_object", "percentile_figure"]

@dataclass(frozen=True, kw_only=True)
class Percentile:
    """One recorded latency percentile (seconds) and its interval's bounds."""

    point: float
    low: float | None = None
    high: float | None = None
    has_interval: bool = False
    """Whether the bounds were recorded (a None bound then means too few requests for it)."""

    def interval(self) -> list[float | None] | None:
        """``[low, high]`` (None inside: no bound that side; None: no interval recorded)."""
        return [_round(self.low), _round(self.high)] if self.has_interval else None

    def text(self, scale: float = 1.0) -> str:
        """``0.412 [0.398, 0.431]``, ``1.2 [1.1, none]``; the point alone when no interval was recorded."""
        return interval_text(self.point, self.interval(), scale=scale)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def percentile_figure(t: FrozenTrial, scenario: str, key: str) -> Percentile | None:
    """``t``'s percentile ``key`` (a registry key such as ``ttft_p99_s``) in ``scenario`` with its interval
    (None: not measured)."""
    record = record_of(t)
    point = record.number_figure(scenario, key)
    if point is None:
        return None
    low, high = interval_key(key, "low"), interval_key(key, "high")
    return Percentile(
        point=point,
        low=record.number_figure(scenario, low),
        high=record.number_figure(scenario, high),
        has_interval=low in record.scenarios.get(scenario, {}),
    )


def latency_object(t: FrozenTrial, scenario: str, confidence: float) -> dict[str, Any] | None:
    """``tune best --json``'s ``latency`` of one scenario: per measure (``ttft_s``, ``tpot_s``, ``e2e_s``) its
    ``p50``/``p90``/``p99`` and ``p50_interval``/``p99_interval`` as ``[low, high]`` (null inside: no bound
    that side; null: not recorded), all in seconds, with the intervals' ``confidence`` (None: nothing measured)."""
    out: dict[str, Any] = {}
    for measure in LATENCY_MEASURES:
        figures: dict[str, Any] = {}
        for q in LATENCY_PERCENTILES:
            p = percentile_figure(t, scenario, measure.percentile(q))
            if p is None:
                continue
            figures[f"p{q}"] = _round(p.point)
            if q in INTERVAL_PERCENTILES:
                figures[f"p{q}_interval"] = p.interval()
        if figures:
            out[measure.limit] = figures
    return {"confidence": confidence, **out} if out else None
