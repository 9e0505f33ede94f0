"""The metric registry: every per-scenario figure a trial records, in one table.

Each :class:`Metric` says which :class:`~tuner.bench.ScenarioResult` field it reads, the flat user attr it
becomes (``<scenario>.<key>``, so the dashboard shows it as a column), how people see it (label, digits), and,
for the ones a study may optimise, the robust figure the objective uses. The loop's scenario attrs, the
objective, ``[objective] metric`` validation, ``tune status`` columns, exports and the report all read this
table: adding a metric is one entry here.

Dependency-free on purpose (the config validates against it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "INTERVAL_PERCENTILES",
    "LATENCY_MEASURES",
    "LATENCY_PERCENTILES",
    "METRICS",
    "OBJECTIVE_METRICS",
    "PROBE_KEYS",
    "STATUS_METRICS",
    "LatencyMeasure",
    "Metric",
    "by_key",
    "interval_key",
    "interval_text",
    "objective_point",
    "objective_point_key",
    "objective_value",
    "probe_figures",
    "scenario_attrs",
    "scenario_key",
]


@dataclass(frozen=True, kw_only=True)
class Metric:
    key: str
    """The user attr suffix: ``c1-short.<key>``."""
    field: str
    """The :class:`~tuner.bench.ScenarioResult` attribute it reads."""
    label: str
    digits: int = 1
    objective: str | None = None
    """The name ``[objective] metric`` uses for it, when a study may optimise it."""
    score_field: str | None = None
    """The robust figure the objective takes (falls back to ``field`` when the result has none)."""
    point_field: str | None = None
    """The point estimate ``score_field`` is the lower bound of (falls back to ``field``)."""
    status: bool = False
    """Shown per scenario in ``tune status``."""

    def read(self, result: Any) -> Any:
        value = getattr(result, self.field, None)
        return list(value) if isinstance(value, tuple) else value

    def format(self, value: Any) -> str:
        """The figure as a table shows it: ``digits`` decimals, ``yes``/``no`` for a flag, ``-`` when missing."""
        if isinstance(value, bool):
            return "yes" if value else "no"
        if not isinstance(value, int | float) or not math.isfinite(value):
            return "-"
        return f"{value:.{self.digits}f}"


@dataclass(frozen=True, kw_only=True)
class LatencyMeasure:
    """One per-request latency a service promises (:mod:`tuner.bench._latency` defines each).

    ``key`` names it everywhere: the :class:`~tuner.bench.ScenarioResult` fields and user attrs of its
    percentiles (``ttft_p99_s``), the ``[slo]`` limit (``ttft_s``) and the views' rows.
    """

    key: str
    label: str
    """How a sentence names it: ``TTFT``."""
    digits: int
    """Decimals of its seconds in a table."""
    unit: str = "s"
    """The unit the text views and plots show it in (``ms`` for a per-token time)."""

    @property
    def scale(self) -> float:
        """Seconds to :attr:`unit`."""
        return 1000.0 if self.unit == "ms" else 1.0

    @property
    def limit(self) -> str:
        """Its ``[slo]`` key: ``ttft_s``."""
        return f"{self.key}_s"

    def percentile(self, q: int) -> str:
        """The key (and field) of its ``q``-th percentile: ``ttft_p99_s``."""
        return f"{self.key}_p{q}_s"


#: The per-request latencies, in the order every view lists them.
LATENCY_MEASURES: tuple[LatencyMeasure, ...] = (
    LatencyMeasure(key="ttft", label="TTFT", digits=3),
    LatencyMeasure(key="tpot", label="TPOT", digits=4, unit="ms"),
    LatencyMeasure(key="e2e", label="E2E", digits=3),
)
#: The latency percentiles recorded per scenario (TTFT, TPOT, end to end: ``ttft_p90_s``).
LATENCY_PERCENTILES: tuple[int, ...] = (50, 90, 99)
#: Those recorded with an interval: the typical request and the tail.
INTERVAL_PERCENTILES: tuple[int, ...] = (50, 99)


def interval_key(point: str, side: str) -> str:
    """The key of one bound (``side``: ``low`` or ``high``) of a percentile's interval: ``ttft_p99_s`` ->
    ``ttft_p99_low_s`` (as user attr suffix and as :class:`~tuner.bench.ScenarioResult` field alike)."""
    return f"{point.removesuffix('_s')}_{side}_s"


def _latency_metrics() -> tuple[Metric, ...]:
    """``ttft_p50_s`` ... ``e2e_p99_s``, then both bounds of each interval (``ttft_p50_low_s`` ...), the
    percentile's digits; key and field alike."""
    points = tuple(
        Metric(key=m.percentile(q), field=m.percentile(q), label=f"{m.label} p{q} s", digits=m.digits)
        for m in LATENCY_MEASURES
        for q in LATENCY_PERCENTILES
    )
    bounds = tuple(
        Metric(
            key=interval_key(m.percentile(q), side),
            field=interval_key(m.percentile(q), side),
            label=f"{m.label} p{q} {side} s",
            digits=m.digits,
        )
        for m in LATENCY_MEASURES
        for q in INTERVAL_PERCENTILES
        for side in ("low", "high")
    )
    return points + bounds


