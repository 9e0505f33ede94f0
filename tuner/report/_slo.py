"""``[slo]`` as the views say it: ``tune best --json``'s ``slo`` object, and the closest config when none met it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.config import Slo, StudyConfig
from tuner.metrics import LATENCY_MEASURES
from tuner.report._facts import RateBrackets, rate_speedup
from tuner.report._latency import Percentile, percentile_figure
from tuner.trials import closest_to_slo, misses_slo, record_of, slo_attainment

__all__ = ["RatePoint", "closest_slo_lines", "rate_points", "slo_object", "slo_sentence"]


def _round(x: Any) -> Any:
    return round(x, 4) if isinstance(x, float) else x


def slo_object(t: FrozenTrial, config: StudyConfig) -> dict[str, Any] | None:
    """``met``, the ``[slo]`` limits and, per scenario with an SLO, its limits, required share and the
    attainment ``t`` measured with its interval (None: the study has no SLO)."""
    scenarios = [s for s in config.benchmark.scenarios if s.slo is not None]
    if not scenarios:
        return None
    base = config.slo
    per = {}
    for s in scenarios:
        assert s.slo is not None
        measured = {k: _round(v) for k, v in slo_attainment(t, s.name).items()}
        per[s.name] = {"limits": s.slo.limits(), "required": s.slo.attainment, **measured}
    return {
        "met": not misses_slo(t),
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
    shares = []
    for s in config.benchmark.scenarios:
        a = slo_attainment(t, s.name)
        if s.slo is not None and a["attainment"] is not None:
            shares.append(f"{s.name} {a['attainment']:.1%} (needs {s.slo.attainment:.0%})")
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
    met: bool | None
    """Not confidently below the required share (the study's rule); None: no attainment measured."""
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
        a = slo_attainment(t, s.name)
        out.append(
            RatePoint(
                scenario=s.name,
                rate=s.rate,
                slo=s.slo,
                met=None if a["high"] is None else a["high"] >= s.slo.attainment,
                attainment=a["attainment"],
                p99={m.key: percentile_figure(t, s.name, m.percentile(99)) for m in LATENCY_MEASURES},
            )
        )
    return sorted(out, key=lambda p: p.rate)


def _highest_met(points: list[RatePoint]) -> RatePoint | None:
    met = [p for p in points if p.met]
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
    scenario = next(s for s in config.benchmark.scenarios if s.name == config.objective.scenario)
    met = brackets.best[0] if brackets.best else None
    if not met or scenario.slo is None:
        return None
    text = f"meets {scenario.slo.describe()} for {scenario.slo.attainment:.0%} of requests up to {met:.3g} req/s"
    base = brackets.baseline[0] if brackets.baseline else None
    if brackets.baseline is None:
        return text
    if not base:
        return f"{text} (baseline: at none of the rates tried)"
    speedup = rate_speedup(brackets.best, brackets.baseline)
    return f"{text} (baseline: {base:.3g} req/s, {speedup.text if speedup else f'{met / base:.2f}x'})"
