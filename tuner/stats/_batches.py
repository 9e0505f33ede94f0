"""Intervals from batches: the run-to-run uncertainty of a share of requests and of a latency percentile.

The requests of one open-loop pass share one queue: a burst of arrivals fills the batch and slows every request
in flight together, so a pass's share within a limit, and its p99, move as one from pass to pass. The binomial
intervals (:mod:`tuner.stats._binomial`) treat its requests as independent draws and are too narrow there
(docs/measuring.md measures by how much). Batch means (Schmeiser 1982, "Batch size effects in the analysis of
simulation output") take the spread between long stretches of the series instead: split every independent pass
(a replicate, drawn from fresh arrivals) into consecutive batches each long against the queue's memory, and the
batches' shares are near-independent draws of a pass's share, whose mean has a t interval.

A percentile's interval is the same test inverted: the p-quantile lies above ``x`` when the share of requests at
or below ``x`` is confidently under ``p``, and at or below ``x`` when that share is confidently at least ``p``
(the construction :func:`tuner.stats.percentile_interval` makes with the binomial count).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tuner.stats._estimate import student_t

__all__ = ["batch_quantile_interval", "batch_share_interval"]


def _half(spread: np.ndarray | float, batches: int, confidence: float) -> np.ndarray | float:
    return student_t(0.5 + confidence / 2.0, batches - 1) * spread / math.sqrt(batches)


Bounds = tuple[float | None, float | None]


def batch_share_interval(shares: Sequence[float], pooled: float, confidence: float, *, within: Bounds) -> Bounds:
    """The two-sided ``confidence`` interval of a share from the batches' own shares, around ``pooled`` (the share
    over every request), clipped to [0, 1], or ``within`` (the requests' own interval) where that is wider;
    ``within`` alone with fewer than two batches (nothing says how the share varies)."""
    if len(shares) < 2:
        return within
    h = float(_half(float(np.std(shares, ddof=1)), len(shares), confidence))
    return _wider(within, (max(0.0, pooled - h), min(1.0, pooled + h)))


def batch_quantile_interval(
    batches: Sequence[Sequence[float]], q: float, confidence: float, *, within: Bounds
) -> Bounds:
    """The two-sided ``confidence`` interval of the ``q``-th percentile (0-100) from ``batches`` of samples
    (module docstring), or ``within`` (the requests' own, by rank) where that is wider: ``(low, high)``, a side
    None when no sample bounds it; ``within`` alone with fewer than two batches."""
    kept = [np.sort(np.asarray(b, dtype=float)) for b in batches if len(b)]
    if len(kept) < 2:
        return within
    values = np.unique(np.concatenate(kept))
    shares = np.stack([np.searchsorted(b, values, side="right") / b.size for b in kept])
    pooled = np.searchsorted(np.sort(np.concatenate(kept)), values, side="right") / sum(b.size for b in kept)
    h = _half(shares.std(axis=0, ddof=1), len(kept), confidence)
    p = q / 100.0
    below = np.flatnonzero(pooled + h < p)  # the quantile is confidently above these values
    inside = np.flatnonzero(pooled - h >= p)  # ... and confidently at or below these
    low = float(values[below[-1]]) if below.size else None
    high = float(values[inside[0]]) if inside.size else None
    return _wider(within, (low, high))


def _wider(first: Bounds, second: Bounds) -> Bounds:
    """The wider of two intervals side by side (a missing bound, None, is the widest)."""
    low = None if first[0] is None or second[0] is None else min(first[0], second[0])
    high = None if first[1] is None or second[1] is None else max(first[1], second[1])
    return low, high
