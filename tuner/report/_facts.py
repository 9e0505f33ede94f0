"""What a study says, read from the trials' user attrs: the figures every view prints, the baseline, speed-ups
over it, failures by reason, a trial's row. Which trials are feasible and which one is recommended is
:mod:`tuner.trials`'s (one rule each); this module turns them into the numbers and words people read, so the
console, ``tune status`` / ``best`` / ``export``, the report and the dashboard all show the same ones.

Figures: a scenario's figure is its point estimate (the geometric mean of its repeats) with the half-width of its
interval at the study's ``[benchmark] confidence``; a trial's figure is its score (the lower end of the objective's
interval: what ranks) followed by the objective's point and half-width, ``299.0 (305.1 ± 6.1)``. Speed-ups are
ratios of points with the intervals added in quadrature on logs, as the score itself adds scenarios.

The speed-up every view prints is :func:`study_speedup`: measured side by side when the confirmation
re-measured the baseline beside the recommendation (same rounds, same machine conditions), else the
recommendation's own trial against the baseline's, measured hours apart, and it says which.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig
from tuner.objective import Figure, Speedup, objective_of, scenario_speedup
from tuner.report._latency import latency_object
from tuner.report._slo import slo_line
from tuner.secrets import masked_url
from tuner.space import format_value
from tuner.trials import (
    Outcome,
    Recommendation,
    baseline_trial,
    current_confirmation,
    feasible,
    is_counted,
    record_of,
    study_trials,
)

__all__ = [
    "FailureGroup",
    "ScenarioComparison",
    "baseline_drift",
    "compare_scenarios",
    "failure_groups",
    "figure_text",
    "format_value",
    "params_text",
    "per_scenario_best",
    "recommendation_lines",
    "scenario_figure",
    "scenario_text",
    "speedup_clause",
    "study_speedup",
    "trial_figure",
    "trial_row",
    "tune_command",
    "verification_text",
]


def scenario_figure(t: FrozenTrial, scenario: str, field: str) -> float | None:
    return record_of(t).number_figure(scenario, field)


def scenario_text(t: FrozenTrial, scenario: str) -> str:
    """``651.6 ± 11.4``: the scenario's point estimate and half-width (``-`` when it was not measured)."""
    point = scenario_figure(t, scenario, "point") or scenario_figure(t, scenario, "tok_s")
    if point is None:
        return "-"
    hw = scenario_figure(t, scenario, "half_width")
    return f"{point:.1f}" + (f" ± {hw:.1f}" if hw is not None else "")


def trial_figure(t: FrozenTrial, config: StudyConfig) -> Figure | None:
    """A single-objective trial's figure, as its objective gives it (None: no score to show)."""
    return objective_of(config).figure(t)


def per_scenario_best(study: optuna.Study, scenarios: Sequence[str]) -> dict[str, FrozenTrial]:
    """For each scenario, the feasible trial with the highest point estimate there (scenarios no feasible trial
    measured are left out): which config serves one kind of workload best, whatever the objective weighs."""
    best: dict[str, FrozenTrial] = {}
    ranked = feasible(study)
    for name in scenarios:
        figures = ((scenario_figure(t, name, "point") or scenario_figure(t, name, "tok_s"), t) for t in ranked)
        measured = [(p, t) for p, t in figures if p is not None]
        if measured:
            best[name] = max(measured, key=lambda pt: (pt[0], -pt[1].number))[1]
    return best


def figure_text(t: FrozenTrial, config: StudyConfig) -> str:
    """The trial's one figure, as every view prints it (``-`` for a trial without a score)."""
    figure = trial_figure(t, config)
    if figure is not None:
        return figure.text
    if t.state == TrialState.COMPLETE and t.values:
        return "/".join(f"{v:.1f}" for v in t.values)
    return "-"


