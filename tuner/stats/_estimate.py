"""Statistics for benchmark results: robust scores, confidence intervals, and the regression comparison.

Benchmarks give few samples (2-5 repeats of a scenario), so every function here is defined for tiny inputs and
says what it does when it cannot estimate something (``None`` or ``False``) instead of inventing a figure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "EMPTY_POOL",
    "MAD_TO_SIGMA",
    "Estimate",
    "Noise",
    "bootstrap_ci",
    "estimate",
    "import_statistics",
    "is_slower",
    "mad",
    "percentile",
    "pooled_noise",
    "robust_score",
    "student_t",
]

#: Scale factor that turns a median absolute deviation into a normal standard deviation estimate.
MAD_TO_SIGMA = 1.4826


def _scipy_stats() -> Any:
    """``scipy.stats``, imported on first use: it costs ~1 s to import and client processes never need it."""
    from scipy import stats

    return stats


def import_statistics() -> None:
    """Import ``scipy.stats`` now. A study run does so before it arms its stop signals: a signal that lands
    while a compiled extension initialises comes out as ``ImportError: initialization failed``, not a stop."""
    _scipy_stats()


def student_t(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom."""
    return float(_scipy_stats().t.ppf(q, df))


def _finite(samples: Sequence[float]) -> np.ndarray:
    arr = np.asarray(list(samples), dtype=float)
    return arr[np.isfinite(arr)]


def mad(samples: Sequence[float]) -> float:
    """Median absolute deviation from the median (0.0 for fewer than two samples)."""
    arr = _finite(samples)
    if arr.size < 2:
        return 0.0
    return float(np.median(np.abs(arr - np.median(arr))))


def robust_score(samples: Sequence[float], k: float) -> float:
    """``median - k * 1.4826 * MAD``: a figure that a noisy lucky repeat cannot inflate.

    The 1.4826 factor makes the MAD a standard-deviation estimate, so ``k`` reads as "sigmas of pessimism".
    Raises ``ValueError`` on no finite samples: a missing measurement must not turn into a score.
    """
    arr = _finite(samples)
    if arr.size == 0:
        raise ValueError("robust_score needs at least one finite sample")
    return float(np.median(arr)) - k * MAD_TO_SIGMA * mad(arr.tolist())


@dataclass(frozen=True, kw_only=True)
class Noise:
    """The benchmark's repeat-to-repeat noise, pooled over the configs measured so far.

    ``ss`` is the sum of squared deviations of log throughput from each config's own mean and ``df`` its
    degrees of freedom (repeats minus one, summed over configs), so ``ss / df`` estimates the variance of one
    repeat's log throughput. Pooling assumes what throughput noise is on a dedicated server: multiplicative
    and about the same for every config (the box, the clocks and the load generator make it, not the flags).
    With it, a single repeat has an interval, and a config need not be measured twice just to learn the noise.

    ``df == 0`` is an empty pool (:data:`EMPTY_POOL`): no other config repeated the scenario yet, so the
    repeats a test adds to it (a reference measured several times) are all it knows. Its ``var`` is undefined.
    """

    ss: float
    df: int

    @property
    def var(self) -> float:
        if self.df <= 0:
            raise ValueError("an empty noise pool has no variance: add repeats to it first")
        return self.ss / self.df

    def with_samples(self, logs: np.ndarray) -> Noise:
        """This pool plus one more config's repeats (its own deviations, its own degrees of freedom)."""
        if logs.size < 2:
            return self
        return Noise(ss=self.ss + float(((logs - logs.mean()) ** 2).sum()), df=self.df + int(logs.size) - 1)


EMPTY_POOL = Noise(ss=0.0, df=0)


def pooled_noise(groups: Iterable[Sequence[float]]) -> Noise | None:
    """The :class:`Noise` of several configs' repeats (None: no config has two positive repeats yet)."""
    pool = Noise(ss=0.0, df=0)
    for group in groups:
        arr = _finite(group)
        pool = pool.with_samples(np.log(arr[arr > 0]))
    return pool if pool.df > 0 else None


