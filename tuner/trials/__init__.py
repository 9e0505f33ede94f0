"""A study's accounting, read from user attrs: which trials count, which are feasible, how they rank, what
became of each, and which one is recommended. One rule per concept, here, for every reader.

Dependency-free (Optuna only), so the loop, the search strategies, the report and the CLI all read a study the
same way without importing each other. The user attr names every trial carries are in :mod:`tuner.trials.attrs`.
"""

from __future__ import annotations

import math

from optuna.trial import FrozenTrial

from tuner.trials import attrs
from tuner.trials._confirmed import CONFIRMATION, confirmation_text
from tuner.trials._optuna import (
    claims_table,
    current_trial,
    pop_waiting,
    rdb_backend,
    set_trial_attr,
    storage_of,
    study_id,
    trial_id,
    with_extra_trials,
)
from tuner.trials._outcome import (
    DIED,
    ENVIRONMENT,
    FEASIBLE,
    MISSES_SLO,
    NOT_GATED,
    NOT_GATED_YET,
    NOT_STARTED,
    OTHER,
    OUTCOMES,
    SLOWER,
    WRONG,
    failure_outcome,
    infeasibility,
    outcome,
    outcome_text,
    outcome_words,
)
from tuner.trials._ranking import (
    best_trials,
    candidates,
    counted_trials,
    feasible,
    is_counted,
    is_feasible,
    rank_value,
)
from tuner.trials._recommend import (
    GATE_NONE,
    GATE_PASSED,
    GATE_PENDING,
    Recommendation,
    current_confirmation,
    recommended,
)
from tuner.trials._slo import closest_to_slo, misses_slo, slo_attainment
from tuner.trials._verdicts import GateVerdict, gate_pending, gate_verdicts, record_gate_verdict, study_trials
from tuner.trials._warm import CarriedTrial, WarmStart, warm_start_of

__all__ = [
    "CONFIRMATION",
    "DIED",
    "ENVIRONMENT",
    "FEASIBLE",
    "GATE_NONE",
    "GATE_PASSED",
    "GATE_PENDING",
    "MISSES_SLO",
    "NOT_GATED",
    "NOT_GATED_YET",
    "NOT_STARTED",
    "OTHER",
    "OUTCOMES",
    "SLOWER",
    "WRONG",
    "CarriedTrial",
    "GateVerdict",
    "Recommendation",
    "WarmStart",
    "attrs",
    "best_trials",
    "candidates",
    "claims_table",
    "client_bound_scenarios",
    "closest_to_slo",
    "confirmation_text",
    "counted_trials",
    "current_confirmation",
    "current_trial",
    "failure_outcome",
    "feasible",
    "gate_pending",
    "gate_verdicts",
    "infeasibility",
    "is_counted",
    "is_feasible",
    "misses_slo",
    "outcome",
    "outcome_text",
    "outcome_words",
    "pop_waiting",
    "rank_value",
    "rdb_backend",
    "recommended",
    "record_gate_verdict",
    "scenario_repeats",
    "set_trial_attr",
    "slo_attainment",
    "storage_of",
    "study_id",
    "study_trials",
    "trial_id",
    "warm_start_of",
    "with_extra_trials",
]


def client_bound_scenarios(t: FrozenTrial) -> list[str]:
    """Scenarios measured while the load generator was the bottleneck: their figures understate the server."""
    suffix = "." + attrs.CLIENT_BOUND
    return sorted(k[: -len(suffix)] for k, v in t.user_attrs.items() if k.endswith(suffix) and v is True)


def scenario_repeats(t: FrozenTrial, scenario: str) -> list[float]:
    """The trial's per-repeat output tok/s of ``scenario`` (``<scenario>.repeats``; empty when not measured)."""
    raw = t.user_attrs.get(attrs.scenario_key(scenario, "repeats"))
    if not isinstance(raw, list):
        return []
    return [float(x) for x in raw if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)]
