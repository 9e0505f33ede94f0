"""``kind = "geomean"`` (the default): the weighted geometric mean of the scenarios' throughput, as a lower bound.

A trial's value is the lower end of the weighted geomean's interval (:func:`~tuner.objective._throughput.bound`),
so a config measured once cannot outrank one measured precisely by luck. Between scenarios the trial reports a
*partial objective* on the objective's scale (:meth:`GeomeanObjective.intermediate`), which the regression pruner
reads. The confirmation pools each finalist's fresh repeats with the study's noise and scores them like a trial,
and races the close ones; the speed-up is side by side when the confirmation measured the baseline beside the
recommendation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.bench import ScenarioResult
from tuner.metrics import objective_point, objective_point_key, objective_value
from tuner.objective._base import BaseObjective, Score, Visit, register
from tuner.objective._confirmed import confirmed_pair
from tuner.objective._figures import Figure, Speedup
from tuner.objective._throughput import bound, pooled, repeats, speedup_of, trials_speedup
from tuner.stats import EMPTY_POOL, Noise, Reference, objective_slower
from tuner.trials import record_of

__all__ = ["GeomeanObjective"]


@register
class GeomeanObjective(BaseObjective):
    kind = "geomean"
    throughput_pruning = True
    races = True

    @property
    def refines_repeats(self) -> bool:
        # The objective-level repeat rule models aggregate throughput's noise: other figures decide per scenario.
        return self.section.metric == "output_tok_s"

    def metric_names(self) -> list[str]:
        return [f"weighted geomean {self.section.metric}"]

    # -- a trial -------------------------------------------------------------------------------------------------

    def score(self, results: Sequence[ScenarioResult]) -> Score:
        metric = self.section.metric
        per = {r.name: objective_value(r, metric) for r in results}
        points = {r.name: objective_point(r, metric) for r in results}
        return Score(values=(bound(points, per, self.config.benchmark),), per_scenario=per)

    def intermediate(self, results: Sequence[ScenarioResult], reference: FrozenTrial | None) -> float | None:
        """The partial objective: the reference trial's objective times the ratio of this trial's objective to
        the reference's, both over the scenarios measured so far ("if the rest goes as it went so far"); without
        a usable reference, the objective of the scenarios so far. After the last scenario, the trial's own.

        Optuna's dashboard plots intermediate values on the objective's axis and places a pruned trial at its last
        one: a per-scenario tok/s there (700 for c8-short beside objectives of ~300) made pruned configs look twice
        as good as the best."""
        mine = self.score(results).values[0]
        theirs = self._reference_bound(reference, [r.name for r in results])
        if theirs is None or reference is None or len(results) == len(self.config.benchmark.scenarios):
            return mine
        return reference.values[0] * mine / theirs

    def _reference_bound(self, ref: FrozenTrial | None, names: Sequence[str]) -> float | None:
        """The reference's objective over ``names`` (None: no usable reference)."""
        if ref is None or not ref.values or not math.isfinite(ref.values[0]):
            return None
        record = record_of(ref)
        stored = record.score
        point_key = objective_point_key(self.section.metric)
        scores, points = {}, {}
        for name in names:
            theirs = stored.get(name) if stored is not None else None
            if not isinstance(theirs, int | float):
                theirs = record.figure(name, "score")
            if not isinstance(theirs, int | float) or theirs <= 0:
                return None  # a reference from before scores were stored: fall back to the plain objective
            point = record.figure(name, point_key)
            scores[name] = float(theirs)
            points[name] = float(point) if isinstance(point, int | float) and point >= theirs else float(theirs)
        return bound(points, scores, self.config.benchmark)

    # -- the confirmation ----------------------------------------------------------------------------------------

    def confirmed_value(self, visits: Sequence[Visit], noise: Mapping[str, Noise | None]) -> float:
        """The finalist's fresh repeats over every visit, pooled with the study's noise, scored like a trial."""
        return self.score(pooled(self.config, [r for v in visits for r in v], noise)).values[0]

    def confirmed_figures(self, visits: Sequence[Visit], noise: Mapping[str, Noise | None]) -> dict[str, Any]:
        """Per scenario, ``[point, lower bound]`` output tok/s of the pooled fresh repeats."""
        return {
            r.name: [round(r.point, 3), round(r.score, 3)]
            for r in pooled(self.config, [r for v in visits for r in v], noise)
            if r.point is not None and r.score is not None
        }

    def contenders(
        self, alive: Sequence[FrozenTrial], visits: Mapping[int, Sequence[ScenarioResult]],
        noise: Mapping[str, Noise | None],
    ) -> list[FrozenTrial]:  # fmt: skip
        """The leader (the best by its fresh repeats) and every finalist not confidently below the leader's
        objective times ``1 + precision`` (the regression pruner's test with a negative margin: could it still
        beat the leader by more than the study's precision?)."""
        if len(alive) < 2:
            return list(alive)
        values = {t.number: self.confirmed_value([tuple(visits[t.number])], noise) for t in alive}
        leader = max(alive, key=lambda t: values[t.number])
        metric, search = self.section.metric, self.config.search
        references = {
            name: Reference(
                samples=tuple(xs),
                confidence=search.prune_confidence,
                noise=noise[name] if noise.get(name) is not None else EMPTY_POOL,
            )
            for name, xs in repeats(visits[leader.number], metric).items()
        }
        weights = {s.name: s.weight for s in self.config.benchmark.scenarios}
        return [
            t
            for t in alive
            if t is leader
            or not objective_slower(
                repeats(visits[t.number], metric),
                references=references,
                weights=weights,
                margin=-self.config.benchmark.precision,
            )
        ]

    # -- the views -----------------------------------------------------------------------------------------------

    def format(self, value: float) -> str:
        return f"{value:.1f}"

    def figure(self, t: FrozenTrial) -> Figure | None:
        """The score with the objective's point estimate (the weighted geomean of the scenarios' points)."""
        if t.state != TrialState.COMPLETE or not t.values or len(t.values) != 1 or not math.isfinite(t.values[0]):
            return None
        points = self._points(t)
        weights = {k: w for k, w in self.config.benchmark.objective_weights().items() if k in points}
        if not weights or len(weights) != len(self.config.benchmark.objective_weights()):
            return Figure(score=t.values[0])
        total = sum(weights.values())
        point = math.exp(sum(w * math.log(points[k]) for k, w in weights.items()) / total)
        return Figure(score=t.values[0], point=point)

    def _points(self, t: FrozenTrial) -> dict[str, float]:
        key, record = objective_point_key(self.section.metric), record_of(t)
        found = {s.name: record.number_figure(s.name, key) for s in self.config.benchmark.scenarios}
        return {k: p for k, p in found.items() if p is not None and p > 0}

    def speedup(self, study: optuna.Study, best: FrozenTrial, baseline: FrozenTrial) -> Speedup | None:
        """Side by side from the confirmation's fresh repeats when it measured both, else from the two trials'
        own figures, measured hours apart."""
        side = self._side_by_side(study, best.number, baseline.number)
        return side if side is not None else trials_speedup(best, baseline, self.config)

    def _side_by_side(self, study: optuna.Study, best: int, baseline: int) -> Speedup | None:
        pair = confirmed_pair(study, best, baseline)
        if pair is None:
            return None
        mine, theirs, visits = pair
        parts: dict[str, tuple[float, float, float | None]] = {}
        for name, w in self.config.benchmark.objective_weights().items():
            a, b = (mine or {}).get(name), (theirs or {}).get(name)
            if not a or not b or min(*a, *b) <= 0:
                return None
            half = [math.log(p / s) if s <= p else None for p, s in (a, b)]
            parts[name] = (w, math.log(a[0] / b[0]), math.hypot(*half) if None not in half else None)  # type: ignore[arg-type]
        found = speedup_of(parts) if parts else None
        if found is None:
            return None
        return Speedup(ratio=found.ratio, low=found.low, high=found.high, side_by_side=True, baseline_visits=visits)

    def describe(self, repeats: str) -> str:
        return (
            f"Maximise the weighted geometric mean of per-scenario `{self.section.metric}` (score = lower end of its "
            f"{self.config.benchmark.confidence:.0%} interval: per-scenario t intervals on log throughput over "
            f"{repeats}, added in quadrature)."
        )
