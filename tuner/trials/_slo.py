"""What a trial's figures say about ``[slo]``: its measured attainment per scenario, and, when no config met the
SLO, the one that came closest. The attrs are read here only (a typed trial record can take them over).
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.trials import _attrs as attrs
from tuner.trials._outcome import MISSES_SLO, outcome
from tuner.trials._ranking import is_counted, rank_value
from tuner.trials._verdicts import study_trials

__all__ = ["closest_to_slo", "misses_slo", "slo_attainment"]


def misses_slo(t: FrozenTrial) -> bool:
    """A COMPLETE trial that is infeasible because it confidently missed ``[slo]``."""
    return t.state == TrialState.COMPLETE and outcome(t) == MISSES_SLO


def slo_attainment(t: FrozenTrial, scenario: str) -> dict[str, Any]:
    """``attainment`` with its interval (``low``, ``high``) as ``t`` measured it in ``scenario`` (None: not
    measured, or no SLO there)."""
    read = t.user_attrs.get
    return {
        "attainment": read(attrs.scenario_key(scenario, "attainment")),
        "low": read(attrs.scenario_key(scenario, "attainment_low")),
        "high": read(attrs.scenario_key(scenario, "attainment_high")),
    }


def closest_to_slo(study: optuna.Study) -> FrozenTrial | None:
    """Among the configs that missed the SLO only (their answers were not wrong), the one whose worst scenario
    came nearest its target (the smallest ``slo`` constraint); ties go to the faster, then the earlier."""
    missed = [t for t in study_trials(study) if is_counted(t) and misses_slo(t)]
    if not missed:
        return None
    return min(missed, key=lambda t: (t.constraints.get("slo", 0.0), -rank_value(t), t.number))
