"""``kind = "multi"``: each named scenario's throughput maximised on its own; the answer is the Pareto front.

Optuna has no intermediate values for a multi-objective study, so nothing is pruned between scenarios, and there is
no single ranking for a confirmation to re-measure: the recommendation is the front's member with the highest
geometric mean (:func:`tuner.trials.recommended`).
"""

from __future__ import annotations

from collections.abc import Sequence

from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

from tuner.bench import ScenarioResult
from tuner.metrics import objective_value
from tuner.objective._base import Score, register
from tuner.objective._geomean import GeomeanObjective

__all__ = ["MultiObjective"]


@register
class MultiObjective(GeomeanObjective):
    kind = "multi"
    throughput_pruning = False
    races = False

    @property
    def refines_repeats(self) -> bool:
        return False

    def directions(self) -> list[StudyDirection]:
        return [StudyDirection.MAXIMIZE] * len(self.section.objectives)

    def metric_names(self) -> list[str]:
        return [f"{name} {self.section.metric}" for name in self.section.objectives]

    def score(self, results: Sequence[ScenarioResult]) -> Score:
        per = {r.name: objective_value(r, self.section.metric) for r in results}
        return Score(values=tuple(per[name] for name in self.section.objectives), per_scenario=per)

    def intermediate(self, results: Sequence[ScenarioResult], reference: FrozenTrial | None) -> float | None:
        return None

    def describe(self, repeats: str) -> str:
        names = ", ".join(f"`{n}`" for n in self.section.objectives)
        return f"Maximise `{self.section.metric}` in each of: {names} (Pareto front)."
