"""The evidence ``warmup = "auto"`` reads from a study's trials (:func:`tuner.study._warmups.first_passes`)."""

from __future__ import annotations

import math

import pytest
from optuna.trial import FrozenTrial, TrialState, create_trial

from tuner.bench import WarmupPolicy
from tuner.metrics import scenario_key
from tuner.study._warmups import first_passes

SC = "c1-short"
AUTO = WarmupPolicy(mode="auto", tolerance=0.033)


def _trial(warmup: str, repeats: list[float], probe: float | None = None) -> FrozenTrial:
    user_attrs: dict[str, object] = {
        scenario_key(SC, "warmup"): warmup,
        scenario_key(SC, "repeats"): repeats,
    }
    if probe is not None:
        user_attrs[scenario_key(SC, "first_pass_tok_s")] = probe
    return create_trial(state=TrialState.COMPLETE, value=1.0, user_attrs=user_attrs)


def test_pairs_are_probes_and_the_first_repeat_of_unwarmed_runs_measured_more_than_once() -> None:
    trials = [
        _trial("none", [90.0, 100.0, 101.0]),  # a pair: its first pass against the two after it
        _trial("none", [95.0]),  # one repeat: nothing to compare its first pass with
        _trial("probe", [100.0, 99.0], probe=85.0),  # a probe against the counted repeats
        _trial("requests", [100.0, 98.0]),  # warmed: its first counted pass is not a first pass
    ]
    passes = first_passes(trials, SC)
    assert passes.pairs == ((90.0, (100.0, 101.0)), (85.0, (100.0, 99.0)))


def test_the_noise_leaves_out_the_first_passes_it_judges() -> None:
    """A baseline whose first pass was 20% slow: against the passes after it (1% apart) that is a clear slowdown;
    with the slow pass in the noise it would be lost in a noise of ~11%."""
    trials = [_trial("none", [80.0, 100.0, 101.0, 99.0])] + [_trial("none", [100.0 + i % 3]) for i in range(5)]
    passes = first_passes(trials, SC)
    assert passes.noise is not None and passes.noise.df == 2
    assert math.sqrt(passes.noise.var) == pytest.approx(0.01, abs=0.002)
    plan = AUTO.plan(passes)
    assert plan.kind == "requests" and plan.reason.endswith("(timing the warm-up once)"), plan.reason
    # The other way (every repeat in the noise) the same pair shows nothing.
    wide = first_passes([_trial("requests", [80.0, 100.0, 101.0, 99.0])], SC).noise
    assert wide is not None and math.sqrt(wide.var) > 0.1
