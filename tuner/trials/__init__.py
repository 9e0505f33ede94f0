"""Which trials count, which are feasible, which is best: the study's accounting, read from user attrs.

Dependency-free (Optuna only), so the loop, the search strategies, the report and the CLI all read a study the
same way without importing each other. The user attr names every trial carries are in :mod:`tuner.trials.attrs`.
"""

from __future__ import annotations

import math

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.trials import attrs
from tuner.trials._confirmed import CONFIRMATION, confirmation_text, recommended_trial
from tuner.trials._optuna import current_trial, rdb_backend, set_trial_attr, storage_of, study_id, trial_id
from tuner.trials._verdicts import GateVerdict, gate_verdicts, record_gate_verdict, study_trials

__all__ = [
    "CONFIRMATION",
    "GateVerdict",
    "attrs",
    "best_trials",
    "client_bound_scenarios",
    "confirmation_text",
    "counted_trials",
    "current_trial",
    "gate_pending",
    "gate_verdicts",
    "is_counted",
    "is_feasible",
    "rdb_backend",
    "recommended_trial",
    "record_gate_verdict",
    "scenario_repeats",
    "set_trial_attr",
    "storage_of",
    "study_id",
    "study_trials",
    "trial_id",
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
    :func:`study_trials` applies: read a study's trials through it.
    """
    return (
        t.state == TrialState.COMPLETE
        and all(v <= 0 for v in t.constraints.values())
        and t.user_attrs.get(attrs.CORRECT, True) is not False
        and not t.user_attrs.get(attrs.GATE_SKIPPED)
    )


def gate_pending(t: FrozenTrial) -> bool:
    """A COMPLETE trial of a ``when = "final"`` study that has no end-of-study verdict (yet, or ever: only the
    finalists are gated)."""
    user = t.user_attrs
    return t.state == TrialState.COMPLETE and bool(user.get(attrs.GATE_DEFERRED)) and attrs.CORRECT not in user


def counted_trials(study: optuna.Study) -> int:
    return sum(1 for t in study.get_trials(deepcopy=False) if is_counted(t))


def best_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Feasible, counted COMPLETE trials: the best one (single objective) or the Pareto front (multi)."""
    done = [t for t in study_trials(study) if is_counted(t) and is_feasible(t)]
    if not done:
        return []
    if len(study.directions) == 1:
        return [max(done, key=lambda t: t.values[0])]
    front = []
    for t in done:
        dominated = any(
            all(o >= v for o, v in zip(other.values, t.values, strict=True)) and other.values != t.values
            for other in done
        )
        if not dominated:
            front.append(t)
    return sorted(front, key=lambda t: t.number)


def client_bound_scenarios(t: FrozenTrial) -> list[str]:
    """Scenarios measured while the load generator was the bottleneck: their figures understate the server."""
    suffix = "." + attrs.CLIENT_BOUND
    return sorted(k[: -len(suffix)] for k, v in t.user_attrs.items() if k.endswith(suffix) and v is True)


def scenario_repeats(t: FrozenTrial, scenario: str) -> list[float]:
    """The trial's per-repeat output tok/s of ``scenario`` (``<scenario>.repeats``; empty when not measured)."""
    raw = t.user_attrs.get(attrs.scenario_key(scenario, "repeats"))
    if not isinstance(raw, list):
        return []
    return [float(x) for x in raw if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)]
