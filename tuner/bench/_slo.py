"""Whether a scenario kept its latency promise (``[slo]``): per request met or not, the share with its interval.

A request meets the SLO when its TTFT, TPOT and end-to-end latency (:mod:`tuner.bench._latency`: open loop from
its arrival) are each within the limits given. A scenario's attainment is the share of its counted requests that
met it, with an exact (Clopper-Pearson) interval at the benchmark's ``confidence``. A scenario *misses* the SLO
only when the interval's upper end is below the target: confidently below, not unlucky by a request or two.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.bench._request import RequestRecord
from tuner.config import Slo
from tuner.stats import clopper_pearson

__all__ = ["goodput_fields", "pooled_slo_fields", "request_met", "slo_fields", "slo_miss"]


def request_met(rec: RequestRecord, slo: Slo) -> bool:
    """Whether one request met every limit of ``slo`` (its latencies from its origin: module docstring)."""
    return slo.met(ttft_s=rec.ttft_s, tpot_s=rec.tpot_s, e2e_s=rec.latency_s)


def slo_fields(records: Sequence[RequestRecord], slo: Slo | None, confidence: float) -> dict[str, float | None]:
    """``attainment`` and its interval over ``records`` (the ScenarioResult fields; empty without an SLO)."""
    if slo is None:
        return {}
    judged = [request_met(r, slo) for r in records if r.ok]
    if not judged:
        return {"attainment": None, "attainment_low": None, "attainment_high": None}
    met = sum(judged)
    low, high = clopper_pearson(met, len(judged), confidence)
    tokens = sum(r.output_tokens for r in records if r.ok)
    good = sum(r.output_tokens for r, ok in zip((r for r in records if r.ok), judged, strict=True) if ok)
    return {
        "attainment": met / len(judged),
        "attainment_low": low,
        "attainment_high": high,
        "good_token_share": good / tokens if tokens else None,
    }


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


def _share(x: float) -> str:
    return f"{x * 100:.3g}%"


def slo_miss(result: Any, slo: Slo | None) -> str | None:
    """The one line that says a scenario's result confidently misses ``slo`` (None: it meets it, or no SLO)."""
    high = getattr(result, "attainment_high", None)
    if slo is None or high is None or high >= slo.attainment:
        return None
    return (
        f"misses the SLO in {result.name}: {_share(result.attainment)} of requests within {slo.describe()}, "
        f"{_share(slo.attainment)} required"
    )


def pooled_slo_fields(results: Sequence[Any], confidence: float) -> dict[str, Any]:
    """One scenario's SLO figures over several measurements of it (the confirmation's visits): attainment and
    its interval over all their requests, the good-token share over all their tokens, the median achieved
    rate, and the requests and tokens they counted ({} when none was judged)."""
    judged = [r for r in results if r.attainment is not None and r.requests]
    if not judged:
        return {}
    n = sum(r.requests for r in judged)
    met = round(sum(r.attainment * r.requests for r in judged))
    low, high = clopper_pearson(met, n, confidence)
    tokens = sum(r.output_tokens for r in judged)
    shares = [(r.good_token_share, r.output_tokens) for r in judged if r.good_token_share is not None]
    rates = [r.achieved_rps for r in judged if r.achieved_rps is not None]
    return {
        "attainment": met / n,
        "attainment_low": low,
        "attainment_high": high,
        "good_token_share": sum(s * w for s, w in shares) / tokens if shares and tokens else None,
        "achieved_rps": statistics.median(rates) if rates else None,
        "requests": n,
        "output_tokens": tokens,
    }
