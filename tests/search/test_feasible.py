"""FeasibleFirstSampler: random search while no completed trial is feasible, the inner sampler from then on, and
nothing changed for a study without constraints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from tuner.config import load_config
from tuner.search import FeasibleFirstSampler, make_sampler, tpe_sampler

optuna.logging.set_verbosity(optuna.logging.WARNING)


class _Counting(optuna.samplers.TPESampler):
    """A real TPE sampler that counts the samples it was asked for."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.asked = 0

    def sample_relative(self, study: optuna.Study, trial: Any, search_space: Any) -> dict[str, Any]:
        self.asked += bool(search_space)
        return super().sample_relative(study, trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: Any, name: str, dist: Any) -> Any:
        self.asked += 1
        return super().sample_independent(study, trial, name, dist)


def _objective(feasible_from: float):
    """x in [0, 1]: the score grows with x, but only x below ``feasible_from`` keeps the constraint."""

    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0.0, 1.0)
        trial.set_constraint("slo", x - feasible_from)
        return x

    return objective


def test_random_until_a_trial_is_feasible_then_the_inner_sampler() -> None:
    inner = _Counting(seed=3, n_startup_trials=0, multivariate=True)
    study = optuna.create_study(direction="maximize", sampler=FeasibleFirstSampler(inner, seed=3))
    study.enqueue_trial({"x": 0.9})  # an infeasible start, as a baseline that misses the SLO
    study.optimize(_objective(feasible_from=0.3), n_trials=1)
    while not any(t.constraints["slo"] <= 0 for t in study.trials):
        asked = inner.asked
        study.optimize(_objective(feasible_from=0.3), n_trials=1)
        assert inner.asked == asked, "TPE was asked while no trial was feasible"
        assert len(study.trials) < 60
    asked = inner.asked
    study.optimize(_objective(feasible_from=0.3), n_trials=5)
    assert inner.asked >= asked + 5  # from the first feasible trial on, TPE decides every sample


@pytest.mark.parametrize("multivariate", [True, False])
def test_a_study_without_constraints_samples_exactly_as_tpe(multivariate: bool) -> None:
    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", -3.0, 3.0)
        kind = trial.suggest_categorical("kind", ["a", "b", "c"])
        return -(x * x) + {"a": 0.0, "b": 1.0, "c": 0.5}[kind]

    runs = []
    for wrap in (False, True):
        tpe = optuna.samplers.TPESampler(seed=11, n_startup_trials=4, multivariate=multivariate)
        sampler = FeasibleFirstSampler(tpe, seed=11) if wrap else tpe
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.optimize(objective, n_trials=15)
        runs.append([t.params for t in study.trials])
    assert runs[0] == runs[1]


def test_the_study_sampler_is_tpe_drawing_at_random_until_feasible() -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "studies" / "slo-chat.toml")
    sampler = make_sampler(config, offset=0)
    assert isinstance(sampler, FeasibleFirstSampler) and isinstance(sampler.inner, optuna.samplers.TPESampler)
    assert "random until a trial is feasible" in str(sampler)
    assert isinstance(tpe_sampler(config, 0), optuna.samplers.TPESampler)
