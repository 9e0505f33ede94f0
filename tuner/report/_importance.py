"""Parameter importances: one evaluator, one set of trials, for the report and the dashboard alike.

optuna-dashboard computes its own (PED-ANOVA with its defaults over every COMPLETE trial, wrong answers
included), which ranked the parameters differently from the report. Both now show :func:`importances`: PED-ANOVA
(deterministic: no seed to fix) over the feasible trials, one config each, its "good" quantile widened to hold at
least three trials.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.trials import candidates, rank_value

__all__ = ["MIN_IMPORTANCE_TRIALS", "dashboard_importances", "feasible_study", "importance_target", "importances"]

MIN_IMPORTANCE_TRIALS = 6
"""Below this many feasible trials an importance ranking is noise dressed as a chart: it is skipped."""

LABEL = "PED-ANOVA over feasible trials"


def feasible_study(study: optuna.Study) -> optuna.Study:
    """An in-memory copy holding one trial per feasible config (for importances and their plot).

    Infeasible configs are fast because they are wrong, and repeats of a measured config would weigh it twice.
    """
    copy = optuna.create_study(directions=study.directions)
    copy.add_trials(candidates(study))
    return copy


Target = Callable[[FrozenTrial], float]


def importance_target(study: optuna.Study, objective: int | None = None) -> tuple[Target | None, str]:
    """What the ranking explains: the objective (or ``objective``'s value), or a multi-objective study's geomean."""
    if objective is not None:
        names = study.metric_names or [f"objective {i}" for i in range(len(study.directions))]
        return (lambda t: t.values[objective]), names[objective]
    if len(study.directions) == 1:
        return None, (study.metric_names or ["score"])[0]
    return rank_value, "geometric mean of the objectives"


def importances(study: optuna.Study, *, objective: int | None = None) -> tuple[dict[str, float], Any, str | None]:
    """PED-ANOVA importances over feasible trials: (importances, evaluator, reason when skipped)."""
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    feasible = feasible_study(study)
    n = len(feasible.trials)
    if n < MIN_IMPORTANCE_TRIALS:
        return {}, None, f"needs at least {MIN_IMPORTANCE_TRIALS} feasible trials (this study has {n})"
    # PED-ANOVA compares the top `target_quantile` of trials with the rest; with few trials the default 10%
    # is one trial, so the "good" set is widened to hold at least three.
    evaluator = PedAnovaImportanceEvaluator(target_quantile=min(0.5, max(0.1, 3 / n)))
    target, _ = importance_target(study, objective)
    try:
        with warnings.catch_warnings():
            # "Some regimes ... have less than 2 trials": expected for conditional params; the report says
            # how many trials the ranking rests on.
            warnings.simplefilter("ignore", UserWarning)
            values = get_param_importances(feasible, evaluator=evaluator, target=target)
    except (ValueError, RuntimeError) as exc:
        return {}, None, f"PED-ANOVA could not rank the parameters: {exc}"
    if not values:
        return {}, None, "no parameter varied among the feasible trials"
    return values, evaluator, None


def dashboard_importances(study: optuna.Study) -> dict[str, Any]:
    """The dashboard's ``/param_importances`` answer, with :func:`importances` in place of its own."""
    out = []
    for objective in range(len(study.directions)):
        values, _, _ = importances(study, objective=objective if len(study.directions) > 1 else None)
        out.append(
            [
                {"name": name, "importance": value, "distribution": _distribution(study, name)}
                for name, value in values.items()
            ]
        )
    return {"param_importances": out}


def _distribution(study: optuna.Study, name: str) -> str:
    for t in study.get_trials(deepcopy=False):
        if name in t.distributions:
            return type(t.distributions[name]).__name__
    return "FloatDistribution"