def study_speedup(study: optuna.Study, config: StudyConfig, best: FrozenTrial) -> Speedup | None:
    """The speed-up of ``best`` over the baseline that every view prints (its objective's: side by side from the
    confirmation's fresh repeats when it measured both), with why the baseline is no alternative when it breaks
    the study's SLO."""
    baseline = baseline_trial(study)
    if baseline is None:
        return None
    found = objective_of(config).speedup(study, best, baseline)
    missed = record_of(baseline).slo_missed if (Outcome.of(baseline) == Outcome.MISSES_SLO) else None
    return dataclasses.replace(found, baseline_misses=missed) if found is not None and missed else found


def baseline_drift(study: optuna.Study, config: StudyConfig) -> str | None:
    """One sentence when the baseline's own figure moved between its trial and the confirmation by more than the
    study's precision: the machine changed during the night (None: it held, or was not re-measured)."""
    c = current_confirmation(study)
    baseline = baseline_trial(study)
    base = c.get("baseline") if c is not None else None
    if not isinstance(base, dict) or baseline is None or base.get("trial") != baseline.number or not baseline.values:
        return None
    before, after = baseline.values[0], base.get("value")
    if not isinstance(after, int | float) or before <= 0 or after <= 0:
        return None
    change = after / before - 1
    if abs(change) <= config.benchmark.precision:
        return None
    return (
        f"the baseline's own score moved during the night: {before:.1f} in trial #{baseline.number}, "
        f"{after:.1f} when re-measured in the confirmation ({change:+.1%}): the machine's speed changed, so "
        "only the side-by-side speed-up compares like with like"
    )


def speedup_clause(speedup: Speedup) -> str:
    """The speed-up in the words every view uses: with its interval and its basis, and the advice to keep the
    baseline command when the recommendation is not confidently faster (unless the baseline breaks the SLO)."""
    if speedup.baseline_misses is not None:
        return (
            f"{speedup.text} the baseline's objective, {speedup.basis}; the baseline is no alternative: it "
            f"{speedup.baseline_misses}"
        )
    if speedup.low is not None and not speedup.confident:
        return f"NOT confidently faster than the baseline ({speedup.text}, {speedup.basis}): keep the baseline command"
    return f"{speedup.text} the baseline's objective, {speedup.basis}"


@dataclass(frozen=True, kw_only=True)
class ScenarioComparison:
    scenario: str
    baseline_tok_s: float | None
    baseline_half_width: float | None
    best_tok_s: float | None
    best_half_width: float | None
    speedup: Speedup | None
    accept_length: float | None
    baseline_accept_length: float | None


def compare_scenarios(
    best: FrozenTrial, baseline: FrozenTrial | None, scenarios: Sequence[str]
) -> list[ScenarioComparison]:
    """Per scenario: the best trial's figure against the baseline's, with the speed-up's interval."""
    out = []
    for name in scenarios:
        out.append(
            ScenarioComparison(
                scenario=name,
                baseline_tok_s=scenario_figure(baseline, name, "point") if baseline is not None else None,
                baseline_half_width=scenario_figure(baseline, name, "half_width") if baseline is not None else None,
                best_tok_s=scenario_figure(best, name, "point"),
                best_half_width=scenario_figure(best, name, "half_width"),
                speedup=scenario_speedup(best, baseline, name) if baseline is not None else None,
                accept_length=scenario_figure(best, name, "accept_length"),
                baseline_accept_length=scenario_figure(baseline, name, "accept_length") if baseline else None,
            )
        )
    return out


def tune_command(verb: str, config: StudyConfig, *, storage: str, study: str) -> str:
    """``tune VERB`` with the arguments that address this study, as a user can paste it: ``--config FILE`` when
    the study file says where the study lives, else ``--storage URL --study NAME`` (its password ``***``)."""
    import contextlib
    import shlex
    from pathlib import Path

    source = Path(config.source)
    if storage == config.study.storage and study == config.study.name and source.is_file():
        with contextlib.suppress(ValueError):  # a file under the working directory reads shorter as relative
            source = source.resolve().relative_to(Path.cwd())
        return f"tune {verb} --config {shlex.quote(str(source))}"
    # A password never reaches a screen, a log or a hook (docs/configuration.md, "Secrets"): supply it to paste.
    return f"tune {verb} --storage {shlex.quote(masked_url(storage))} --study {shlex.quote(study)}"


