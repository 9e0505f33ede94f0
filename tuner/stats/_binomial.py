"""A share measured by counting: requests that met a latency promise out of those sent."""

from __future__ import annotations

from tuner.stats._estimate import _scipy_stats

__all__ = ["clopper_pearson"]


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