def _log_variance(logs: np.ndarray, noise: Noise | None) -> tuple[float, int] | None:
    """The variance of one repeat's log throughput and its degrees of freedom: own repeats, plus the pool."""
    if noise is not None:
        combined = noise.with_samples(logs)
        if combined.df > 0:
            return combined.var, combined.df
    if logs.size < 2:
        return None
    return float(logs.var(ddof=1)), int(logs.size) - 1


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """Throughput from a few repeats: the point estimate, its confidence interval and the score.

    ``point`` is the geometric mean of the repeats; the interval is ``point * exp(-h) .. point * exp(h)`` with
    ``h = t((1 + confidence) / 2, n - 1) * sd(log x) / sqrt(n)`` (a Student-t interval on log throughput);
    ``score`` is its lower end. ``relative_half_width`` is ``h`` (~ the half-width as a fraction of the
    point); ``half_width`` is half the interval's width in the samples' unit. One repeat has no noise
    estimate: ``relative_half_width`` and ``half_width`` are ``None`` and the score is the sample itself,
    unless a pooled :class:`Noise` estimate is given: then ``sd(log x)`` is the pool's (own repeats included)
    and ``n - 1`` its degrees of freedom, so one repeat gets an honest interval too.
    """

    point: float
    score: float
    low: float
    high: float
    half_width: float | None
    relative_half_width: float | None
    n: int


def estimate(samples: Sequence[float], confidence: float, noise: Noise | None = None) -> Estimate:
    """The score a config gets from ``samples`` (see :class:`Estimate`): a lower confidence bound, never below 0.

    Why logs: throughput noise is multiplicative (a busier box slows every request by a fraction), the bound
    of a positive quantity must stay positive (``median - k*MAD`` went negative on 2 repeats of 18.3 and 2.4
    tok/s), and the geomean objective works on logs anyway. Why t: with 2-6 repeats a normal quantile would
    pretend to know the noise; the t quantile widens the interval for the few repeats actually taken, so a
    config measured twice is not trusted like one measured six times. Non-positive samples (a run that
    produced nothing) count as 1e-9 tok/s, which drags the bound to ~0 instead of failing.
    Raises ``ValueError`` on no finite samples: a missing measurement must not turn into a score.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    arr = _finite(samples)
    if arr.size == 0:
        raise ValueError("estimate needs at least one finite sample")
    logs = np.log(np.maximum(arr, 1e-9))
    point = float(np.exp(logs.mean()))
    variance = _log_variance(logs, noise)
    if variance is None:
        return Estimate(point=point, score=point, low=point, high=point, half_width=None, relative_half_width=None, n=1)
    var, df = variance
    se = math.sqrt(var / arr.size)
    h = student_t(0.5 + confidence / 2.0, df) * se
    low, high = point * math.exp(-h), point * math.exp(h)
    return Estimate(
        point=point,
        score=low,
        low=low,
        high=high,
        half_width=(high - low) / 2.0,
        relative_half_width=h,
        n=int(arr.size),
    )


def percentile(samples: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, linear interpolation), or ``None`` for no samples."""
    arr = _finite(samples)
    if arr.size == 0:
        return None
    return float(np.percentile(arr, q))