def interval_text(point: float, interval: Sequence[float | None] | None, *, scale: float = 1.0) -> str:
    """A percentile as a text view prints it: ``0.412 [0.398, 0.431]``, ``1.2 [1.1, none]`` (``none``: too few
    requests for that bound, never a guess); the point alone without an interval (``scale``: seconds to the unit
    shown, 1000 for ms)."""

    def shown(x: float | None) -> str:
        return "none" if x is None else f"{x * scale:.3g}"

    return shown(point) if interval is None else f"{shown(point)} [{shown(interval[0])}, {shown(interval[1])}]"


METRICS: tuple[Metric, ...] = (
    Metric(
        key="tok_s",
        field="output_tok_s",
        label="tok/s",
        objective="output_tok_s",
        score_field="score",
        point_field="point",
        status=True,
    ),
    Metric(
        key="per_stream_tok_s",
        field="per_stream_tok_s",
        label="stream tok/s",
        objective="per_stream_tok_s",
        score_field="per_stream_score",
    ),
    # Per-request latency a service promises (tuner.bench._latency): open loop counts from the arrival; the p50
    # and p99 intervals (tuner.stats.percentile_interval): None where too few requests allow a bound.
    *_latency_metrics(),
    Metric(key="rate", field="rate", label="rate req/s", digits=2),
    Metric(key="offered_rps", field="offered_rps", label="offered req/s", digits=2),
    Metric(key="achieved_rps", field="achieved_rps", label="achieved req/s", digits=2),
    # [slo]: the share of requests that met every limit, and its interval (tuner.bench._slo).
    Metric(key="attainment", field="attainment", label="SLO attainment", digits=3),
    Metric(key="attainment_low", field="attainment_low", label="attainment low", digits=3),
    Metric(key="attainment_high", field="attainment_high", label="attainment high", digits=3),
    # Its verdict (tuner.slo.SloVerdict): met, missed or undecided, the share required, and the margin.
    Metric(key="slo_verdict", field="slo_verdict", label="SLO verdict"),
    Metric(key="slo_required", field="slo_required", label="SLO share required", digits=3),
    Metric(key="slo_margin", field="slo_margin", label="SLO margin (log)", digits=3),
    Metric(key="slo_margin_low", field="slo_margin_low", label="SLO margin low", digits=3),
    Metric(key="slo_margin_high", field="slo_margin_high", label="SLO margin high", digits=3),
    # Goodput ([objective] kind = "goodput"): the rate of the requests that met the SLO, with its lower bound.
    Metric(
        key="goodput_rps",
        field="goodput_rps",
        label="goodput req/s",
        digits=2,
        objective="goodput_rps",
        score_field="goodput_rps_low",
        point_field="goodput_rps",
    ),
    Metric(key="goodput_rps_low", field="goodput_rps_low", label="goodput low req/s", digits=2),
    Metric(
        key="goodput_tok_s",
        field="goodput_tok_s",
        label="goodput tok/s",
        objective="goodput_tok_s",
        score_field="goodput_tok_s_low",
        point_field="goodput_tok_s",
    ),
    Metric(key="goodput_tok_s_low", field="goodput_tok_s_low", label="goodput low tok/s"),
    Metric(key="itl_p50_s", field="itl_p50_s", label="ITL p50 s", digits=4),
    Metric(key="itl_p99_s", field="itl_p99_s", label="ITL p99 s", digits=4),
    Metric(key="accept_length", field="accept_length", label="accept", digits=2),
    Metric(key="errors", field="errors", label="errors", digits=0),
    Metric(key="requests", field="requests", label="requests", digits=0),
    Metric(key="ci_low", field="ci_low", label="CI low"),
    Metric(key="ci_high", field="ci_high", label="CI high"),
    Metric(key="repeats", field="repeats_tok_s", label="repeats tok/s"),
    Metric(key="seconds", field="seconds", label="seconds"),
    # The load generator's own load (tuner.bench._alarm): a client-bound figure understates the server.
    Metric(key="client_bound", field="client_bound", label="client-bound", digits=0),
    Metric(key="client_cpu_cores", field="client_cpu_cores", label="client cores", digits=2),
    Metric(key="client_reruns", field="client_reruns", label="client re-runs", digits=0),
    Metric(key="start_delay_p99_s", field="start_delay_p99_s", label="start delay p99 s", digits=3),
    Metric(key="client_stall_s", field="client_stall_s", label="client stall s", digits=3),
    Metric(key="score", field="score", label="score (lower bound) tok/s"),
    Metric(key="point", field="point", label="point estimate tok/s"),
    Metric(key="half_width", field="half_width", label="± half-width tok/s"),
    Metric(key="stopped", field="stopped", label="repeats stopped"),
    Metric(key="warmup", field="warmup", label="warm-up"),
    Metric(key="first_pass_tok_s", field="first_pass_tok_s", label="first pass tok/s"),
    Metric(key="warmup_s", field="warmup_s", label="warm-up s", digits=2),
)

