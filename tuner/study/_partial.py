"""What a trial reports between scenarios: the objective it is heading for, and the reference it is held to.

Optuna's dashboard plots intermediate values on the objective's axis and places a pruned trial at its last
one. A per-scenario tok/s there (700 for c8-short beside objectives of ~300) made pruned configs look twice
as good as the best. So after each scenario the trial reports a *partial objective* on the objective's
scale: the reference trial's objective times the ratio of this trial's objective to the reference's, both
over the scenarios measured so far ("if the rest goes as it went so far"). Without a reference (the first
trial) it is the objective of the scenarios measured so far. After the last scenario both are the trial's own
objective.
"""

from __future__ import annotations

import math

import optuna
from optuna.trial import FrozenTrial

from tuner.bench import ScenarioResult
from tuner.config import StudyConfig
from tuner.metrics import objective_point_key
from tuner.study._scoring import objective_bound, scenario_metric, scenario_point
from tuner.trials import record_of

__all__ = ["PartialObjective", "measured_text"]


class PartialObjective:
    """The running objective of one trial (see the module docstring)."""

    def __init__(self, *, config: StudyConfig, reference: FrozenTrial | None) -> None:
        self._config = config
        self._reference = reference
        self._scores: dict[str, float] = {}
        self._points: dict[str, float] = {}

    @property
    def steps(self) -> list[str]:
        return list(self._scores)

    def add(self, result: ScenarioResult) -> float:
        """Record one finished scenario; the partial objective after it."""
        objective, section = self._config.objective, self._config.benchmark
        self._scores[result.name] = scenario_metric(result, objective)
        self._points[result.name] = scenario_point(result, objective)
        mine = objective_bound(self._points, self._scores, section)
        theirs = self._reference_bound()
        if theirs is None or self._reference is None or len(self._scores) == len(section.scenarios):
            return mine
        return self._reference.values[0] * mine / theirs

    def _reference_bound(self) -> float | None:
        """The reference's objective over the scenarios measured so far (None: no usable reference)."""
        ref = self._reference
        if ref is None or not ref.values or not math.isfinite(ref.values[0]):
            return None
        record = record_of(ref)
        stored = record.score
        point_key = objective_point_key(self._config.objective.metric)
        scores, points = {}, {}
        for name in self._scores:
            theirs = stored.get(name) if stored is not None else None
            if not isinstance(theirs, int | float):
                theirs = record.figure(name, "score")
            if not isinstance(theirs, int | float) or theirs <= 0:
                return None  # a reference from before scores were stored: fall back to the plain objective
            point = record.figure(name, point_key)
            scores[name] = float(theirs)
            points[name] = float(point) if isinstance(point, int | float) and point >= theirs else float(theirs)
        return objective_bound(points, scores, self._config.benchmark)


def measured_text(trial: optuna.Trial, config: StudyConfig) -> str:
    """``; c1-short 140.1 (142.6 ± 2.5, 2 repeats), ...``: every scenario the trial measured, in run order."""
    record = record_of(trial)
    parts = []
    for s in config.benchmark.in_run_order():
        value = record.figure(s.name, "score")
        if not isinstance(value, int | float):
            continue
        point = record.scenarios[s.name].get("point", value)
        hw = record.figure(s.name, "half_width")
        n = len(record.figure(s.name, "repeats") or ())
        spread = f" ± {hw:.1f}" if isinstance(hw, int | float) else ""
        parts.append(f"{s.name} {value:.1f} ({point:.1f}{spread}, {n} repeat{'s' if n != 1 else ''})")
    return "; " + ", ".join(parts) if parts else ""
