"""The attainment's interval: exact (Clopper-Pearson), sound next to 1. A latency percentile's interval: two of
the measured requests, by rank, from binomial sums; no bound where too few requests allow one."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tuner.stats import clopper_pearson, percentile_interval


def test_the_closed_forms_at_the_edges() -> None:
    # All n met: the lower end solves p**n = alpha/2; none met: the upper end solves (1-p)**n = alpha/2.
    low, high = clopper_pearson(200, 200, 0.9)
    assert high == 1.0 and low == pytest.approx(0.05 ** (1 / 200))
    low, high = clopper_pearson(0, 50, 0.9)
    assert low == 0.0 and high == pytest.approx(1 - 0.05 ** (1 / 50))


def test_coverage_is_at_least_the_confidence() -> None:
    """Exact intervals over-cover: at p = 0.98 with 300 requests, 90% intervals hold p at least 90% of the time."""
    rng = random.Random(1)
    runs, covered = 2000, 0
    for _ in range(runs):
        k = sum(rng.random() < 0.98 for _ in range(300))
        low, high = clopper_pearson(k, 300, 0.9)
        covered += low <= 0.98 <= high
    assert covered / runs >= 0.9


def test_no_requests_say_nothing_and_bad_counts_are_errors() -> None:
    assert clopper_pearson(0, 0, 0.9) == (0.0, 1.0)
    with pytest.raises(ValueError):
        clopper_pearson(5, 3, 0.9)


def _cdf(k: int, n: int, p: float) -> float:
    """P(B <= k) for B ~ binomial(n, p), summed term by term."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def _ranks(n: int, q: float, confidence: float) -> tuple[int | None, int | None]:
    """The 0-based ranks ``percentile_interval`` picks: its bounds over the samples 0, 1, ..., n-1 (shuffled)."""
    samples = list(range(n))
    random.Random(n).shuffle(samples)
    low, high = percentile_interval(samples, q, confidence)
    return (None if low is None else int(low)), (None if high is None else int(high))


def test_the_median_of_ten_is_the_textbook_interval() -> None:
    # B ~ binomial(10, 1/2): P(B <= 2) = 56/1024 <= 10% < P(B <= 3) = 176/1024, so the 3rd and 8th smallest of
    # ten samples bracket the median with probability 1 - 2 * 56/1024 = 89% (an 80% interval).
    assert _ranks(10, 50, 0.8) == (2, 7)
    assert percentile_interval([7.0, 1.0, 9.0, 3.0, 5.0, 2.0, 8.0, 4.0, 6.0, 10.0], 50, 0.8) == (3.0, 8.0)


@pytest.mark.parametrize(
    ("n", "q", "confidence"), [(10, 50, 0.8), (80, 99, 0.8), (300, 50, 0.9), (300, 90, 0.8), (1000, 99, 0.8),
                               (20, 90, 0.95), (500, 99, 0.95), (3, 50, 0.5)]
)  # fmt: skip
def test_each_bound_is_the_innermost_rank_whose_tail_fits(n: int, q: float, confidence: float) -> None:
    """Against exact binomial sums: the lower rank's tail P(B <= k) is within (1 - confidence) / 2 and the next
    rank's is not; likewise the upper rank's P(B > k); a missing bound is one no rank could give."""
    p, tail = q / 100, (1 - confidence) / 2
    low, high = _ranks(n, q, confidence)
    if low is None:
        assert _cdf(0, n, p) > tail
    else:
        assert _cdf(low, n, p) <= tail < _cdf(low + 1, n, p)
    if high is None:
        assert 1 - _cdf(n - 2, n, p) > tail  # even the largest sample: P(B > n - 1) = p**n
    else:
        assert 1 - _cdf(high, n, p) <= tail < 1 - _cdf(high - 1, n, p)
    if low is not None and high is not None:
        assert low < high and _cdf(high, n, p) - _cdf(low, n, p) >= confidence


def test_too_few_requests_give_no_bound_rather_than_an_invented_one() -> None:
    # p99 of 80 requests: the largest is above the p99 only with probability 1 - 0.99**80 = 55% < 90%.
    low, high = percentile_interval([float(i) for i in range(80)], 99, 0.8)
    assert high is None and low is not None
    # The largest of n is an upper bound at 80% once 0.99**n <= 10%: from n = 230 on (0.99**229 = 10.01%).
    assert percentile_interval([float(i) for i in range(229)], 99, 0.8)[1] is None
    assert percentile_interval([float(i) for i in range(230)], 99, 0.8)[1] == 229.0
    assert percentile_interval([0.5], 50, 0.8) == (None, None)
    assert percentile_interval([], 50, 0.8) == (None, None)
    with pytest.raises(ValueError):
        percentile_interval([1.0], 50, 1.0)


@pytest.mark.parametrize(("n", "q"), [(300, 50), (300, 90), (300, 99), (80, 99)])
def test_monte_carlo_coverage_is_the_binomial_sums(n: int, q: float) -> None:
    """Lognormal latencies, whose true percentile is known: over 2000 draws the interval holds it as often as the
    binomial sums say (within 3 standard errors), and never less often than the confidence asks."""
    confidence, runs = 0.8, 2000
    rng = np.random.default_rng(43)
    z = {50: 0.0, 90: 1.2815515655446004, 99: 2.3263478740408408}[int(q)]
    truth = math.exp(-1.0 + 0.5 * z)
    low_rank, high_rank = _ranks(n, q, confidence)
    p = q / 100
    miss_low = _cdf(low_rank, n, p) if low_rank is not None else 0.0
    miss_high = 1 - _cdf(high_rank, n, p) if high_rank is not None else 0.0
    exact = 1 - miss_low - miss_high
    covered = 0
    for _ in range(runs):
        low, high = percentile_interval(rng.lognormal(-1.0, 0.5, n).tolist(), q, confidence)
        covered += (low is None or low <= truth) and (high is None or truth <= high)
    se = math.sqrt(exact * (1 - exact) / runs)
    assert exact >= confidence and abs(covered / runs - exact) <= 3 * se
