"""What a trial reports between scenarios: the objective it is heading for, and the reference it is held to.

Optuna's dashboard plots intermediate values on the objective's axis and places a pruned trial at its last
one. A per-scenario tok/s there (700 for c8-short beside objectives of ~300) made pruned configs look twice
as good as the best. So after each scenario the trial reports a *partial objective* on the objective's
scale: the reference trial's objective times the weighted geometric mean of this trial's per-scenario ratios
to the reference over the scenarios measured so far ("if the rest goes as it went so far"). Without a
reference (the first trial) it is the weighted geomean of the scenarios measured so far. After the last
scenario both equal the trial's own objective.
"""

from __future__ import annotations

import math

import optuna
from optuna.trial import FrozenTrial

from tuner.bench import ReferenceLookup, ScenarioResult
from tuner.config import StudyConfig
from tuner.trials import attrs, best_trials

__all__ = ["PartialObjective", "measured_text", "reference_lookup"]


class PartialObjective:
    """The running objective of one trial (see the module docstring)."""

    def __init__(self, *, config: StudyConfig, reference: FrozenTrial | None) -> None:
        from tuner.study._objective import scenario_metric

        self._config = config
        self._metric = scenario_metric
        self._reference = reference
        self._per: dict[str, float] = {}

    @property
    def steps(self) -> list[str]:
        return list(self._per)

    def add(self, result: ScenarioResult) -> float:
        """Record one finished scenario; the partial objective after it."""
        from tuner.study._objective import weighted_geomean

        self._per[result.name] = self._metric(result, self._config.objective)
        scenarios = self._config.benchmark.scenarios
        ratios = self._ratios()
        if ratios is None or self._reference is None:
            return weighted_geomean(self._per, scenarios)
        return self._reference.values[0] * weighted_geomean(ratios, scenarios)

    def _ratios(self) -> dict[str, float] | None:
        """Per-scenario score over the reference's, or None when the reference lacks a measured scenario."""
        ref = self._reference
        if ref is None or not ref.values or not math.isfinite(ref.values[0]):
            return None
        out = {}
        for name, value in self._per.items():
            theirs = ref.user_attrs.get(attrs.scenario_key(name, "score"))
            if not isinstance(theirs, int | float) or theirs <= 0:
                return None  # a reference from before scores were stored: fall back to the plain geomean
            out[name] = value / float(theirs)
        return out


def projection_reference(study: optuna.Study, *, exclude: int) -> FrozenTrial | None:
    """The best feasible trial so far (single objective), the scale the partial objective is projected on."""
    if len(study.directions) > 1:
        return None
    best = [t for t in best_trials(study) if t.number != exclude]
    return best[0] if best else None


def reference_lookup(trial: optuna.Trial) -> ReferenceLookup | None:
    """The regression pruner's reference repeats for the benchmark's sequential policy (None: no pruner)."""
    from tuner.search import RegressionPruner

    pruner = trial.study.pruner
    if not isinstance(pruner, RegressionPruner) or len(trial.study.directions) > 1:
        return None
    return pruner.reference_lookup(trial.study, exclude=trial.number)


def measured_text(trial: optuna.Trial, config: StudyConfig) -> str:
    """``; c1-short 140.1 (142.6 ± 2.5, 2 repeats), ...``: every scenario the trial measured, in run order."""
    user = trial.user_attrs
    parts = []
    for s in config.benchmark.in_run_order():
        value = user.get(attrs.scenario_key(s.name, "score"))
        if not isinstance(value, int | float):
            continue
        point = user.get(attrs.scenario_key(s.name, "point"), value)
        hw = user.get(attrs.scenario_key(s.name, "half_width"))
        n = len(user.get(attrs.scenario_key(s.name, "repeats")) or ())
        spread = f" ± {hw:.1f}" if isinstance(hw, int | float) else ""
        parts.append(f"{s.name} {value:.1f} ({point:.1f}{spread}, {n} repeat{'s' if n != 1 else ''})")
    return "; " + ", ".join(parts) if parts else ""