def bootstrap_ci(
    samples: Sequence[float],
    confidence: float = 0.95,
    *,
    statistic: str = "median",
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Bootstrap confidence interval of the median (or ``statistic="mean"``) of ``samples``.

    Uses :func:`scipy.stats.bootstrap`. With fewer than two samples there is no spread to resample: returns
    ``None``. With identical samples the interval is the point itself (scipy would warn about a degenerate
    distribution). BCa needs enough distinct resamples to estimate its acceleration, so fewer than 8 samples
    use the percentile method; the interval from 2-3 repeats is crude and is reported as such, not hidden.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    arr = _finite(samples)
    if arr.size < 2:
        return None
    if float(np.ptp(arr)) == 0.0:
        x = float(arr[0])
        return (x, x)
    func = {"median": np.median, "mean": np.mean}.get(statistic)
    if func is None:
        raise ValueError(f"statistic must be 'median' or 'mean', got {statistic!r}")
    method = "BCa" if arr.size >= 8 else "percentile"
    res = _scipy_stats().bootstrap(
        (arr,),
        func,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method=method,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        # BCa can degenerate on pathological inputs; fall back to the plain percentile interval.
        low, high = (float(v) for v in np.percentile(arr, [50 * (1 - confidence), 50 * (1 + confidence)]))
    return (low, high)


def is_slower(
    candidate: Sequence[float],
    reference: Sequence[float],
    *,
    margin: float,
    confidence: float,
    noise: Noise | None = None,
) -> bool:
    """Is ``candidate`` slower than ``reference`` by more than ``margin`` (a fraction), with ``confidence``?

    The regression pruner calls this with throughput samples (higher is better) to stop benchmarking a config
    that is confidently worse than the best one so far. Only a *confident* yes is ``True``: too few samples,
    or a difference within the noise, answer ``False`` (keep measuring).

    Statistic: a one-sided Welch t-test on log throughput.
    H0: ``mean(log c) >= mean(log r) + log(1 - margin)``; H1: the candidate's (geometric) mean is below
    ``(1 - margin)`` times the reference's. Logs make the margin a ratio and the noise multiplicative,
    which is how throughput noise behaves (a busier box slows everything by a fraction). Welch does not
    assume equal variances, which matters when one side comes from a different server state. Chosen over a
    ratio bootstrap because with 1-3 samples per side a bootstrap has too few
    distinct resamples to give a meaningful tail.

    Small samples: when one side has a single sample, its variance is borrowed from the other side (same
    benchmark, same noise), with that side's degrees of freedom. When neither side has two samples there is no
    noise estimate and the answer is ``False``. When both sides are noise-free (zero variance, e.g. a
    deterministic simulator), the comparison is exact.

    With ``noise`` (the pooled noise of *other* configs, :func:`pooled_noise`), both sides' own repeats join
    the pool and the test is a pooled-variance t-test with the pool's degrees of freedom: one repeat of each
    side is then enough for a confident answer when the difference is large against the usual noise.
    """
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be within [0, 1), got {margin}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    c = _finite(candidate)
    r = _finite(reference)
    c, r = c[c > 0], r[r > 0]
    if c.size == 0 or r.size == 0:
        return False
    lc = np.log(c)
    lr = np.log(r) + math.log1p(-margin)  # the threshold the candidate must be confidently below
    diff = float(lc.mean() - lr.mean())
    if noise is not None:
        return _pooled_slower(diff, lc, lr, noise.with_samples(lc).with_samples(lr), confidence)
    return _welch_slower(diff, lc, lr, 1.0 - confidence)


def _welch_slower(diff: float, lc: np.ndarray, lr: np.ndarray, alpha: float) -> bool:
    """:func:`is_slower` without a pooled noise: Welch on both sides' own repeats (see its docstring)."""
    var_c = float(lc.var(ddof=1)) if lc.size >= 2 else None
    var_r = float(lr.var(ddof=1)) if lr.size >= 2 else None
    if var_c is None and var_r is None:
        return False
    if var_c is not None and var_r is not None:
        if var_c == 0.0 and var_r == 0.0:
            return diff < 0.0
        p = float(_scipy_stats().ttest_ind(lc, lr, equal_var=False, alternative="less").pvalue)
        return math.isfinite(p) and p < alpha
    # One side has a single sample: borrow the other side's variance and degrees of freedom.
    var = var_c if var_c is not None else var_r
    assert var is not None
    df = (lc.size if var_c is not None else lr.size) - 1
    se = math.sqrt(var / lc.size + var / lr.size)
    if se == 0.0:
        return diff < 0.0
    return float(_scipy_stats().t.cdf(diff / se, df)) < alpha


def _pooled_slower(diff: float, lc: np.ndarray, lr: np.ndarray, pool: Noise, confidence: float) -> bool:
    if pool.df == 0:
        return False  # an empty pool and one repeat a side: no noise estimate at all
    if pool.var == 0.0:
        return diff < 0.0
    se = math.sqrt(pool.var * (1.0 / lc.size + 1.0 / lr.size))
    return float(_scipy_stats().t.cdf(diff / se, pool.df)) < 1.0 - confidence
