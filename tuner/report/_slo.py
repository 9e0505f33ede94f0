"""``[slo]`` as the views say it: ``tune best --json``'s ``slo`` object, and the closest config when none met it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.config import Slo, StudyConfig
from tuner.metrics import LATENCY_MEASURES
from tuner.objective import RateBrackets
from tuner.report._latency import Percentile, percentile_figure
from tuner.slo import MET, MISSED, UNDECIDED, SloVerdict
from tuner.trials import closest_to_slo, record_of

__all__ = [
    "RatePoint",
    "closest_slo_lines",
    "overall_state",
    "rate_points",
    "scenario_verdicts",
    "slo_object",
    "slo_sentence",
]


def _round(x: Any) -> Any:
    return round(x, 4) if isinstance(x, float) else x


def scenario_verdicts(t: FrozenTrial, config: StudyConfig) -> dict[str, SloVerdict | None]:
    """Per scenario with an SLO, ``t``'s verdict there (None: not measured)."""
    record = record_of(t)
    return {s.name: record.verdict(s.name, s.slo.attainment) for s in config.benchmark.scenarios if s.slo is not None}


def overall_state(verdicts: Mapping[str, SloVerdict | None]) -> str | None:
    """The worst of the scenarios' states: missed if one missed, met only if every one was judged and met (None:
    none judged)."""
    if all(v is None for v in verdicts.values()):
        return None
    states = [v.state if v is not None else UNDECIDED for v in verdicts.values()]
    return MISSED if MISSED in states else MET if all(s == MET for s in states) else UNDECIDED


def _verdict_object(v: SloVerdict | None) -> dict[str, Any]:
    if v is None:
        return {"verdict": None, "attainment": None, "low": None, "high": None}
    return {
        "verdict": v.state,
        "attainment": _round(v.attainment),
        "low": _round(v.low),
        "high": _round(v.high),
        "requests": v.requests,
        "margin": _round(v.margin),
        "margin_interval": [_round(v.margin_low), _round(v.margin_high)],
    }


def slo_object(t: FrozenTrial, config: StudyConfig) -> dict[str, Any] | None:
    """``met`` (not missed in any scenario), ``verdict`` (the worst scenario's), the ``[slo]`` limits and,
    per scenario with an SLO, its limits, required share and ``t``'s verdict there with its attainment interval
    and margin (None: the study has no SLO)."""
    verdicts = scenario_verdicts(t, config)
    if not verdicts:
        return None
    base = config.slo
    per = {}
    for s in config.benchmark.scenarios:
        if s.slo is not None:
            per[s.name] = {"limits": s.slo.limits(), "required": s.slo.attainment, **_verdict_object(verdicts[s.name])}
    state = overall_state(verdicts)
    return {
        "met": state in (MET, UNDECIDED),
        "verdict": state,
        "limits": base.limits() if base is not None else None,
        "attainment": base.attainment if base is not None else None,
        "scenarios": per,
        "missed": record_of(t).slo_missed,
    }


def closest_slo_lines(study: optuna.Study, config: StudyConfig) -> list[str]:
    """When no config met the SLO: the one that came closest, marked as not meeting it, with its attainment per
    scenario ([] when some config met it, or none missed it)."""
    t = closest_to_slo(study)
    if t is None:
        return []
    shares = [
        f"{name} {v.attainment:.1%} (needs {v.required:.0%})"
        for name, v in scenario_verdicts(t, config).items()
        if v is not None and v.attainment is not None
    ]
    return [
        "no config met the SLO: nothing to recommend",
        f"closest (does NOT meet the SLO): trial #{t.number}, attainment " + ", ".join(shares),
        f"  why: {record_of(t).slo_missed or 'misses the SLO'}",
    ]


@dataclass(frozen=True, kw_only=True)
class RatePoint:
    """One open-loop scenario with an SLO, as one trial measured it."""

    scenario: str
    rate: float
    """The scenario's offered rate (requests/s) as the study file sets it."""
    slo: Slo
    verdict: SloVerdict | None
    """The verdict there (None: nothing judged)."""
    attainment: float | None
    p99: Mapping[str, Percentile | None]
    """Per latency measure (:data:`tuner.metrics.LATENCY_MEASURES`, by key), its p99 with its interval
    (:mod:`tuner.report._latency`)."""


def rate_points(t: FrozenTrial, config: StudyConfig) -> list[RatePoint]:
    """``t``'s open-loop scenarios with an SLO, by rate (the report's latency-against-rate view)."""
    out = []
    for s in config.benchmark.scenarios:
        if s.rate is None or s.slo is None:
            continue
        verdict = record_of(t).verdict(s.name, s.slo.attainment)
        out.append(
            RatePoint(
                scenario=s.name,
                rate=s.rate,
                slo=s.slo,
                verdict=verdict,
                attainment=verdict.attainment if verdict is not None else None,
                p99={m.key: percentile_figure(t, s.name, m.percentile(99)) for m in LATENCY_MEASURES},
            )
        )
    return sorted(out, key=lambda p: p.rate)


def _highest_met(points: list[RatePoint]) -> RatePoint | None:
    met = [p for p in points if p.verdict is not None and p.verdict.holds]
    return met[-1] if met else None


def slo_sentence(
    best: FrozenTrial, baseline: FrozenTrial | None, config: StudyConfig, *, brackets: RateBrackets | None = None
) -> str | None:
    """``meets TTFT 1 s / TPOT 40 ms for 99% of requests up to 7.5 req/s (baseline: 5 req/s, 1.5x)``: the
    highest open-loop rate at which each kept the promise (None: the recommendation kept it at no rate). In a
    ``kind = "max_rate"`` study, ``brackets`` gives those rates: the ones its speed-up is computed from."""
    if brackets is not None:
        return _max_rate_sentence(config, brackets)
    top = _highest_met(rate_points(best, config))
    if top is None:
        return None
    text = f"meets {top.slo.describe()} for {top.slo.attainment:.0%} of requests up to {top.rate:g} req/s"
    if baseline is None or baseline.number == best.number:
        return text
    base = _highest_met(rate_points(baseline, config))
    if base is None:
        return f"{text} (baseline: at none of the rates measured)"
    return f"{text} (baseline: {base.rate:g} req/s, {top.rate / base.rate:.1f}x)"


def _max_rate_sentence(config: StudyConfig, brackets: RateBrackets) -> str | None:
    scenario = next(s for s in config.benchmark.scenarios if s.name == brackets.scenario)
    met = brackets.best[0] if brackets.best else None
    if not met or scenario.slo is None:
        return None
    text = f"meets {scenario.slo.describe()} for {scenario.slo.attainment:.0%} of requests up to {met:.3g} req/s"
    base = brackets.baseline[0] if brackets.baseline else None
    if brackets.baseline is None:
        return text
    if not base:
        return f"{text} (baseline: at none of the rates tried)"
    speedup = brackets.speedup
    return f"{text} (baseline: {base:.3g} req/s, {speedup.text if speedup else f'{met / base:.2f}x'})"
