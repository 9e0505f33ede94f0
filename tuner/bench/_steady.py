"""Which requests of an open-loop pass judge it: those that arrived after the queue filled.

A pass starts on an idle server: its first requests meet an empty batch and no queue, and are faster than the
service the pass is meant to measure (slo-chat's baseline at 4 req/s: all of its first 60 requests within TPOT
30 ms, 37% of 320). The rule, sized from what the pass itself measures: a request stays in the server for its
end-to-end latency (its *residence*), so the batch and queue a request meets are made of the arrivals of the
residence before it, and an empty start has been forgotten once the arrivals of the first
:data:`FILL_RESIDENCES` median residences have come and gone. Those requests are the pass's *fill*, left out of
its percentiles and its SLO verdict; the rest are its *steady* requests. A pass whose fill is more than half of it
ended before it reached steady state: it is **too short**. Its last half is still judged, so a miss is a miss
(a fill only flatters the service: from an empty start latencies grow), but it is never shown to meet the SLO.

Each pass is a replicate: its own arrivals (the draw's seed plus the repeat), so its share within the limits
and its percentiles are independent draws of a pass's, whose spread is the run-to-run uncertainty
(:mod:`tuner.stats._batches`). Stretches of one pass are not: near capacity a queue remembers for longer than a
pass lasts (docs/measuring.md measures it).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.bench._load import LoadResult
from tuner.bench._record import RequestRecord

__all__ = ["FILL_RESIDENCES", "SteadyPass", "steady_pass"]

#: Median residences (end-to-end latencies) of arrivals that make a pass's fill: one lets the batch fill from an
#: empty start (every request in flight arrived after the start), the second lets the queue behind it settle.
FILL_RESIDENCES = 2.0


@dataclass(frozen=True, kw_only=True)
class SteadyPass:
    """One pass's requests split as the module docstring says."""

    judged: list[RequestRecord]
    """The successful requests that judge the pass, in arrival order."""
    fill: int = 0
    """Requests left out as the queue filled."""
    too_short: bool = False
    """The fill was more than half the pass: ``judged`` is its last half, which shows a miss but never a met."""


def steady_pass(run: LoadResult) -> SteadyPass:
    """``run``'s steady requests (module docstring); a closed loop's are all of them."""
    ok = sorted((r for r in run.records if r.ok), key=lambda r: (r.t_origin, r.index))
    if not ok or any(r.t_scheduled is None for r in ok):
        return SteadyPass(judged=ok)
    filled = ok[0].t_origin + FILL_RESIDENCES * statistics.median(r.e2e_s for r in ok)
    fill = sum(1 for r in ok if r.t_origin < filled)
    if fill * 2 > len(ok):
        judged = ok[len(ok) // 2 :]
        return SteadyPass(judged=judged, fill=len(ok) - len(judged), too_short=True)
    return SteadyPass(judged=ok[fill:], fill=fill)


def steady_passes(runs: Sequence[LoadResult]) -> list[SteadyPass]:
    """Every run's steady requests."""
    return [steady_pass(run) for run in runs]
