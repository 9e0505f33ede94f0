from __future__ import annotations

import math
import random

import pytest

from tuner.stats import MAD_TO_SIGMA, bootstrap_ci, is_slower, mad, percentile, robust_score


def test_robust_score_is_median_minus_k_scaled_mad() -> None:
    samples = [100.0, 102.0, 98.0, 150.0]  # one lucky outlier barely moves it
    med = 101.0
    m = mad(samples)
    assert m == pytest.approx(2.0)
    assert robust_score(samples, 1.0) == pytest.approx(med - MAD_TO_SIGMA * m)
    assert robust_score(samples, 0.0) == pytest.approx(med)
    assert robust_score([42.0], 3.0) == 42.0  # one sample: no spread to penalise


def test_robust_score_refuses_to_invent() -> None:
    with pytest.raises(ValueError):
        robust_score([], 1.0)
    with pytest.raises(ValueError):
        robust_score([math.nan], 1.0)


def test_percentile_handles_empty() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0


def test_bootstrap_ci_small_and_degenerate_inputs() -> None:
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([5.0]) is None
    assert bootstrap_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)
    low, high = bootstrap_ci([9.0, 10.0, 11.0])  # type: ignore[misc]
    assert 9.0 <= low <= 10.0 <= high <= 11.0


def test_bootstrap_ci_covers_the_median_of_a_larger_sample() -> None:
    rng = random.Random(3)
    samples = [rng.gauss(100.0, 5.0) for _ in range(40)]
    ci = bootstrap_ci(samples, 0.95)
    assert ci is not None
    low, high = ci
    assert low < 100.0 < high
    assert high - low < 10.0


def test_is_slower_detects_a_clear_regression() -> None:
    reference = [100.0, 101.0, 99.0]
    candidate = [80.0, 81.0, 79.5]
    assert is_slower(candidate, reference, margin=0.05, confidence=0.95)


def test_is_slower_false_within_noise_or_margin() -> None:
    reference = [100.0, 103.0, 97.0]
    assert not is_slower([99.0, 101.0, 96.0], reference, margin=0.02, confidence=0.95)
    # 4% slower, but the margin is 5%: not "slower by more than the margin".
    assert not is_slower([96.0, 96.2, 95.8], [100.0, 100.2, 99.8], margin=0.05, confidence=0.95)
    # Faster is never slower.
    assert not is_slower([120.0, 121.0], reference, margin=0.0, confidence=0.9)


def test_is_slower_with_one_candidate_sample_borrows_reference_noise() -> None:
    reference = [100.0, 101.0, 99.0, 100.5]
    assert is_slower([70.0], reference, margin=0.05, confidence=0.95)
    assert not is_slower([99.0], reference, margin=0.05, confidence=0.95)
    # No noise estimate on either side: never confident.
    assert not is_slower([50.0], [100.0], margin=0.05, confidence=0.95)


def test_is_slower_noise_free_inputs_compare_exactly() -> None:
    assert is_slower([90.0, 90.0], [100.0, 100.0], margin=0.05, confidence=0.95)
    assert not is_slower([96.0, 96.0], [100.0, 100.0], margin=0.05, confidence=0.95)


def test_is_slower_validates_arguments() -> None:
    with pytest.raises(ValueError):
        is_slower([1.0], [1.0], margin=1.5, confidence=0.9)
    with pytest.raises(ValueError):
        is_slower([1.0], [1.0], margin=0.1, confidence=1.0)
