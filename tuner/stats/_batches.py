"""Intervals from batches: the run-to-run uncertainty of a share of requests and of a latency percentile.

The requests of one open-loop pass share one queue: a burst of arrivals fills the batch and slows every request
in flight together, so a pass's share within a limit, and its p99, move as one from pass to pass. The binomial
intervals (:mod:`tuner.stats._binomial`) treat its requests as independent draws and are too narrow there
(docs/measuring.md measures by how much). Batch means (Schmeiser 1982, "Batch size effects in the analysis of
simulation output") take the spread between long stretches of the series instead: split every independent pass
(a replicate, drawn from fresh arrivals) into consecutive batches each long against the queue's memory, and the
batches' shares are near-independent draws of a pass's share, whose mean has a t interval. Batches of unequal
sizes (a queue's busy periods: :mod:`tuner.bench._steady`) weigh by their sizes: the ratio estimator of
regenerative simulation (Crane and Iglehart 1974), whose interval has the same t form.

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


Bounds = tuple[float | None, float | None]


def _half(z: np.ndarray, sizes: np.ndarray, confidence: float) -> np.ndarray:
    """The half-width of the ratio estimator's t interval (``z``: each batch's count less the pooled share's
    expectation of it, along axis 0): batches of unequal sizes weigh by their sizes, equal ones reduce to the t
    interval of their mean share."""
    k = sizes.size
    return student_t(0.5 + confidence / 2.0, k - 1) * z.std(axis=0, ddof=1) / (sizes.mean() * math.sqrt(k))


def batch_share_interval(counts: Sequence[tuple[int, int]], confidence: float, *, within: Bounds) -> Bounds:
    """The two-sided ``confidence`` interval of a share from batches' ``(successes, trials)`` (the ratio estimator:
    their pooled share, its spread from each batch's successes against that share's expectation), clipped to
    [0, 1], or ``within`` (the requests' own interval) where that is wider; ``within`` alone with fewer than two
    batches (nothing says how the share varies)."""
    kept = [(m, n) for m, n in counts if n > 0]
    if len(kept) < 2:
        return within
    met, sizes = (np.array(column, dtype=float) for column in zip(*kept, strict=True))
    pooled = met.sum() / sizes.sum()
    h = float(_half(met - pooled * sizes, sizes, confidence))
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
    sizes = np.array([b.size for b in kept], dtype=float)
    below = np.stack([np.searchsorted(b, values, side="right") for b in kept])
    pooled = below.sum(axis=0) / sizes.sum()
    h = _half(below - np.outer(sizes, pooled), sizes, confidence)
    p = q / 100.0
    under = np.flatnonzero(pooled + h < p)  # the quantile is confidently above these values
    inside = np.flatnonzero(pooled - h >= p)  # ... and confidently at or below these
    low = float(values[under[-1]]) if under.size else None
    high = float(values[inside[0]]) if inside.size else None
    return _wider(within, (low, high))


def _wider(first: Bounds, second: Bounds) -> Bounds:
    """The wider of two intervals side by side (a missing bound, None, is the widest)."""
    low = None if first[0] is None or second[0] is None else min(first[0], second[0])
    high = None if first[1] is None or second[1] is None else max(first[1], second[1])
    return low, high