def verification_text(rec: Recommendation, *, finish: str) -> str | None:
    """One line when the recommendation is not verified yet: what is missing and ``finish``, the command that
    does it (None when nothing is missing)."""
    missing = rec.missing()
    if not missing:
        return None
    return f"NOT VERIFIED: {' and '.join(missing)}; finish with: {finish}"


def recommendation_lines(
    study: optuna.Study, config: StudyConfig, rec: Recommendation, *, finish: str
) -> list[str]:
    """The recommendation in at most four lines: the trial, its figure and speed-up, its verdicts; and what is
    still missing, when something is."""
    t = rec.trial
    shown = objective_of(config).format
    confirmed = f", confirmed {shown(rec.confirmed_value)} on re-measurement" if rec.confirmed_value is not None else ""
    speedup = study_speedup(study, config, t)
    record = record_of(t)
    if record.is_baseline:
        vs = "; it is the baseline: no tried change beat it"
    elif speedup is not None:
        vs = f"; {speedup_clause(speedup)}"
    else:
        vs = ""
    gate = {"passed": f"gate {record.gate}", "pending": "gate not run yet", "none": "no gate"}
    basis = "confirmed winner" if rec.confirmed else "best by its own measurement"
    if rec.front:
        basis = f"Pareto front of {len(rec.front)}, highest geometric mean"
    lines = [
        f"recommended: trial #{t.number} ({basis}), score {figure_text(t, config)}{confirmed}{vs}; "
        f"{gate.get(rec.gate, rec.gate)}"
    ]
    if (slo := slo_line(t, config, study)) is not None:
        lines.append(slo)
    if bound := record_of(t).client_bound_scenarios():
        lines.append(f"WARNING: {', '.join(bound)} measured while the load generator was the bottleneck")
    if (unverified := verification_text(rec, finish=finish)) is not None:
        lines.append(unverified)
    return lines


@dataclass(frozen=True, kw_only=True)
class FailureGroup:
    phase: str
    reason: str
    """The reason with its numbers blanked (``N``), so "allocate 1.56 GiB" and "allocate 2.1 GiB" group."""
    trials: tuple[int, ...]
    example: str
    """The group's reason with each number that differs between its trials as their range (``14.4-60.6%``)."""
    figures: tuple[str, ...] = ()
    """When numbers differ between the trials, each trial's own first of them, in :attr:`trials`' order (``45%``)."""

    @property
    def trials_text(self) -> str:
        """``#0 45, #1 41.2`` (each trial's own figure, when one differs), or ``#0, #1``."""
        figures = self.figures or ("",) * len(self.trials)
        shown = [f"#{n} {f}".strip() for n, f in zip(self.trials, figures, strict=True)]
        return ", ".join(shown[:12]) + (" …" if len(shown) > 12 else "")


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _reason_key(reason: str) -> str:
    text = _NUMBER.sub("N", reason.strip().splitlines()[0] if reason.strip() else "(no reason recorded)")
    return text[:160]


def failure_groups(study: optuna.Study) -> list[FailureGroup]:
    """Counted trials that failed or were infeasible, grouped by outcome and reason (trials pruned for being
    slower are no failure: they are left out)."""
    groups: dict[tuple[str, str], list[FrozenTrial]] = {}
    for t in study_trials(study):
        became = Outcome.of(t)
        infeasible = became in (Outcome.WRONG, Outcome.MISSES_SLO)
        if not is_counted(t) or became == Outcome.SLOWER or (t.state == TrialState.COMPLETE and not infeasible):
            continue
        reason = record_of(t).failure_reason or Outcome.text(t)
        groups.setdefault((became, _reason_key(reason)), []).append(t)
    out = [_group(became, key, ts) for (became, key), ts in groups.items()]
    return sorted(out, key=lambda g: (-len(g.trials), g.phase, g.reason))


