"""Combining per-scenario figures into one: the weighted geometric mean and its interval.

A study's objective and a speed-up over the baseline are both a weighted geometric mean over scenarios, each
scenario known within an interval. On logs the mean is ``sum(w * log x) / sum(w)``; the scenarios' errors are
independent (different repeats at different times), so their half-widths on logs add in quadrature,
``sqrt(sum((w / sum(w) * h)**2))``. Adding them linearly (the geomean of the per-scenario bounds) would assume every
scenario erred the same way at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["weighted_log_mean"]


def weighted_log_mean(parts: Mapping[str, tuple[float, float, float | None]]) -> tuple[float, float | None]:
    """``(log mean, log half-width)`` of ``parts``: name -> ``(weight, log value, log half-width)`` (module
    docstring). The half-width is None when a part has none (a figure measured without an interval)."""
    total = sum(w for w, _, _ in parts.values())
    if total <= 0:
        raise ValueError("weights must add up to more than 0")
    log_mean = sum(w * x for w, x, _ in parts.values()) / total
    spreads = [w / total * h for w, _, h in parts.values() if h is not None]
    if len(spreads) != len(parts):
        return log_mean, None
    return log_mean, math.sqrt(sum(s * s for s in spreads))
