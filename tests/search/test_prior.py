"""PriorSampler: the inner sampler learns from trials the study does not hold, which stay out of the study."""

from __future__ import annotations

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial

from tuner.search import PriorSampler

X = FloatDistribution(0.0, 1.0)


def _prior(best: float) -> list[FrozenTrial]:
    """Twenty measurements of ``-(x - best)**2`` spread over [0, 1]: another study's, on the same space."""
    return [
        optuna.trial.create_trial(params={"x": x}, distributions={"x": X}, value=-((x - best) ** 2))
        for x in (i / 19 for i in range(20))
    ]


def _first_samples(sampler: optuna.samplers.BaseSampler, n: int = 6) -> list[float]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    xs = []
    for _ in range(n):
        trial = study.ask()
        x = trial.suggest_float("x", 0.0, 1.0)
        study.tell(trial, -((x - 0.9) ** 2))
        xs.append(x)
    assert len(study.trials) == n  # the prior's trials are never the study's
    return xs


def test_tpe_with_a_prior_samples_near_the_prior_s_best_from_its_first_trial() -> None:
    cold = _first_samples(optuna.samplers.TPESampler(seed=0, n_startup_trials=4))
    tpe = optuna.samplers.TPESampler(seed=0, n_startup_trials=4)
    warm = _first_samples(PriorSampler(tpe, prior=lambda s: _prior(0.9)))
    # Without a prior TPE's first four are random; with one it models from the first sample on.
    assert max(abs(x - 0.9) for x in warm) < 0.15, warm
    assert max(abs(x - 0.9) for x in cold[:4]) > 0.3, cold


def test_the_prior_is_read_from_the_study_as_it_is_at_each_sample() -> None:
    seen: list[int] = []

    def prior(study: optuna.Study) -> list[FrozenTrial]:
        seen.append(len(study.trials))
        return _prior(0.1)

    _first_samples(PriorSampler(optuna.samplers.TPESampler(seed=1, n_startup_trials=2), prior=prior), n=3)
    # Asked each time with the study as it is: the trial being sampled and those told before it.
    assert sorted(set(seen)) == [1, 2, 3]
