"""``[slo]`` across a study: whether a trial missed it, and, when no config kept it, the one that came closest
(a scenario's verdict itself is :meth:`tuner.trials.TrialRecord.verdict`)."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.trials._outcome import Outcome, outcome
from tuner.trials._ranking import is_counted, rank_value
from tuner.trials._verdicts import study_trials

__all__ = ["closest_to_slo", "misses_slo"]


def misses_slo(t: FrozenTrial) -> bool:
    """A COMPLETE trial that is infeasible because it confidently missed ``[slo]``."""
    return t.state == TrialState.COMPLETE and outcome(t) == Outcome.MISSES_SLO


def closest_to_slo(study: optuna.Study) -> FrozenTrial | None:
    """Among the configs that missed the SLO only (their answers were not wrong), the one whose worst scenario
    came nearest its target (the smallest ``slo`` constraint); ties go to the faster, then the earlier."""
    missed = [t for t in study_trials(study) if is_counted(t) and misses_slo(t)]
    if not missed:
        return None
    return min(missed, key=lambda t: (t.constraints.get("slo", 0.0), -rank_value(t, study.directions), t.number))
