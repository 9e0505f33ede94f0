"""Whether a scenario kept its latency promise (``[slo]``): per request met or not, the share with its interval.

A request meets the SLO when its TTFT, TPOT and end-to-end latency (:mod:`tuner.bench._latency`: open loop from
its arrival) are each within the limits given. A scenario's attainment is the share of its counted requests that
met it, with an exact (Clopper-Pearson) interval at the benchmark's ``confidence``. A scenario *misses* the SLO
only when the interval's upper end is below the target: confidently below, not unlucky by a request or two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuner.bench._request import RequestRecord
from tuner.config import Slo
from tuner.stats import clopper_pearson

__all__ = ["slo_fields", "slo_miss"]


def slo_fields(records: Sequence[RequestRecord], slo: Slo | None, confidence: float) -> dict[str, float | None]:
    """``attainment`` and its interval over ``records`` (the ScenarioResult fields; empty without an SLO)."""
    if slo is None:
        return {}
    judged = [slo.met(ttft_s=r.ttft_s, tpot_s=r.tpot_s, e2e_s=r.latency_s) for r in records if r.ok]
    if not judged:
        return {"attainment": None, "attainment_low": None, "attainment_high": None}
    met = sum(judged)
    low, high = clopper_pearson(met, len(judged), confidence)
    return {"attainment": met / len(judged), "attainment_low": low, "attainment_high": high}


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
