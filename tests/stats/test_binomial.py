"""The attainment's interval: exact (Clopper-Pearson), sound next to 1."""

from __future__ import annotations

import random

import pytest

from tuner.stats import clopper_pearson


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
