"""What a finished (or running) study says, read from the trials' user attrs: the one place that decides which
trial is feasible, which one is the baseline, how trials rank and what a speed-up over the baseline is.

Every output of `tune` (report, export, dashboard marks) goes through these functions, so none of them can
call an infeasible trial "best" in its own way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.space import format_value
from tuner.trials import (
    attrs,
    best_trials,
    gate_pending,
    is_counted,
    is_feasible,
    recommended_trial,
    scenario_repeats,
    study_trials,
)

__all__ = [
    "OUTCOMES",
    "FailureGroup",
    "ScenarioComparison",
    "baseline_trial",
    "best_feasible",
    "compare_scenarios",
    "failure_groups",
    "feasibility_label",
    "format_value",
    "infeasibility",
    "outcome",
    "params_text",
    "rank_value",
    "ranked_feasible",
    "ratio_ci",
    "recommended",
    "scenario_figure",
]


def infeasibility(constraints: Mapping[str, float], user_attrs: Mapping[str, Any]) -> str | None:
    """Why a measured config is not eligible (``gate 3/5``), or None when it is feasible."""
    reasons = []
    gate = user_attrs.get(attrs.GATE)
    if user_attrs.get(attrs.CORRECT) is False or constraints.get("correctness", 0) > 0:
        reasons.append(f"gate {gate}" if gate else "gate failed")
    reasons += [f"{k}={v:g}" for k, v in sorted(constraints.items()) if v > 0 and k != "correctness"]
    return ", ".join(reasons) if reasons else None


def feasibility_label(t: FrozenTrial) -> str:
    """``feasible``, or why not (``INFEASIBLE gate 3/5``), or the trial's state when it has no verdict."""
    if t.state == TrialState.COMPLETE and t.user_attrs.get(attrs.GATE_SKIPPED):
        return f"NOT GATED ({t.user_attrs.get(attrs.GATE)}): never eligible as best"
    if gate_pending(t):
        return "NOT GATED (only finalists are, at the end of the study)"
    if t.state == TrialState.COMPLETE:
        why = infeasibility(t.constraints, t.user_attrs)
        if why is None and is_feasible(t):
            return "feasible"
        return f"INFEASIBLE {why or 'constraint violated'}"
    if t.state == TrialState.PRUNED:
        phase = t.user_attrs.get(attrs.FAILURE_PHASE)
        return f"FAILED [{phase}]" if phase else "PRUNED"
    if t.state == TrialState.FAIL and t.user_attrs.get(attrs.FAILURE_KIND) == "environment":
        return f"ENVIRONMENT [{t.user_attrs.get(attrs.FAILURE_PHASE)}] (not counted, retried)"
    return t.state.name


#: What became of a counted trial, in the order the report lists them.
OUTCOMES = (
    "feasible",
    "not gated (behind the best)",
    "not gated (only finalists are)",
    "infeasible (gate)",
    "regression-pruned",
    "failed to start",
    "died under load",
    "environment",
    "other failure",
)
FAILURE_KIND = "failure_kind"
"""User attr another part of `tune` may set: ``config`` or ``environment`` (the world's fault, not the config's)."""


def outcome(t: FrozenTrial) -> str:
    """One of :data:`OUTCOMES` for a COMPLETE or PRUNED trial (the state name otherwise)."""
    if t.state == TrialState.COMPLETE:
        if t.user_attrs.get(attrs.GATE_SKIPPED):
            return "not gated (behind the best)"
        if gate_pending(t):
            return "not gated (only finalists are)"
        return "feasible" if is_feasible(t) else "infeasible (gate)"
    if t.state != TrialState.PRUNED:
        return t.state.name
    user = t.user_attrs
    phase = str(user.get(attrs.FAILURE_PHASE) or "")
    if user.get(FAILURE_KIND) == "environment":
        return "environment"
    if user.get(attrs.PRUNED_SKIPPED) is not None:
        return "regression-pruned"
    if phase == "gate" or user.get(attrs.CORRECT) is False:
        return "infeasible (gate)"
    if phase in ("apply", "ready", "restart"):
        return "failed to start"
    if phase == "benchmark":
        return "died under load"
    return "other failure"


def rank_value(t: FrozenTrial) -> float:
    """One number to sort trials by: the objective, or the geometric mean of a multi-objective study's values."""
    values = t.values or []
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if len(positive) != len(values) or not values:
        return float("-inf")
    if len(values) == 1:
        return values[0]
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))


def ranked_feasible(study: optuna.Study) -> list[FrozenTrial]:
    """Counted, feasible, COMPLETE trials, best first (the same filter as :func:`tuner.study.best_trials`)."""
    done = [t for t in study_trials(study) if is_counted(t) and is_feasible(t)]
    return sorted(done, key=lambda t: (-rank_value(t), t.number))


def baseline_trial(study: optuna.Study) -> FrozenTrial | None:
    """The measured baseline (trial 0 normally); a retried baseline counts, a failed one is still returned."""
    candidates = [
        t
        for t in study_trials(study)
        if t.user_attrs.get(attrs.BASELINE) and t.state in (TrialState.COMPLETE, TrialState.PRUNED)
    ]
    complete = [t for t in candidates if t.state == TrialState.COMPLETE]
    pool = complete or candidates
    return pool[-1] if pool else None