def _group(became: str, key: str, trials: list[FrozenTrial]) -> FailureGroup:
    """One group, its reason written once with the numbers that differ as ranges, and each trial's own first
    figure that differs (an SLO miss's attainment): never one trial's figures standing for all."""
    reasons = [(record_of(t).failure_reason or Outcome.text(t)).strip().splitlines()[0][:400] for t in trials]
    numbers = [_NUMBER.findall(r) for r in reasons]
    words = _NUMBER.split(reasons[0])
    if any(len(ns) != len(numbers[0]) for ns in numbers):  # cut at 400 characters differently: show the first
        return FailureGroup(phase=became, reason=key, trials=tuple(t.number for t in trials), example=reasons[0])
    columns = list(zip(*numbers, strict=True))
    shown = [c[0] if len(set(c)) == 1 else _span(c) for c in columns]
    varying = [i for i, c in enumerate(columns) if len(set(c)) > 1]
    example = "".join(w + (shown[i] if i < len(shown) else "") for i, w in enumerate(words))
    figures: tuple[str, ...] = ()
    if varying:  # the first figure that differs is what the reason is about (an SLO miss's share)
        unit = "%" if words[varying[0] + 1].startswith("%") else ""
        figures = tuple(f + unit for f in columns[varying[0]])
    return FailureGroup(
        phase=became, reason=key, trials=tuple(t.number for t in trials), example=example, figures=figures
    )


def _span(values: Sequence[str]) -> str:
    return f"{min(values, key=float)}-{max(values, key=float)}"


def params_text(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())


def trial_row(t: FrozenTrial, config: StudyConfig, *, latency: bool = False) -> dict[str, Any]:
    """A trial as ``tune status --json`` / ``tune best --json`` give it (the text views print these fields).

    ``latency``: each scenario also carries its latency percentiles with their intervals
    (:func:`~tuner.report._latency.latency_object`; ``tune best``).
    """
    scenarios = [s.name for s in config.benchmark.scenarios]
    figure = trial_figure(t, config)
    r = record_of(t)
    row = {
        "number": t.number,
        "state": t.state.name,
        "outcome": Outcome.of(t) if t.state in (TrialState.COMPLETE, TrialState.PRUNED) else t.state.name,
        "verdict": Outcome.text(t),
        "values": [round(v, 3) for v in t.values] if t.values and t.state == TrialState.COMPLETE else None,
        "score": figure_text(t, config),
        "point": round(figure.point, 3) if figure is not None and figure.point is not None else None,
        "params": t.params,
        "baseline": r.is_baseline,
        "seed": r.warm_origin if r.warm_origin is not None else r.seed,
        "branch": r.branch,
        "correct": r.correct,
        "gate": r.gate,
        "scenarios": {
            s: {
                "tok_s": scenario_figure(t, s, "point") or scenario_figure(t, s, "tok_s"),
                "half_width": scenario_figure(t, s, "half_width"),
                "score": scenario_figure(t, s, "score"),
                "repeats": len(r.figure(s, "repeats") or ()),
                "stopped": r.figure(s, "stopped"),
                "warmup": r.figure(s, "warmup"),
                "accept_length": scenario_figure(t, s, "accept_length"),
                **({"latency": latency_object(t, s, config.benchmark.confidence)} if latency else {}),
            }
            for s in scenarios
        },
        # Scenarios measured while the load generator was the bottleneck: their figures understate the server.
        "client_bound": r.client_bound_scenarios(),
        "failure_phase": r.failure_phase,
        "failure_reason": r.failure_reason,
        "failure_kind": r.failure_kind,
        "duplicate_of": r.duplicate_of,
        "rejected": r.rejected,
        "command": r.command,
        "env": r.env,
        "worker": r.worker_name,
        "target": r.target_fingerprint,
        **objective_of(config).facts(t),
        # A rate search's passes, in the order run: each its rate, verdict and latency p99s (numbers).
        **({"probes": [dict(p) for p in r.probes]} if r.probes else {}),
    }
    return row
