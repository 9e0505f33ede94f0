"""``[slo]`` as the views say it: ``tune best --json``'s ``slo`` object, and the closest config when none met it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.config import Slo, StudyConfig
from tuner.metrics import LATENCY_MEASURES, interval_key
from tuner.objective import RateBrackets
from tuner.report._latency import Percentile, percentile_figure
from tuner.slo import MET, MISSED, UNDECIDED, SloVerdict
from tuner.trials import closest_to_slo, current_confirmation, record_of

__all__ = [
    "RatePoint",
    "closest_slo_lines",
    "overall_state",
    "rate_points",
    "scenario_verdicts",
    "slo_line",
    "slo_object",
    "slo_sentence",
    "slo_state",
]


def _round(x: Any) -> Any:
    return round(x, 4) if isinstance(x, float) else x


def scenario_verdicts(
    t: FrozenTrial, config: StudyConfig, study: optuna.Study | None = None
) -> dict[str, SloVerdict | None]:
    """Per scenario with an SLO, ``t``'s verdict there (None: not measured): the end-of-study confirmation's over
    every request of its visits when it re-measured ``t`` (with ``study``), else the trial's own."""
    record = record_of(t)
    confirmed = _confirmed_verdicts(study, t.number) if study is not None else {}
    return {
        s.name: confirmed.get(s.name) or record.verdict(s.name, s.slo.attainment)
        for s in config.benchmark.scenarios
        if s.slo is not None
    }


def _confirmed_verdicts(study: optuna.Study, number: int) -> dict[str, SloVerdict]:
    c = current_confirmation(study)
    stored = ((c or {}).get("slo") or {}).get(str(number)) or {}
    out = {}
    for name, figures in stored.items():
        if not isinstance(figures, Mapping):
            continue
        if (v := SloVerdict.read(figures.get, requests=int(figures.get("requests") or 0))) is not None:
            out[name] = v
    return out


def overall_state(verdicts: Mapping[str, SloVerdict | None]) -> str | None:
    """The worst of the judged scenarios' states: missed if one missed, met only if every one judged met (None:
    none judged; a scenario the benchmark does not judge, such as the in-process model's closed loop, has no
    say)."""
    states = [v.state for v in verdicts.values() if v is not None]
    if not states:
        return None
    return MISSED if MISSED in states else MET if all(s == MET for s in states) else UNDECIDED


def slo_state(t: FrozenTrial, config: StudyConfig, study: optuna.Study | None = None) -> str | None:
    """``t``'s verdict on the study's SLO: the worst of its scenarios' (None: the study has none, or nothing was
    judged); the confirmation's, with ``study``, when it re-measured ``t``."""
    return overall_state(scenario_verdicts(t, config, study))


def slo_line(t: FrozenTrial, config: StudyConfig, study: optuna.Study | None = None) -> str | None:
    """Each SLO scenario's verdict in the study's words, one line (None: no SLO): "meets" only where shown (the
    confirmation's verdict, with ``study``, when it re-measured ``t``)."""
    verdicts = scenario_verdicts(t, config, study)
    slos = {s.name: s.slo for s in config.benchmark.scenarios if s.slo is not None}
    texts = [v.text(name, slos[name].describe()) for name, v in verdicts.items() if v is not None and slos[name]]
    return "; ".join(texts) or None


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


