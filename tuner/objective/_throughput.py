"""Throughput figures across scenarios: a trial's combined bound, speed-ups over the baseline, a finalist's
pooled fresh repeats. The arithmetic the throughput kinds (geomean, goodput, multi) share.

Every combination is :func:`tuner.stats.weighted_log_mean`: per scenario a point and a half-width on logs, the
half-widths in quadrature.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from optuna.trial import FrozenTrial, TrialState

from tuner.bench import ScenarioResult, pooled_slo_fields
from tuner.config import GOODPUT_METRICS, BenchmarkSection, StudyConfig
from tuner.metrics import objective_point
from tuner.objective._figures import Speedup
from tuner.stats import Noise, weighted_log_mean
from tuner.trials import record_of

__all__ = ["bound", "pooled", "repeats", "scenario_speedup", "speedup_of", "trials_speedup"]


def bound(points: Mapping[str, float], scores: Mapping[str, float], section: BenchmarkSection) -> float:
    """The lower end of the weighted geomean's interval, from per-scenario points and lower bounds (each
    scenario's half-width on logs is ``log(point / score)``; module docstring)."""
    weights = {k: w for k, w in section.objective_weights().items() if k in points}
    if not weights:
        weights = dict.fromkeys(points, 1.0)
    log_point, h = weighted_log_mean(
        {k: (w, math.log(max(points[k], 1e-9)), max(0.0, math.log(max(points[k], 1e-9) / max(scores[k], 1e-9))))
         for k, w in weights.items()}
    )  # fmt: skip
    return math.exp(log_point - (h or 0.0))


def speedup_of(parts: Mapping[str, tuple[float, float, float | None]]) -> Speedup:
    """The weighted geomean of ``(weight, log ratio, log half-width)`` per scenario as a speed-up."""
    log_r, h = weighted_log_mean(parts)
    if h is None:
        return Speedup(ratio=math.exp(log_r), low=None, high=None)
    return Speedup(ratio=math.exp(log_r), low=math.exp(log_r - h), high=math.exp(log_r + h))


def _log_half_width(t: FrozenTrial, scenario: str) -> float | None:
    record = record_of(t)
    point, score = record.number_figure(scenario, "point"), record.number_figure(scenario, "score")
    if point is None or score is None or point <= 0 or score <= 0 or score > point:
        return None
    return math.log(point / score)


def _log_ratio(best: FrozenTrial, baseline: FrozenTrial, scenario: str) -> tuple[float, float | None] | None:
    """``log(best / baseline)`` of the scenario's points and the two intervals' log half-widths in quadrature."""
    b, r = record_of(best).number_figure(scenario, "point"), record_of(baseline).number_figure(scenario, "point")
    if not b or not r or b <= 0 or r <= 0:
        return None
    hb, hr = _log_half_width(best, scenario), _log_half_width(baseline, scenario)
    return math.log(b / r), (math.hypot(hb, hr) if hb is not None and hr is not None else None)


def scenario_speedup(best: FrozenTrial, baseline: FrozenTrial, scenario: str) -> Speedup | None:
    """``best``'s throughput in one scenario over the baseline's, from the two trials' own figures."""
    found = _log_ratio(best, baseline, scenario)
    return None if found is None else speedup_of({scenario: (1.0, *found)})


def trials_speedup(best: FrozenTrial, baseline: FrozenTrial, config: StudyConfig) -> Speedup | None:
    """``best``'s throughput over the baseline's from their own trials: the weighted geomean of per-scenario point
    ratios (None without both trials' figures)."""
    if baseline.state != TrialState.COMPLETE:
        return None
    parts: dict[str, tuple[float, float, float | None]] = {}
    for name, w in config.benchmark.objective_weights().items():
        found = _log_ratio(best, baseline, name)
        if found is None:
            return None
        parts[name] = (w, *found)
    return speedup_of(parts) if parts else None


def repeats(results: Sequence[ScenarioResult], metric: str) -> dict[str, list[float]]:
    """Per scenario, every fresh repeat of ``metric`` over a finalist's visits (a goodput metric: each visit's
    throughput repeats times its share of requests, or tokens, that met the SLO)."""
    out: dict[str, list[float]] = {}
    for res in results:
        xs = res.repeats_per_stream_tok_s if metric == "per_stream_tok_s" else res.repeats_tok_s
        if metric in GOODPUT_METRICS and res.point:
            xs = tuple(x * objective_point(res, metric) / res.point for x in xs)
        out.setdefault(res.name, []).extend(xs)
    return out


def pooled(
    config: StudyConfig, results: Sequence[ScenarioResult], noise: Mapping[str, Noise | None]
) -> tuple[ScenarioResult, ...]:
    """Each scenario's fresh repeats over every visit, as one result (with the study's noise), scored exactly like
    a trial's."""
    scenarios = {s.name: s for s in config.benchmark.scenarios}
    tok_s, per_stream = repeats(results, "output_tok_s"), repeats(results, "per_stream_tok_s")
    confidence = config.benchmark.confidence
    return tuple(
        ScenarioResult.from_repeats(
            scenario=scenarios[name],
            repeats_tok_s=xs,
            repeats_per_stream_tok_s=per_stream.get(name, []),
            confidence=confidence,
            noise=noise.get(name),
            # The SLO's figures over every visit, so a goodput objective scores the fresh repeats as a trial's.
            **pooled_slo_fields([r for r in results if r.name == name], confidence),
        )
        for name, xs in tok_s.items()
    )
