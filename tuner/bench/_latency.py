"""Per-request latency figures of a scenario, closed or open loop: what a service promises its users.

Per request (:class:`~tuner.bench.RequestRecord`): TTFT and end-to-end latency from the request's origin (its
scheduled arrival in an open loop, its send in a closed one) and TPOT, ``(e2e - TTFT) / (output tokens - 1)``.
Speculative decoding delivers tokens in bursts, so the inter-token gap per event is not TPOT: a request's TPOT
is its whole decode over its tokens. Percentiles (p50, p90, p99) pool the steady requests of every repeat (an
open loop's after its queue filled: :mod:`tuner.bench._steady`); p50 and p99 each have an interval at the
benchmark's ``confidence``, the wider of two: two of the pooled requests by rank
(:func:`tuner.stats.percentile_interval`, as if the requests were independent) and the passes' spread (run to run,
:func:`tuner.stats.batch_quantile_interval`), ``None`` on a side where too few requests allow a bound.

Rates, per repeat and then the median over repeats:

* **offered**: open loop only, the schedule's arrivals after the first over the time they span (a closed loop
  offers whatever the server takes: no offered rate);
* **achieved**: completions after the first over the time from the first completion to the last: the rate the
  server delivered, on the same footing as the offered one, so below capacity the two agree and above it the
  achieved rate is the server's capacity;
* **sent**: sends after the first over their span: whether the client held its schedule (the load generator's
  own check, beside the start delay).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from tuner.bench._load import LoadResult
from tuner.bench._slo import request_met, slo_fields
from tuner.bench._steady import passes_too_short, steady_pass, steady_passes
from tuner.config import Scenario, Slo
from tuner.metrics import INTERVAL_PERCENTILES, LATENCY_MEASURES, LATENCY_PERCENTILES, interval_key
from tuner.stats import batch_quantile_interval, percentile, percentile_interval

__all__ = ["latency_figures", "request_rows", "run_rates", "span_rate"]


def span_rate(times: Sequence[float]) -> float | None:
    """Events after the first over the time they span (None: fewer than two, or no time between them)."""
    if len(times) < 2:
        return None
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else None


def _percentiles(
    prefix: str, batches: Sequence[Sequence[float]], confidence: float, *, short: bool
) -> dict[str, float | None]:
    """A measure's percentiles over the steady requests of every pass (``batches``: one per pass), each interval
    the wider of the requests' own (by rank: :func:`tuner.stats.percentile_interval`) and the passes' (run to run:
    :func:`tuner.stats.batch_quantile_interval`); passes too ``short`` for steady state bound them from below only
    (:func:`tuner.bench._steady.passes_too_short`)."""
    samples = [x for batch in batches for x in batch]
    out = {f"{prefix}_p{p}_s": percentile(samples, p) for p in LATENCY_PERCENTILES}
    for p in INTERVAL_PERCENTILES:
        key = f"{prefix}_p{p}_s"
        ranks = percentile_interval(samples, p, confidence)
        low, high = batch_quantile_interval(batches, p, confidence, within=ranks)
        out[interval_key(key, "low")], out[interval_key(key, "high")] = low, None if short else high
    return out


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def run_rates(run: LoadResult) -> dict[str, float | None]:
    """One run's offered, achieved and sent rates (requests/s; module docstring)."""
    records = run.records
    scheduled = [r.t_scheduled for r in records if r.t_scheduled is not None]
    return {
        "offered_rps": span_rate(scheduled) if len(scheduled) == len(records) else None,
        "achieved_rps": span_rate([r.t_end for r in records if r.ok]),
        "sent_rps": span_rate([r.t_sent for r in records if r.t_sent is not None]),
    }


def latency_figures(
    runs: Sequence[LoadResult], *, slo: Slo | None = None, confidence: float = 0.8, looks: int = 1
) -> dict[str, Any]:
    """TTFT, TPOT and end-to-end percentiles over the steady requests of ``runs`` (:mod:`tuner.bench._steady`: an
    open loop's requests after its queue filled; p50 and p99 with their intervals at ``confidence``), their rates
    (over every request) and, with an ``slo``, its verdict (:mod:`tuner.bench._slo`; ``looks``: the passes a
    sequential verdict may stop after), keyed by the :class:`~tuner.bench.ScenarioResult` fields that hold them."""
    passes = steady_passes(runs)
    rates = [run_rates(run) for run in runs]
    values: dict[str, Any] = {}
    short = passes_too_short(passes)
    for m in LATENCY_MEASURES:  # a request's figure is its attribute named as the measure's [slo] limit
        samples = [[x for x in (getattr(rec, m.limit) for rec in p.judged) if x is not None] for p in passes]
        values.update(_percentiles(m.key, samples, confidence, short=short))
    for key in ("offered_rps", "achieved_rps", "sent_rps"):
        values[key] = _median([r[key] for r in rates])
    values["fill_requests"] = sum(p.fill for p in passes)
    return {**values, **slo_fields(passes, slo, confidence, looks=looks)}


def _since(t: float | None, begin: float) -> float | None:
    return None if t is None else round(t - begin, 6)


def request_rows(
    run: LoadResult, *, scenario: Scenario, repeat: int, attempt: int, counted: bool
) -> list[dict[str, object]]:
    """One row per request of ``run`` (a pass of ``scenario``), in the order they were due: what the summary figures
    are made of, for a user's own analysis (AIPerf's and ``vllm bench serve``'s per-request exports).

    Times are seconds from the pass's start, one clock for every client process; ``counted`` is False for a pass
    run again because the client was the bottleneck (``attempt`` counts the tries of one ``repeat``); ``steady``
    is False for a request of the pass's queue fill (:mod:`tuner.bench._steady`), which the percentiles and the
    verdict leave out. No prompt or generated text: a row says when and how much, never what.
    """
    begin, slo, stall = run.t_begin, scenario.slo, max(run.stall_s, default=None)
    steady = {id(rec) for rec in steady_pass(run).judged}
    rows: list[dict[str, object]] = []
    for rec in sorted(run.records, key=lambda r: (r.t_scheduled or r.t_due or r.t_start, r.index)):
        met = request_met(rec, slo) if slo and rec.ok else None
        rows.append({
            "scenario": scenario.name, "repeat": repeat, "attempt": attempt, "counted": counted, "index": rec.index,
            "scheduled_s": _since(rec.t_scheduled, begin), "due_s": _since(rec.t_due, begin),
            "sent_s": _since(rec.t_sent, begin), "first_token_s": _since(rec.t_first, begin),
            "end_s": _since(rec.t_end, begin), "ttft_s": rec.ttft_s, "tpot_s": rec.tpot_s, "e2e_s": rec.e2e_s,
            "start_delay_s": rec.start_delay_s, "output_tokens": rec.output_tokens,
            "prompt_tokens": rec.prompt_tokens, "slo_met": met, "steady": id(rec) in steady, "error": rec.error_kind,
            "pass_client_stall_s": stall,
        })  # fmt: skip
    return rows
