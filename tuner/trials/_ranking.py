"""Which trials count, which are feasible, and how they rank: the one definition every reader of a study uses."""

from __future__ import annotations

import math
from collections.abc import Sequence

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from tuner.trials import _attrs as attrs
from tuner.trials._verdicts import study_trials

__all__ = [
    "baseline_trial",
    "best_trials",
    "candidates",
    "counted_trials",
    "feasible",
    "is_counted",
    "is_feasible",
    "rank_value",
]


def is_counted(t: FrozenTrial) -> bool:
    """A trial that ran the server to a verdict (not a rejected sample, a repeat, or an interruption)."""
    if t.state not in (TrialState.COMPLETE, TrialState.PRUNED):
        return False
    return not (t.user_attrs.get(attrs.REJECTED) or t.user_attrs.get(attrs.DUPLICATE_OF) is not None)


def is_feasible(t: FrozenTrial) -> bool:
    """Eligible as the best: COMPLETE, no violated constraint, not failed by the gate, and gated when the study
    skips the gate for configs behind the best (an unchecked config is never recommended).

    A trial of a ``when = "final"`` study is provisionally feasible until its end-of-study verdict, which only
    :func:`~tuner.trials.study_trials` applies: read a study's trials through it (:func:`feasible` does).
    """
    return (
        t.state == TrialState.COMPLETE
        and all(v <= 0 for v in t.constraints.values())
        and t.user_attrs.get(attrs.CORRECT, True) is not False
        and not t.user_attrs.get(attrs.GATE_SKIPPED)
    )


def counted_trials(study: optuna.Study) -> int:
    return sum(1 for t in study.get_trials(deepcopy=False) if is_counted(t))


def rank_value(t: FrozenTrial, directions: Sequence[StudyDirection] = ()) -> float:
    """One number per trial, higher is better: the objective (its negative when ``directions`` minimise it), or
    the geometric mean of a multi-objective study's values (a minimised one inverted). Without ``directions``
    every value counts as maximised: the number a plot shows."""
    values = t.values or []
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if len(positive) != len(values) or not values:
        return float("-inf")
    minimised = [i < len(directions) and directions[i] == StudyDirection.MINIMIZE for i in range(len(values))]
    if len(values) == 1:
        return -values[0] if minimised[0] else values[0]
    logs = [-math.log(v) if m else math.log(v) for v, m in zip(values, minimised, strict=True)]
    return float(math.exp(sum(logs) / len(values)))


def feasible(study: optuna.Study) -> list[FrozenTrial]:
    """Counted, feasible, COMPLETE trials with the end-of-study gate verdicts applied, best first (ties: the
    earlier trial). Every ranking, recommendation, plot and export starts from this list."""
    done = [t for t in study_trials(study) if is_counted(t) and is_feasible(t)]
    return sorted(done, key=lambda t: (-rank_value(t, study.directions), t.number))


def candidates(study: optuna.Study) -> list[FrozenTrial]:
    """:func:`feasible` with one trial per distinct config (its best-ranked): what a confirmation re-measures."""
    out: list[FrozenTrial] = []
    for t in feasible(study):
        if all(t.params != o.params for o in out):
            out.append(t)
    return out


def best_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The best feasible trial by its own measurement (single objective), or the feasible Pareto front (multi,
    by trial number). What to *recommend* is :func:`~tuner.trials.recommended`, which also weighs the
    end-of-study confirmation."""
    done = feasible(study)
    if len(study.directions) == 1:
        return done[:1]
    signs = [-1.0 if d == StudyDirection.MINIMIZE else 1.0 for d in study.directions]

    def dominates(a: FrozenTrial, b: FrozenTrial) -> bool:
        pairs = [(s * x, s * y) for s, x, y in zip(signs, a.values, b.values, strict=True)]
        return all(x >= y for x, y in pairs) and a.values != b.values

    front = [t for t in done if not any(dominates(other, t) for other in done)]
    return sorted(front, key=lambda t: t.number)


def baseline_trial(study: optuna.Study) -> FrozenTrial | None:
    """The measured baseline (trial 0 normally); a retried baseline counts, a failed one is still returned."""
    measured = [
        t
        for t in study_trials(study)
        if t.user_attrs.get(attrs.BASELINE) and t.state in (TrialState.COMPLETE, TrialState.PRUNED)
    ]
    complete = [t for t in measured if t.state == TrialState.COMPLETE]
    pool = complete or measured
    return pool[-1] if pool else None
