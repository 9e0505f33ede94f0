"""``[benchmark] warmup``: the policy that decides whether a scenario is warmed up, and its slowdown estimate."""

from __future__ import annotations

import math
import random
import re

import pytest

from tuner.bench import FirstPasses, Noise, WarmupPolicy, first_pass_slowdown
from tuner.config import BenchmarkSection

AUTO = WarmupPolicy(mode="auto", tolerance=0.03)


def _probes(slowdowns: list[float], repeats: int = 1) -> tuple[tuple[float, tuple[float, ...]], ...]:
    return tuple((100.0 * (1.0 - s), (100.0,) * repeats) for s in slowdowns)


def _noise(sigma: float, df: int = 30) -> Noise:
    return Noise(ss=sigma**2 * df, df=df)


def _passes(slowdowns: list[float], sigma: float = 0.01, *, recheck: bool = False) -> FirstPasses:
    """A study whose warm-up was timed (0.5 s, a pass 1 s) and whose probes saw ``slowdowns``."""
    probes = _probes(slowdowns)
    return FirstPasses(probes=probes, noise=_noise(sigma), warmup_s=0.5, pass_s=1.0, recheck=recheck)


def test_always_warms_up_with_its_requests() -> None:
    assert WarmupPolicy(mode="always", warmup_requests=2).plan(None).kind == "requests"
    assert WarmupPolicy(mode="always", warmup_requests=0).plan(None).kind == "none"


def test_auto_times_the_warmup_once_then_probes_until_it_has_enough_probes() -> None:
    assert AUTO.plan(None).kind == "probe"  # no study at all (`tune bench`): the probe is the warm-up
    first = AUTO.plan(FirstPasses())
    assert first.kind == "requests" and "timing the warm-up once" in first.reason
    plan = AUTO.plan(_passes([0.0, 0.0]))
    assert plan.kind == "probe" and "probe 3 of at least 3" in plan.reason
    plan = AUTO.plan(_passes([0.0, 0.0, 0.0]))
    assert plan.kind == "none" and plan.reason.startswith("no warm-up: first passes +0.0% slower")


def test_auto_keeps_the_warmup_of_a_server_whose_first_pass_is_slower() -> None:
    plan = AUTO.plan(_passes([0.15, 0.12, 0.18, 0.14], sigma=0.02))
    assert plan.kind == "probe"
    assert re.match(r"warm-up kept \(a probe\): first passes \+14\.\d% slower", plan.reason), plan.reason


def test_auto_keeps_probing_while_the_slowdown_is_not_bounded_below_the_tolerance() -> None:
    # Noise of 5% per pass: three probes cannot tell a first pass 0% from 5% slower.
    assert AUTO.plan(_passes([0.02, -0.03, 0.04], sigma=0.05)).kind == "probe"


def test_auto_never_probes_a_scenario_whose_pass_costs_many_warmups() -> None:
    # One request alone before 32 long prompts: a probe would cost 18 warm-ups; the warm-up stays.
    costly = FirstPasses(warmup_s=0.07, pass_s=1.25)
    plan = AUTO.plan(costly)
    assert plan.kind == "requests" and "a probe would cost 18x the warm-up" in plan.reason


def test_a_recheck_probes_a_settled_scenario() -> None:
    plan = AUTO.plan(_passes([0.0] * 4, recheck=True))
    assert plan.kind == "probe" and plan.reason.startswith("re-check")
    assert [n for n in range(31) if AUTO.is_recheck(n)] == [10, 20, 30]


def test_slowdown_is_the_weighted_mean_of_the_probes_log_ratios() -> None:
    passes = FirstPasses(probes=((90.0, (100.0,)), (80.0, (100.0, 100.0, 100.0))), noise=_noise(0.02))
    slow = first_pass_slowdown(passes, 0.8)
    assert slow is not None and slow.probes == 2
    # Weights 1/(1 + 1/m): 0.5 for one repeat after the probe, 0.75 for three.
    expected = 1.0 - math.exp(-(0.5 * math.log(100 / 90) + 0.75 * math.log(100 / 80)) / 1.25)
    assert slow.point == pytest.approx(expected)
    assert slow.lower < slow.point < slow.upper


def test_slowdown_without_the_study_noise_uses_the_probes_scatter() -> None:
    one = first_pass_slowdown(FirstPasses(probes=_probes([0.1])), 0.8)
    assert one is not None and one.upper == math.inf  # one probe, no noise: nothing bounds it
    many = first_pass_slowdown(FirstPasses(probes=_probes([0.1, 0.12, 0.08])), 0.8)
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
        slow = first_pass_slowdown(FirstPasses(probes=tuple(probes), noise=_noise(0.02, df=200)), 0.8)
        assert slow is not None
        covered += slow.lower <= 0.05 <= slow.upper
    assert 0.74 <= covered / runs <= 0.86


def test_policy_from_a_section_takes_its_precision_as_the_tolerance() -> None:
    section = BenchmarkSection(scenarios=(), warmup="auto", precision=0.04, confidence=0.9)
    policy = WarmupPolicy.from_section(section)
    assert (policy.mode, policy.tolerance, policy.confidence) == ("auto", 0.04, 0.9)