def slo_object(t: FrozenTrial, config: StudyConfig, study: optuna.Study | None = None) -> dict[str, Any] | None:
    """``met`` (shown to keep the promise in every scenario), ``verdict`` (the worst scenario's), the ``[slo]``
    limits and, per scenario with an SLO, its limits, required share and ``t``'s verdict there with its attainment
    interval and margin (None: the study has no SLO); with ``study``, the confirmation's verdicts when it re-measured
    ``t`` (``confirmed`` says so)."""
    verdicts = scenario_verdicts(t, config, study)
    if not verdicts:
        return None
    base = config.slo
    per = {}
    for s in config.benchmark.scenarios:
        if s.slo is not None:
            per[s.name] = {"limits": s.slo.limits(), "required": s.slo.attainment, **_verdict_object(verdicts[s.name])}
    state = overall_state(verdicts)
    return {
        "met": state == MET,
        "verdict": state,
        "limits": base.limits() if base is not None else None,
        "attainment": base.attainment if base is not None else None,
        "scenarios": per,
        "missed": record_of(t).slo_missed,
        "confirmed": study is not None and bool(_confirmed_verdicts(study, t.number)),
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
    """``t``'s open-loop scenarios with an SLO, and its passes of them at other rates (a rate search's probes), by
    rate (the report's latency-against-rate view)."""
    out = _scenario_points(t, config)
    slos = {s.name: s.slo for s in config.benchmark.scenarios if s.slo is not None}
    seen = {(p.scenario, p.rate) for p in out}
    for probe in record_of(t).probes:
        name, rate = probe.get("scenario"), probe.get("rate")
        if name in slos and isinstance(rate, int | float) and (name, rate) not in seen:
            seen.add((name, rate))
            out.append(_probe_point(probe, slos[name]))
    return sorted(out, key=lambda p: p.rate)


def _probe_point(probe: Mapping[str, Any], slo: Slo) -> RatePoint:
    def number(key: str) -> float | None:
        v = probe.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    verdict = SloVerdict.read(probe.get, requests=int(number("requests") or 0), required=slo.attainment)
    p99 = {}
    for m in LATENCY_MEASURES:
        key = m.percentile(99)
        point = number(key)
        p99[m.key] = None if point is None else Percentile(
            point=point, low=number(interval_key(key, "low")), high=number(interval_key(key, "high")), has_interval=True
        )  # fmt: skip
    return RatePoint(
        scenario=str(probe["scenario"]), rate=float(probe["rate"]), slo=slo, verdict=verdict,
        attainment=verdict.attainment if verdict is not None else None, p99=p99,
    )  # fmt: skip


def _scenario_points(t: FrozenTrial, config: StudyConfig) -> list[RatePoint]:
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
    return out


def _highest_met(points: list[RatePoint]) -> RatePoint | None:
    met = [p for p in points if p.verdict is not None and p.verdict.met]
    return met[-1] if met else None


def _unshown(points: list[RatePoint], above: float) -> str | None:
    """The highest rate above ``above`` the search kept (not missed) that its requests could not show met: said,
    never called "met" (None: none)."""
    shy = [p for p in points if p.verdict is not None and p.verdict.state == UNDECIDED and p.rate > above]
    if not shy or (v := shy[-1].verdict) is None or v.attainment is None:
        return None
    interval = f"{v.low:.1%}-{v.high:.1%}" if v.low is not None and v.high is not None else "?"
    return f"not shown to meet it at {shy[-1].rate:g} req/s ({v.attainment:.1%} ({interval}) of {v.requests} requests)"


def slo_sentence(
    best: FrozenTrial, baseline: FrozenTrial | None, config: StudyConfig, *, brackets: RateBrackets | None = None
) -> str | None:
    """``meets TTFT 1 s / TPOT 40 ms for 99% of requests up to 7.5 req/s (baseline: 5 req/s, 1.5x)``: the
    highest open-loop rate at which each was shown to keep the promise, and a higher one the requests could not
    decide (None: the recommendation was shown to keep it at no rate, nor kept it undecided). In a ``kind =
    "max_rate"`` study, ``brackets`` gives those rates: the ones its speed-up is computed from."""
    if brackets is not None:
        return _max_rate_sentence(config, brackets)
    points = rate_points(best, config)
    top = _highest_met(points)
    unshown = _unshown(points, top.rate if top is not None else 0.0)
    if top is None:
        return unshown
    text = f"meets {top.slo.describe()} for {top.slo.attainment:.0%} of requests up to {top.rate:g} req/s"
    if baseline is not None and baseline.number != best.number:
        base = _highest_met(rate_points(baseline, config))
        text += " (baseline: at none of the rates measured)" if base is None else (
            f" (baseline: {base.rate:g} req/s, {top.rate / base.rate:.1f}x)")  # fmt: skip
    return text if unshown is None else f"{text}; {unshown}"


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
