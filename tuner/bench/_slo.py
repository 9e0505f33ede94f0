"""Whether a scenario kept its latency promise (``[slo]``): per request met or not, and the scenario's verdict.

A request meets the SLO when its TTFT, TPOT and end-to-end latency (:mod:`tuner.bench._latency`: open loop from
its arrival) are each within the limits given: its worst latency ratio (:meth:`tuner.config.Slo.ratio`) is at most
1. A scenario's attainment is the share of its steady requests (:mod:`tuner.bench._steady`) that met it, with an
interval at the benchmark's ``confidence`` paid for every pass the sequential verdict may stop after (the wider of
the exact Clopper-Pearson one and the passes' run-to-run one), and its margin the log of the worst ratios'
quantile at the required share with its interval: the verdict (:class:`tuner.slo.SloVerdict`) is made here, once.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.bench._record import RequestRecord
from tuner.bench._steady import SteadyPass, by_period, passes_too_short
from tuner.config import Slo
from tuner.metrics import LATENCY_MEASURES
from tuner.slo import MET, MISSED, UNDECIDED, SloVerdict
from tuner.stats import (
    batch_quantile_interval,
    batch_share_interval,
    clopper_pearson,
    percentile,
    percentile_interval,
)

__all__ = ["goodput_fields", "looked", "pooled_slo_fields", "request_met", "request_ratio", "slo_fields"]


def request_ratio(rec: RequestRecord, slo: Slo) -> float:
    """One request's worst latency ratio against ``slo`` (its latencies from its origin: module docstring)."""
    return slo.ratio(**{m.limit: getattr(rec, m.limit) for m in LATENCY_MEASURES})


def request_met(rec: RequestRecord, slo: Slo) -> bool:
    """Whether one request met every limit of ``slo``."""
    return request_ratio(rec, slo) <= 1.0


def _log(x: float | None) -> float | None:
    return None if x is None else math.log(max(x, 1e-12))


def _margin(
    batches: Sequence[Sequence[float]], q: float, confidence: float, *, short: bool
) -> tuple[float | None, float | None, float | None]:
    """The log of the worst ratios' (``batches``: per pass) ``q``-th percentile with its interval (the wider of
    ranks and passes), bounded from below only when the passes were too ``short``."""
    ratios = [x for batch in batches for x in batch]
    low, high = batch_quantile_interval(batches, q, confidence, within=percentile_interval(ratios, q, confidence))
    return _log(percentile(ratios, q)), _log(low), None if short else _log(high)


def _floor(low: float | None, too_short: bool) -> float | None:
    """An attainment's lower end: none (0) from passes too short for steady state, which flatter the service (so
    they are never met)."""
    return 0.0 if too_short and low is not None else low


def looked(confidence: float, looks: int) -> float:
    """The level each of ``looks`` looks at a sequential verdict takes so that all of them together keep
    ``confidence`` (Bonferroni's bound on repeated looks: a verdict that may stop at any of them must pay for
    each)."""
    return 1.0 - (1.0 - confidence) / max(1, looks)


def slo_fields(passes: Sequence[SteadyPass], slo: Slo | None, confidence: float, *, looks: int = 1) -> dict[str, Any]:
    """The scenario's verdict over the steady requests of ``passes`` (:mod:`tuner.bench._steady`) and its
    good-token share (the ScenarioResult fields; empty without an SLO).

    The attainment's interval is the widest of the requests' (Clopper-Pearson: as if independent), the passes'
    (run to run) and the busy periods' (within a pass: :func:`tuner.bench._steady.by_period`; both
    :func:`tuner.stats.batch_share_interval`), at :func:`looked` ``(confidence, looks)`` for a verdict that may
    stop after any of ``looks`` passes: met needs its low end to clear the required share. A miss needs only the
    requests' interval below it: a pass starts idle and few passes see a rare burst, so the passes' spread
    flatters, never hides, a config that misses. One pass says nothing of how the share varies from run to run,
    and a pass too short for steady state flatters the service (:func:`tuner.bench._steady.passes_too_short`):
    either can show a miss, never a met, and a too-short pass bounds the share from above only (its low end is
    0) and the margin from below only."""
    if slo is None:
        return {}
    level = looked(confidence, looks)
    batches = [[request_ratio(r, slo) for r in p.judged] for p in passes]
    ratios = [x for batch in batches for x in batch]
    ok = [r for p in passes for r in p.judged]
    met = sum(1 for x in ratios if x <= 1.0)
    share = met / len(ratios) if ratios else None
    low, high = clopper_pearson(met, len(ratios), level) if ratios else (None, None)
    # A miss the requests show stands: every pass starts idle and few see a rare burst, so passes flatter.
    missed = high is not None and high < slo.attainment
    if share is not None:
        for groups in (batches, by_period(passes, batches)):  # run to run, and busy period to busy period
            counts = [(sum(1 for x in group if x <= 1.0), len(group)) for group in groups]
            low, high = batch_share_interval(counts, level, within=(low, high))
    short = passes_too_short(passes)
    low = _floor(low, short)
    state = MISSED if missed else SloVerdict.decide(low, high, slo.attainment)
    margin, margin_low, margin_high = _margin(batches, slo.attainment * 100, level, short=short)
    verdict = SloVerdict(
        state=UNDECIDED if len(passes) < 2 and state == MET else state,
        required=slo.attainment,
        requests=len(ratios),
        attainment=share,
        low=low,
        high=high,
        margin=margin,
        margin_low=margin_low,
        margin_high=margin_high,
        too_short=short,
    )
    tokens = sum(r.output_tokens for r in ok)
    good = sum(r.output_tokens for r, x in zip(ok, ratios, strict=True) if x <= 1.0)
    return {**verdict.figures(), "good_token_share": good / tokens if tokens else None}


