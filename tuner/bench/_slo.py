"""Whether a scenario kept its latency promise (``[slo]``): per request met or not, and the scenario's verdict.

A request meets the SLO when its TTFT, TPOT and end-to-end latency (:mod:`tuner.bench._latency`: open loop from
its arrival) are each within the limits given: its worst latency ratio (:meth:`tuner.config.Slo.ratio`) is at most
1. A scenario's attainment is the share of its counted requests that met it, with an exact (Clopper-Pearson)
interval at the benchmark's ``confidence``, and its margin the log of the worst ratios' quantile at the required
share with its order-statistics interval: the verdict (:class:`tuner.slo.SloVerdict`) is made here, once.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.bench._record import RequestRecord
from tuner.config import Slo
from tuner.metrics import LATENCY_MEASURES
from tuner.slo import SloVerdict
from tuner.stats import clopper_pearson, percentile, percentile_interval

__all__ = ["goodput_fields", "pooled_slo_fields", "request_met", "request_ratio", "slo_fields"]


def request_ratio(rec: RequestRecord, slo: Slo) -> float:
    """One request's worst latency ratio against ``slo`` (its latencies from its origin: module docstring)."""
    return slo.ratio(**{m.limit: getattr(rec, m.limit) for m in LATENCY_MEASURES})


def request_met(rec: RequestRecord, slo: Slo) -> bool:
    """Whether one request met every limit of ``slo``."""
    return request_ratio(rec, slo) <= 1.0


def _log(x: float | None) -> float | None:
    return None if x is None else math.log(max(x, 1e-12))


def slo_fields(records: Sequence[RequestRecord], slo: Slo | None, confidence: float) -> dict[str, Any]:
    """The scenario's verdict over ``records`` and its good-token share (the ScenarioResult fields; empty
    without an SLO)."""
    if slo is None:
        return {}
    ok = [r for r in records if r.ok]
    ratios = [request_ratio(r, slo) for r in ok]
    met = sum(1 for x in ratios if x <= 1.0)
    low, high = clopper_pearson(met, len(ok), confidence) if ok else (None, None)
    q = slo.attainment * 100
    q_low, q_high = percentile_interval(ratios, q, confidence) if ok else (None, None)
    verdict = SloVerdict(
        state=SloVerdict.decide(low, high, slo.attainment),
        required=slo.attainment,
        requests=len(ok),
        attainment=met / len(ok) if ok else None,
        low=low,
        high=high,
        margin=_log(percentile(ratios, q)),
        margin_low=_log(q_low),
        margin_high=_log(q_high),
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


def pooled_slo_fields(results: Sequence[Any], confidence: float) -> dict[str, Any]:
    """One scenario's SLO figures over several measurements of it (the confirmation's visits): the verdict on
    all their requests (no margin: the visits keep counts, not ratios), the good-token share over all their
    tokens, the median achieved rate, and the requests and tokens they counted ({} when none was judged)."""
    judged = [r for r in results if r.attainment is not None and r.requests and r.slo_required is not None]
    if not judged:
        return {}
    n = sum(r.requests for r in judged)
    met = round(sum(r.attainment * r.requests for r in judged))
    low, high = clopper_pearson(met, n, confidence)
    required = judged[0].slo_required
    verdict = SloVerdict(
        state=SloVerdict.decide(low, high, required), required=required, requests=n, attainment=met / n,
        low=low, high=high,
    )  # fmt: skip
    tokens = sum(r.output_tokens for r in judged)
    shares = [(r.good_token_share, r.output_tokens) for r in judged if r.good_token_share is not None]
    rates = [r.achieved_rps for r in judged if r.achieved_rps is not None]
    return {
        **verdict.figures(),
        "good_token_share": sum(s * w for s, w in shares) / tokens if shares and tokens else None,
        "achieved_rps": statistics.median(rates) if rates else None,
        "requests": n,
        "output_tokens": tokens,
    }
