"""Each confirmation visit measures a fixed number of repeats, whatever the study's sequential policy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tuner.config import load_config
from tuner.study._confirm import visit_policy

DEMO = Path(__file__).resolve().parents[2] / "studies" / "demo.toml"


def test_a_sequential_study_that_knows_its_noise_confirms_with_one_repeat_per_visit() -> None:
    config = load_config(DEMO)
    assert config.benchmark.min_repeats != config.benchmark.max_repeats
    policy = visit_policy(config, noise_known=True)
    assert (policy.min_repeats, policy.max_repeats) == (1, 1)
    assert policy.decide([100.0]).stop


def test_without_a_noise_estimate_a_visit_measures_twice() -> None:
    config = load_config(DEMO)
    policy = visit_policy(config, noise_known=False)
    assert (policy.min_repeats, policy.max_repeats) == (2, 2)
    # No reference to stop against: a confirmation visit never ends early.
    assert policy.decide([100.0]).verdict == "more" and policy.decide([100.0, 50.0]).stop


def test_a_fixed_study_confirms_with_its_own_repeats() -> None:
    config = load_config(DEMO)
    fixed = dataclasses.replace(config, benchmark=dataclasses.replace(config.benchmark, repeats=3))
    for known in (True, False):
        policy = visit_policy(fixed, noise_known=known)
        assert (policy.min_repeats, policy.max_repeats) == (3, 3)
    once = dataclasses.replace(config, benchmark=dataclasses.replace(config.benchmark, min_repeats=1, max_repeats=1))
    assert visit_policy(once, noise_known=False).max_repeats == 1