def goodput_fields(
    *, point: float, score: float, figures: Mapping[str, Any], tokens_per_request: float | None
) -> dict[str, float | None]:
    """Goodput (DistServe, ``vllm bench serve``): the rate of the requests that met every limit.

    ``goodput_rps`` is the achieved request rate times the attainment (its lower bound: times the attainment's
    lower end); ``goodput_tok_s`` is the throughput's point times the share of output tokens in requests that
    met it (its lower bound: the throughput's lower bound, the share scaled by the attainment's interval). A
    scenario with nothing judged (no SLO, or the in-process model's closed loop) counts every request. Without a
    measured completion rate the rate is the throughput over the tokens per request.
    """
    attainment, low, share = (figures.get(k) for k in ("attainment", "attainment_low", "good_token_share"))
    if attainment is None or low is None:
        attainment, low, share = 1.0, 1.0, 1.0
    share = attainment if share is None else share
    rate = figures.get("achieved_rps") or (point / tokens_per_request if tokens_per_request else None)
    scale = low / attainment if attainment > 0 else 0.0
    return {
        "goodput_rps": rate * attainment if rate is not None else None,
        "goodput_rps_low": rate * low if rate is not None else None,
        "goodput_tok_s": point * share,
        "goodput_tok_s_low": score * share * scale,
    }


def _judged(result: Any) -> int:
    """The requests a measurement's verdict judged (recorded before that was kept: every request)."""
    return int(result.slo_requests or result.requests) if getattr(result, "slo_requests", None) else result.requests


def pooled_slo_fields(results: Sequence[Any], confidence: float) -> dict[str, Any]:
    """One scenario's SLO figures over several measurements of it (the confirmation's visits, each with fresh
    arrivals: independent replicates): the verdict on all their judged requests, its interval the wider of the
    requests' (Clopper-Pearson) and the visits' own spread (:func:`tuner.stats.batch_share_interval`), no margin
    (the visits keep counts, not ratios); a measurement too short for steady state keeps it from met. Beside it
    the good-token share over all their tokens, the median achieved rate, and the requests and tokens they
    counted ({} when none was judged)."""
    judged = [r for r in results if r.attainment is not None and r.requests and r.slo_required is not None]
    if not judged:
        return {}
    n = sum(_judged(r) for r in judged)
    met = round(sum(r.attainment * _judged(r) for r in judged))
    cp = clopper_pearson(met, n, confidence)
    counts = [(round(r.attainment * _judged(r)), _judged(r)) for r in judged]
    low, high = batch_share_interval(counts, confidence, within=cp)
    required = judged[0].slo_required
    too_short = any(bool(getattr(r, "slo_too_short", False)) for r in judged)
    low = _floor(low, too_short)
    verdict = SloVerdict(
        state=SloVerdict.decide(low, high, required), required=required, requests=n,
        attainment=met / n, low=low, high=high, too_short=too_short,
    )  # fmt: skip
    tokens = sum(r.output_tokens for r in judged)
    shares = [(r.good_token_share, r.output_tokens) for r in judged if r.good_token_share is not None]
    rates = [r.achieved_rps for r in judged if r.achieved_rps is not None]
    return {
        **verdict.figures(),
        "good_token_share": sum(s * w for s, w in shares) / tokens if shares and tokens else None,
        "achieved_rps": statistics.median(rates) if rates else None,
        "requests": sum(r.requests for r in judged),
        "output_tokens": tokens,
    }
