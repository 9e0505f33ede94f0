from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from tuner.space._model import Param, SearchSpace, Value

if TYPE_CHECKING:  # only types: importing optuna costs every `import tuner.space` (the simulator) 0.3 s
    import optuna
    from optuna.distributions import BaseDistribution


def param_distribution(p: Param) -> BaseDistribution:
    """The distribution :func:`suggest` gives ``p`` in a trial (for trials made outside one: a warm start's)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if p.kind == "categorical":
        return CategoricalDistribution(list(p.choices))
    if p.kind == "bool":
        return CategoricalDistribution([False, True])
    assert p.low is not None and p.high is not None
    if p.kind == "int":
        return IntDistribution(int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
    return FloatDistribution(p.low, p.high, step=p.step, log=p.log)


def suggest_param(trial: optuna.Trial, p: Param) -> Value:
    if p.kind == "categorical":
        value = trial.suggest_categorical(p.name, list(p.choices))
        assert value is not None  # choices never hold None (TOML has no null)
        return value
    if p.kind == "bool":
        return trial.suggest_categorical(p.name, [False, True])
    assert p.low is not None and p.high is not None
    if p.kind == "int":
        return trial.suggest_int(p.name, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
    value = trial.suggest_float(p.name, p.low, p.high, step=p.step, log=p.log)
    return float(f"{value:.10g}")


def suggest(trial: optuna.Trial, space: SearchSpace, *, skip: Collection[str] = ()) -> dict[str, Value]:
    """Sample every active parameter in file order (conditions only look at earlier parameters); ``skip``: names
    the trial decides later by measuring (a batch cap the client plays: ``tuner.study``)."""
    params: dict[str, Value] = {}
    for p in space.params:
        if p.name not in skip and p.active(params):
            params[p.name] = suggest_param(trial, p)
    return params
