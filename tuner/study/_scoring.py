"""How a trial is scored, and what it is measured against: one module for both.

The score of a single-objective study is the lower end of the weighted geomean's interval (:func:`score`,
:func:`objective_bound`). What a trial is compared with is read from the study's history once, before the trial
runs (:func:`references_for`): the study only changes when a trial ends, so nothing read here goes stale while
this one runs, and no step of the trial looks into the study's history on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import optuna
from optuna.trial import FrozenTrial

from tuner.bench import ScenarioResult, WarmupLookup
from tuner.config import BenchmarkSection, ObjectiveSection, StudyConfig
from tuner.metrics import objective_point, objective_value
from tuner.search import RegressionPruner
from tuner.stats import ReferenceLookup
from tuner.study._warmups import first_passes_lookup
from tuner.trials import best_trials, candidates, record_of

__all__ = [
    "References",
    "Score",
    "last_finalist",
    "objective_bound",
    "reference_lookup",
    "references_for",
    "scenario_metric",
    "scenario_point",
    "score",
]


@dataclass(frozen=True, kw_only=True)
class Score:
    values: tuple[float, ...]
    per_scenario: dict[str, float] = field(default_factory=dict)


def scenario_metric(r: ScenarioResult, objective: ObjectiveSection) -> float:
    """The figure of one scenario the objective combines (its score, a lower bound)."""
    return objective_value(r, objective.metric)


def scenario_point(r: ScenarioResult, objective: ObjectiveSection) -> float:
    """The point estimate :func:`scenario_metric` is the lower bound of."""
    return objective_point(r, objective.metric)


def objective_bound(points: Mapping[str, float], scores: Mapping[str, float], section: BenchmarkSection) -> float:
    """The lower end of the weighted geomean's interval, from per-scenario points and lower bounds.

    With normalised weights ``w`` over the scenarios in ``points`` and per-scenario half-widths on logs
    ``h = log(point / score)``: ``exp(sum(w * log point) - sqrt(sum(w**2 * h**2)))``. Scenario errors are
    independent (different repeats at different times), so their half-widths add in quadrature; the geomean
    of the per-scenario lower bounds would add them linearly, as if every scenario erred low at once.
    """
    weights = {k: w for k, w in section.objective_weights().items() if k in points}
    if not weights:
        weights = dict.fromkeys(points, 1.0)
    total = sum(weights.values())
    log_point = sum(w * math.log(max(points[k], 1e-9)) for k, w in weights.items()) / total
    spread = sum(
        (w / total * max(0.0, math.log(max(points[k], 1e-9)) - math.log(max(scores[k], 1e-9)))) ** 2
        for k, w in weights.items()
    )
    return math.exp(log_point - math.sqrt(spread))


def score(results: Sequence[ScenarioResult], objective: ObjectiveSection, section: BenchmarkSection) -> Score:
    """The trial's values: the scenarios' lower bounds (multi-objective) or the geomean's lower bound."""
    per = {r.name: scenario_metric(r, objective) for r in results}
    if objective.kind == "multi":
        return Score(values=tuple(per[name] for name in objective.objectives), per_scenario=per)
    points = {r.name: scenario_point(r, objective) for r in results}
    return Score(values=(objective_bound(points, per, section),), per_scenario=per)


# -- what a trial is measured against -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class References:
    """What one trial is compared with, read from the study before it runs (None: nothing to compare with)."""

    pruner: ReferenceLookup | None = None
    """The regression pruner's reference repeats per scenario (the benchmark's sequential stops)."""
    finalist: ReferenceLookup | None = None
    """The repeats of the last config the end-of-study confirmation would re-measure, the study's noise pooled
    without it: the objective's extra repeats only decide whether this config joins the finalists."""
    first_passes: WarmupLookup | None = None
    """The study's evidence on first passes (``[benchmark] warmup = "auto"``)."""
    best: FrozenTrial | None = None
    """The best feasible trial so far: the scale the partial objective is reported on, and what ``[gate] when =
    "contenders"`` measures "behind the best" against."""
    max_rate: float | None = None
    """``kind = "max_rate"``: the best trial's highest met rate, where this trial's rate search starts."""


def references_for(study: optuna.Study, config: StudyConfig, *, trial_number: int) -> References:
    """Everything trial ``trial_number`` is measured against, from the study as it is now."""
    finalist = last_finalist(study, config, exclude=trial_number)
    best = [t for t in best_trials(study) if t.number != trial_number] if len(study.directions) == 1 else []
    return References(
        pruner=reference_lookup(study, exclude=trial_number),
        finalist=reference_lookup(study, exclude=trial_number, against=finalist) if finalist else None,
        first_passes=first_passes_lookup(study, config, trial_number=trial_number),
        best=best[0] if best else None,
        max_rate=_max_rate(best[0]) if best else None,
    )


def _max_rate(t: FrozenTrial) -> float | None:
    rate = record_of(t).max_rate_rps
    return rate if rate is not None and rate > 0 else None


def last_finalist(study: optuna.Study, config: StudyConfig, *, exclude: int) -> FrozenTrial | None:
    """The last config the end-of-study confirmation would re-measure if the study ended now (the
    ``confirm_top``-th best, ``exclude`` left out); None without a confirmation or with fewer candidates."""
    k = config.search.confirm_top
    if k < 2:
        return None
    ranked = [t for t in candidates(study) if t.number != exclude]
    return ranked[k - 1] if len(ranked) >= k else None


def reference_lookup(
    study: optuna.Study, *, exclude: int, against: FrozenTrial | None = None
) -> ReferenceLookup | None:
    """The regression pruner's reference repeats (None: no pruner), or ``against``'s, with the study's noise
    pooled without the candidate and the reference."""
    pruner = study.pruner
    if not isinstance(pruner, RegressionPruner) or len(study.directions) > 1:
        return None
    return pruner.reference_lookup(study, exclude=exclude, against=against)
