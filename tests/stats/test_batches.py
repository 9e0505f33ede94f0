"""Intervals from batches: a share's and a percentile's run-to-run uncertainty (tuner.stats._batches)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tuner.stats import batch_quantile_interval, batch_share_interval, percentile_interval


def test_a_share_needs_two_batches_and_widens_with_their_spread() -> None:
    point = (0.9, 0.9)
    assert batch_share_interval([(90, 100)], 0.8, within=(0.85, 0.95)) == (0.85, 0.95)
    calm = batch_share_interval([(90, 100), (91, 100), (89, 100), (90, 100)], 0.8, within=point)
    wild = batch_share_interval([(60, 100), (100, 100), (95, 100), (100, 100)], 0.8, within=point)
    assert calm[0] < 0.90 < calm[1] and wild[1] - wild[0] > 5 * (calm[1] - calm[0])  # type: ignore[operator]
    assert wild[1] == 1.0  # clipped to a share
    assert batch_share_interval([(90, 100), (91, 100), (89, 100), (90, 100)], 0.8, within=(0.5, 0.99)) == (0.5, 0.99)


def test_batches_of_unequal_sizes_weigh_by_their_sizes() -> None:
    # Busy periods of a queue: a long one that missed, many short ones that met. The share is the pooled one
    # (the ratio estimator), not the mean of the batches' shares, and its interval holds it.
    counts = [(0, 30), *([(1, 1)] * 20), (5, 10)]
    low, high = batch_share_interval(counts, 0.8, within=(0.41, 0.41))
    pooled = 25 / 60
    assert low is not None and high is not None and low < pooled < high
    assert abs((low + high) / 2 - pooled) < 1e-9  # symmetric about the pooled share
    mean_of_shares = sum(m / n for m, n in counts) / len(counts)
    assert mean_of_shares > high  # 0.93: what equal weights would centre on
    # Equal sizes: the t interval of the batches' mean share, as before.
    equal = batch_share_interval([(7, 10), (9, 10), (8, 10)], 0.8, within=(0.8, 0.8))
    t = 1.8856180831641267  # Student's t, 2 degrees of freedom, 90th percentile
    assert equal == pytest.approx((0.8 - t * 0.1 / 3**0.5, 0.8 + t * 0.1 / 3**0.5))


def test_the_percentiles_interval_inverts_the_shares() -> None:
    rng = random.Random(3)
    # Independent batches of the same distribution: the interval holds the true p90 about as often as promised.
    covered = 0
    for _ in range(300):
        batches = [[rng.expovariate(1.0) for _ in range(50)] for _ in range(8)]
        low, high = batch_quantile_interval(batches, 90, 0.8, within=(np.inf, -np.inf))
        covered += low is not None and high is not None and low <= np.log(10) <= high
    assert 0.70 <= covered / 300 <= 0.92


def test_batches_that_move_together_give_a_wider_interval_than_the_ranks() -> None:
    rng = random.Random(5)
    # Each batch shifted by its own draw: the requests of a batch share its queue.
    batches = [[shift + rng.gauss(0, 0.1) for _ in range(40)] for shift in (rng.gauss(0, 1) for _ in range(6))]
    pooled = [x for b in batches for x in b]
    ranks = percentile_interval(pooled, 50, 0.8)
    runs = batch_quantile_interval(batches, 50, 0.8, within=ranks)
    assert None not in runs and None not in ranks
    assert runs[1] - runs[0] > 2 * (ranks[1] - ranks[0])  # type: ignore[operator]
    assert batch_quantile_interval(batches[:1], 50, 0.8, within=ranks) == ranks  # one batch: the ranks alone
    assert batch_quantile_interval(batches, 50, 0.8, within=(1e9, None))[1] is None  # no bound is the widest
