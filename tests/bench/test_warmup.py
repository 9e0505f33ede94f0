"""``[benchmark] warmup``: the policy that decides whether a scenario is warmed up, and its slowdown estimate."""

from __future__ import annotations

import dataclasses
import math
import random
import re

import pytest

from tuner.bench import FirstPasses, WarmupPolicy, first_pass_slowdown
from tuner.config import BenchmarkSection
from tuner.stats import Noise

AUTO = WarmupPolicy(mode="auto", tolerance=0.03)


def _pairs(slowdowns: list[float], repeats: int = 1) -> tuple[tuple[float, tuple[float, ...]], ...]:
    return tuple((100.0 * (1.0 - s), (100.0,) * repeats) for s in slowdowns)


def _noise(sigma: float, df: int = 30) -> Noise:
    return Noise(ss=sigma**2 * df, df=df)


def _passes(slowdowns: list[float], sigma: float = 0.01, *, recheck: bool = False) -> FirstPasses:
    """A study whose warm-up was timed (0.5 s, a pass 1 s) and whose first passes were ``slowdowns`` slower."""
    return FirstPasses(pairs=_pairs(slowdowns), noise=_noise(sigma), warmup_s=0.5, pass_s=1.0, recheck=recheck)


def test_always_warms_up_with_its_requests() -> None:
    assert WarmupPolicy(mode="always", warmup_requests=2).plan(None).kind == "requests"
    assert WarmupPolicy(mode="always", warmup_requests=0).plan(None).kind == "none"


def test_auto_runs_without_a_warmup_while_no_first_pass_is_shown_slower() -> None:
    assert AUTO.plan(None).kind == "probe"  # no study at all (`tune bench`): the probe is the warm-up
    first = AUTO.plan(FirstPasses())
    assert first.kind == "none" and first.reason == "no warm-up: no first pass seen yet"
    plan = AUTO.plan(_passes([0.0]))
    assert plan.kind == "none" and plan.reason.startswith("no warm-up: first passes +0.0% slower (-"), plan.reason
    assert plan.reason.endswith(", 1 pair)"), plan.reason
    # Without the study's noise one pair bounds nothing, and nothing unbounded calls for a warm-up.
    alone = AUTO.plan(FirstPasses(pairs=_pairs([0.5])))
    assert alone.kind == "none" and alone.reason.endswith("(1 pair, no noise estimate to bound it yet)"), alone.reason
    faster = AUTO.plan(_passes([-0.05, -0.04]))
    assert faster.reason.startswith("no warm-up: first passes 4.5% faster (-"), faster.reason


def test_auto_warms_up_a_server_whose_first_pass_is_slower() -> None:
    plan = AUTO.plan(_passes([0.15, 0.12, 0.18, 0.14], sigma=0.02))
    assert plan.kind == "probe"
    assert re.match(r"warm-up \(a probe\): first passes \+14\.\d% slower \(\+1\d\.\d% \.\. \+1\d\.\d%, 4 pairs\), "
                    r"more than 3\.0%$", plan.reason), plan.reason
    # The first time a warm-up is needed, it is the configured requests, timed to know what a probe would cost.
    untimed = AUTO.plan(dataclasses.replace(_passes([0.15, 0.12, 0.18, 0.14], sigma=0.02), warmup_s=None))
    assert untimed.kind == "requests" and untimed.reason.endswith("(timing the warm-up once)"), untimed.reason


def test_auto_needs_a_slowdown_both_confident_and_larger_than_the_tolerance() -> None:
    # Noise of 5% per pass: three pairs cannot tell a first pass 0% from 5% slower.
    assert AUTO.plan(_passes([0.02, -0.03, 0.04], sigma=0.05)).kind == "none"
    # Confidently slower, but by less than the precision asked for: not worth a warm-up.
    small = _passes([0.02] * 8, sigma=0.002)
    slow = first_pass_slowdown(small, AUTO.confidence)
    assert slow is not None and slow.lower > 0 and AUTO.plan(small).kind == "none"
    # A large point that the noise cannot tell from zero is not enough either.
    assert AUTO.plan(_passes([0.06], sigma=0.05)).kind == "none"


def test_a_needed_warmup_of_a_costly_pass_stays_requests_and_is_probed_on_rechecks() -> None:
    # One request alone before 32 long prompts: a probe would cost 18 warm-ups.
    costly = dataclasses.replace(_passes([0.15, 0.12, 0.18]), warmup_s=0.07, pass_s=1.25)
    plan = AUTO.plan(costly)
    assert plan.kind == "requests" and plan.reason.endswith("; a probe would cost 18x it"), plan.reason
    recheck = AUTO.plan(dataclasses.replace(costly, recheck=True))
    assert recheck.kind == "probe" and recheck.reason.startswith("re-check (a probe): first passes +15.0%")
    assert [n for n in range(31) if AUTO.is_recheck(n)] == [10, 20, 30]
    # No warm-up needed: a re-check changes nothing (runs without a warm-up keep showing their first pass).
    assert AUTO.plan(dataclasses.replace(_passes([0.0] * 4), warmup_s=0.07, pass_s=1.25, recheck=True)).kind == "none"


def test_slowdown_is_the_weighted_mean_of_the_probes_log_ratios() -> None:
    passes = FirstPasses(pairs=((90.0, (100.0,)), (80.0, (100.0, 100.0, 100.0))), noise=_noise(0.02))
    slow = first_pass_slowdown(passes, 0.8)
    assert slow is not None and slow.pairs == 2
    # Weights 1/(1 + 1/m): 0.5 for one repeat after the probe, 0.75 for three.
    expected = 1.0 - math.exp(-(0.5 * math.log(100 / 90) + 0.75 * math.log(100 / 80)) / 1.25)
    assert slow.point == pytest.approx(expected)
    assert slow.lower < slow.point < slow.upper


def test_slowdown_without_the_study_noise_uses_the_pairs_scatter() -> None:
    one = first_pass_slowdown(FirstPasses(pairs=_pairs([0.1])), 0.8)
    assert one is not None and one.upper == math.inf  # one pair, no noise: nothing bounds it
    many = first_pass_slowdown(FirstPasses(pairs=_pairs([0.1, 0.12, 0.08])), 0.8)
    assert many is not None and many.point == pytest.approx(0.1, abs=0.002)
    assert 0.06 < many.lower < 0.09 and 0.11 < many.upper < 0.14  # t with 2 degrees of freedom: wide


def test_the_bound_covers_the_true_slowdown_as_often_as_its_confidence_says() -> None:
    """Calibration: with a known 2% noise, the two-sided 80% interval of a 5% slowdown covers it ~80% of runs."""
    rng = random.Random(7)
    covered, runs = 0, 400
    for _ in range(runs):
        probes = []
        for _ in range(4):
            probe = 95.0 * math.exp(rng.gauss(0, 0.02))
            probes.append((probe, (100.0 * math.exp(rng.gauss(0, 0.02)),)))
        slow = first_pass_slowdown(FirstPasses(pairs=tuple(probes), noise=_noise(0.02, df=200)), 0.8)
        assert slow is not None
        covered += slow.lower <= 0.05 <= slow.upper
    assert 0.74 <= covered / runs <= 0.86


def test_policy_from_a_section_takes_its_precision_as_the_tolerance() -> None:
    section = BenchmarkSection(scenarios=(), warmup="auto", precision=0.04, confidence=0.9)
    policy = WarmupPolicy.from_section(section)
    assert (policy.mode, policy.tolerance, policy.confidence) == ("auto", 0.04, 0.9)

