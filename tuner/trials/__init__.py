"""A study's accounting, read from user attrs: which trials count, which are feasible, how they rank, what
became of each, and which one is recommended. One rule per concept, here, for every reader.

Dependency-free (Optuna only), so the loop, the search strategies, the report and the CLI all read a study the
same way without importing each other. A trial's facts are read through :class:`TrialRecord` (:func:`record_of`)
and set through the writers (:func:`write`, :func:`enqueue`, ...); the user attr names they store are private
(:mod:`tuner.trials._attrs`).
"""

from __future__ import annotations

from optuna.trial import FrozenTrial

from tuner.trials._confirmed import CONFIRMATION, confirmation_text
from tuner.trials._optuna import (
    claims_table,
    current_trial,
    pop_waiting,
    storage_of,
    study_id,
    trial_id,
    with_extra_trials,
)
from tuner.trials._outcome import (
    DIED,
    FEASIBLE,
    MISSES_SLO,
    NOT_FINALIST,
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
from tuner.trials._recommend import Recommendation, current_confirmation, recommended
from tuner.trials._record import (
    StudyRecord,
    TrialRecord,
    as_user_attrs,
    enqueue,
    record_of,
    study_record,
    write,
    write_scenario,
    write_stored,
    write_study,
)
from tuner.trials._slo import closest_to_slo, misses_slo
from tuner.trials._verdicts import GateVerdict, gate_pending, gate_verdicts, record_gate_verdict, study_trials
from tuner.trials._warm import CarriedTrial, WarmStart, warm_start_of

__all__ = [
    "CONFIRMATION",
    "DIED",
    "FEASIBLE",
    "MISSES_SLO",
    "NOT_FINALIST",
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
    "StudyRecord",
    "TrialRecord",
    "WarmStart",
    "as_user_attrs",
    "best_trials",
    "candidates",
    "claims_table",
    "client_bound_scenarios",
    "closest_to_slo",
    "confirmation_text",
    "counted_trials",
    "current_confirmation",
    "current_trial",
    "enqueue",
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
    "recommended",
    "record_gate_verdict",
    "record_of",
    "scenario_repeats",
    "storage_of",
    "study_id",
    "study_record",
    "study_trials",
    "trial_id",
    "warm_start_of",
    "with_extra_trials",
    "write",
    "write_scenario",
    "write_stored",
    "write_study",
]


def client_bound_scenarios(t: FrozenTrial) -> list[str]:
    """Scenarios measured while the load generator was the bottleneck: their figures understate the server."""
    return record_of(t).client_bound_scenarios()


def scenario_repeats(t: FrozenTrial, scenario: str) -> list[float]:
    """The trial's per-repeat output tok/s of ``scenario`` (``<scenario>.repeats``; empty when not measured)."""
    return record_of(t).repeats(scenario)
