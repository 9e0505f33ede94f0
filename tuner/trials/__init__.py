"""A study's accounting, read from user attrs: which trials count, which are feasible, how they rank, what
became of each, and which one is recommended. One rule per concept, here, for every reader.

Dependency-free (Optuna only), so the loop, the search strategies, the report and the CLI all read a study the
same way without importing each other. A trial's facts are read through :class:`TrialRecord` (:func:`record_of`)
and set through the writers (:func:`write`, :func:`enqueue`, ...); the user attr names they store are private
(:mod:`tuner.trials._attrs`). The few Optuna internals the fleet, recovery and dashboard need are their own door,
:mod:`tuner.trials.adapter`.
"""

from tuner.trials._outcome import Outcome
from tuner.trials._ranking import (
    baseline_trial,
    best_trials,
    candidates,
    counted_trials,
    feasible,
    is_counted,
    rank_value,
)
from tuner.trials._recommend import Recommendation, current_confirmation, recommended
from tuner.trials._record import (
    StudyRecord,
    TrialRecord,
    enqueue,
    record_of,
    study_record,
    write,
    write_scenario,
    write_stored,
    write_study,
)
from tuner.trials._slo import closest_to_slo
from tuner.trials._verdicts import record_gate_verdict, study_trials
from tuner.trials._warm import CarriedTrial, WarmStart

__all__ = [
    "CarriedTrial",
    "Outcome",
    "Recommendation",
    "StudyRecord",
    "TrialRecord",
    "WarmStart",
    "baseline_trial",
    "best_trials",
    "candidates",
    "closest_to_slo",
    "counted_trials",
    "current_confirmation",
    "enqueue",
    "feasible",
    "is_counted",
    "rank_value",
    "recommended",
    "record_gate_verdict",
    "record_of",
    "study_record",
    "study_trials",
    "write",
    "write_scenario",
    "write_stored",
    "write_study",
]