OBJECTIVE_METRICS: tuple[str, ...] = tuple(m.objective for m in METRICS if m.objective)
STATUS_METRICS: tuple[Metric, ...] = tuple(m for m in METRICS if m.status)


def by_key(key: str) -> Metric:
    for m in METRICS:
        if m.key == key:
            return m
    raise KeyError(key)


def _by_objective(name: str) -> Metric:
    for m in METRICS:
        if m.objective == name:
            return m
    raise KeyError(f"{name!r} is not an objective metric (one of {', '.join(OBJECTIVE_METRICS)})")


def scenario_key(scenario: str, key: str) -> str:
    return f"{scenario}.{key}"


def scenario_attrs(result: Any) -> dict[str, Any]:
    """Flat user attrs for one :class:`~tuner.bench.ScenarioResult` (``<scenario>.<key>``)."""
    return {scenario_key(result.name, m.key): _round(m.read(result)) for m in METRICS}


#: What a pass at another rate (a probe of a rate search) keeps: its rate, its SLO verdict, each latency's p99.
PROBE_KEYS: tuple[str, ...] = (
    "rate", "requests", "attainment", "attainment_low", "attainment_high", "slo_verdict", "slo_required",
    "slo_margin", "slo_margin_low", "slo_margin_high",
    *(k for m in LATENCY_MEASURES for k in (m.percentile(99), interval_key(m.percentile(99), "low"),
                                             interval_key(m.percentile(99), "high"))),
)  # fmt: skip


def probe_figures(result: Any) -> dict[str, Any]:
    """A pass's :data:`PROBE_KEYS` figures and its scenario's name (a trial keeps one per probe)."""
    return {"scenario": result.name, **{k: _round(by_key(k).read(result)) for k in PROBE_KEYS}}


def objective_value(result: Any, metric: str) -> float:
    """The figure the objective takes from a scenario result for ``[objective] metric``."""
    m = _by_objective(metric)
    score = getattr(result, m.score_field, None) if m.score_field else None
    return float(score if score is not None else getattr(result, m.field))


def objective_point(result: Any, metric: str) -> float:
    """The point estimate of :func:`objective_value`'s figure (the figure itself when it has no interval)."""
    m = _by_objective(metric)
    point = getattr(result, m.point_field, None) if m.point_field else None
    return float(point if point is not None else objective_value(result, metric))


def objective_point_key(metric: str) -> str:
    """The user attr suffix under which a trial stores :func:`objective_point` per scenario."""
    m = _by_objective(metric)
    field = m.point_field or m.field
    return next(x.key for x in METRICS if x.field == field)


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 4)
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v
