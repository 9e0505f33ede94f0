"""Reading a finished study: per-scenario bests (``tune best``, the report)."""

from __future__ import annotations

from collections.abc import Iterable

import optuna
from optuna.trial import FrozenTrial

from tuner.trials import is_counted, is_feasible, study_trials
from tuner.trials.attrs import scenario_key

__all__ = ["per_scenario_best"]


def per_scenario_best(study: optuna.Study, scenarios: Iterable[str]) -> dict[str, FrozenTrial]:
    """For each scenario, the feasible counted trial with the highest ``<scenario>.tok_s``.

    A multi-objective study has no single best; this answers "which config should serve a c1 workload" from
    any study. Only COMPLETE, feasible trials count (a pruned trial's partial figures are not evidence of a
    working config). Scenarios without any such trial are left out.
    """
    done = [t for t in study_trials(study) if is_counted(t) and is_feasible(t)]
    best: dict[str, FrozenTrial] = {}
    for name in scenarios:
        key = scenario_key(name, "tok_s")
        ranked = [t for t in done if isinstance(t.user_attrs.get(key), int | float)]
        if ranked:
            best[name] = max(ranked, key=lambda t: (t.user_attrs[key], -t.number))
    return best
