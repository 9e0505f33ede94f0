"""Figures measured by counting, whose intervals come from the binomial distribution: a share of requests that
met a latency promise (Clopper-Pearson), and a latency percentile between two of the measured requests (order
statistics)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.stats._estimate import _finite, _scipy_stats

__all__ = ["clopper_pearson", "percentile_interval"]


def clopper_pearson(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided ``confidence`` interval of a binomial share.

    Exact rather than normal-approximate because the shares that matter sit next to 1 (99% of requests), where
    a normal interval runs past 1 and is too narrow with a few hundred requests.
    """
    if trials <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be within [0, {trials}], got {successes}")
    alpha = 1.0 - confidence
    beta = _scipy_stats().beta
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


def percentile_interval(samples: Sequence[float], q: float, confidence: float) -> tuple[float | None, float | None]:
    """A distribution-free two-sided ``confidence`` interval of the ``q``-th percentile (0-100) of the
    distribution ``samples`` were drawn from: two of the samples themselves, by rank.

    The number ``B`` of samples at or below the true percentile is binomial(n, q/100) whatever the distribution,
    so the ``l``-th and ``u``-th smallest samples bracket it with probability ``P(l <= B < u)``. Each side takes
    the rank nearest the middle whose tail is at most ``(1 - confidence) / 2`` (equal tails, as Clopper-Pearson).
    A side is ``None`` when even the extreme sample is not far enough out: with n samples the largest is above the
    q-quantile only with probability ``1 - (q/100)**n`` (p99 of 80 requests: 55%, so no upper bound at 80%).
    Exact for continuous latencies and conservative with ties; it assumes the samples are independent draws.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"q must be within [0, 100], got {q}")
    arr = np.sort(_finite(samples))
    n = arr.size
    if n == 0:
        return None, None
    tail = (1.0 - confidence) / 2
    binom = _scipy_stats().binom
    ks = np.arange(n)
    # P(B <= k): the (k+1)-th smallest sample lies above the percentile; P(B > k): it lies below it.
    below = binom.cdf(ks, n, q / 100)
    above = binom.sf(ks, n, q / 100)
    low_ranks = np.flatnonzero(below <= tail)
    high_ranks = np.flatnonzero(above <= tail)
    low = float(arr[low_ranks[-1]]) if low_ranks.size else None
    high = float(arr[high_ranks[0]]) if high_ranks.size else None
    return low, high