def scenario_figure(t: FrozenTrial, scenario: str, field: str) -> float | None:
    value = t.user_attrs.get(attrs.scenario_key(scenario, field))
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def ratio_ci(
    candidate: Sequence[float], reference: Sequence[float], *, confidence: float = 0.95, n: int = 4000, seed: int = 0
) -> tuple[float, float] | None:
    """Bootstrap interval of ``median(candidate) / median(reference)``, each side resampled independently.

    The two trials ran on different server processes, so their repeats are independent samples; pairing them
    would invent a correlation. With 2-3 repeats per side the interval is crude (few distinct resamples) but
    it still shows whether a speed-up is inside the run-to-run noise. ``None`` without two samples per side.
    """
    c = np.asarray([x for x in candidate if x > 0], dtype=float)
    r = np.asarray([x for x in reference if x > 0], dtype=float)
    if c.size < 2 or r.size < 2:
        return None
    rng = np.random.default_rng(seed)
    cm = np.median(rng.choice(c, size=(n, c.size), replace=True), axis=1)
    rm = np.median(rng.choice(r, size=(n, r.size), replace=True), axis=1)
    ratios = cm / rm
    alpha = (1 - confidence) / 2
    low, high = np.quantile(ratios, [alpha, 1 - alpha])
    return float(low), float(high)


@dataclass(frozen=True, kw_only=True)
class ScenarioComparison:
    scenario: str
    baseline_tok_s: float | None
    baseline_ci: tuple[float, float] | None
    best_tok_s: float | None
    best_ci: tuple[float, float] | None
    speedup: float | None
    speedup_ci: tuple[float, float] | None
    accept_length: float | None
    baseline_accept_length: float | None


def _ci(t: FrozenTrial, scenario: str) -> tuple[float, float] | None:
    low, high = scenario_figure(t, scenario, "ci_low"), scenario_figure(t, scenario, "ci_high")
    return (low, high) if low is not None and high is not None else None


def compare_scenarios(
    best: FrozenTrial, baseline: FrozenTrial | None, scenarios: Sequence[str]
) -> list[ScenarioComparison]:
    """Per scenario: the best trial's tok/s against the baseline's, with the speed-up's bootstrap interval."""
    out = []
    for name in scenarios:
        best_tok = scenario_figure(best, name, "tok_s")
        base_tok = scenario_figure(baseline, name, "tok_s") if baseline is not None else None
        speedup = best_tok / base_tok if best_tok and base_tok else None
        interval = (
            ratio_ci(scenario_repeats(best, name), scenario_repeats(baseline, name)) if baseline is not None else None
        )
        out.append(
            ScenarioComparison(
                scenario=name,
                baseline_tok_s=base_tok,
                baseline_ci=_ci(baseline, name) if baseline is not None else None,
                best_tok_s=best_tok,
                best_ci=_ci(best, name),
                speedup=speedup,
                speedup_ci=interval if speedup is not None else None,
                accept_length=scenario_figure(best, name, "accept_length"),
                baseline_accept_length=scenario_figure(baseline, name, "accept_length") if baseline else None,
            )
        )
    return out


@dataclass(frozen=True, kw_only=True)
class FailureGroup:
    phase: str
    reason: str
    """The reason with its numbers blanked (``N``), so "allocate 1.56 GiB" and "allocate 2.1 GiB" group."""
    trials: tuple[int, ...]
    example: str


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _reason_key(reason: str) -> str:
    text = _NUMBER.sub("N", reason.strip().splitlines()[0] if reason.strip() else "(no reason recorded)")
    return text[:160]


def failure_groups(study: optuna.Study) -> list[FailureGroup]:
    """Counted trials that failed or were infeasible, grouped by :func:`outcome` and reason (regression-pruned
    trials are no failure: they are left out)."""
    groups: dict[tuple[str, str], list[FrozenTrial]] = {}
    for t in study_trials(study):
        if not is_counted(t):
            continue
        if t.state == TrialState.PRUNED:
            phase = outcome(t)
            if phase == "regression-pruned":
                continue  # not a failure: measured, and confidently slower than the reference
            reason = str(t.user_attrs.get(attrs.FAILURE_REASON) or "(no reason recorded)")
        elif not is_feasible(t) and not t.user_attrs.get(attrs.GATE_SKIPPED):
            phase, reason = "infeasible (gate)", feasibility_label(t).removeprefix("INFEASIBLE ")
        else:
            continue
        groups.setdefault((phase, _reason_key(reason)), []).append(t)
    out = [
        FailureGroup(
            phase=phase,
            reason=key,
            trials=tuple(t.number for t in ts),
            example=str(ts[0].user_attrs.get(attrs.FAILURE_REASON) or feasibility_label(ts[0]))[:400],
        )
        for (phase, key), ts in groups.items()
    ]
    return sorted(out, key=lambda g: (-len(g.trials), g.phase, g.reason))


def best_feasible(study: optuna.Study) -> list[FrozenTrial]:
    """The loop's own definition (single best, or the feasible Pareto front)."""
    return best_trials(study)


def recommended(study: optuna.Study) -> list[FrozenTrial]:
    """What `tune` recommends: the confirmed winner when the top was re-measured (else the best by its own
    measurement), or the feasible Pareto front of a multi-objective study."""
    best = best_trials(study)
    if len(best) == 1:
        return [recommended_trial(study) or best[0]]
    return best


def params_text(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())
