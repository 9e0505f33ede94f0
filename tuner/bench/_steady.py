"""Which requests of an open-loop pass judge it (those that arrived after the queue filled), and the busy periods
that batch them.

A pass starts on an idle server: its first requests meet an empty batch and no queue, and are faster than the
service the pass is meant to measure (slo-chat's baseline at 4 req/s: all of its first 60 requests within TPOT
30 ms, 37% of 320). The rule, sized from what the pass itself measures: a request stays in the server for its
end-to-end latency (its *residence*), so the batch and queue a request meets are made of the arrivals of the
residence before it, and an empty start has been forgotten once the arrivals of the first
:data:`FILL_RESIDENCES` median residences have come and gone. Those requests are the pass's *fill*, left out of
its percentiles and its SLO verdict; the rest are its *steady* requests.

A pass whose fill is more than half of it ended before it reached steady state: it is **too short**. Its last
half is still judged, so a miss is a miss (a fill only flatters the service: from an empty start latencies grow),
but the share it measures has no lower bound and its percentiles no upper one: never a met.

An arrival that finds none of the pass's earlier requests in flight starts afresh, as the pass itself did: the
pass's *busy periods* are independent draws (the regenerative view of a queue: Crane and Iglehart 1974,
"Simulating stable stochastic systems"), while the requests of one busy period share its queue. Busy periods are
batches whatever the load (:func:`by_period`); they are not a test of steady state, since a server with room for
many requests in flight seldom empties even far below its capacity (docs/measuring.md measures both).

Each pass is a replicate: its own arrivals (the draw's seed plus the repeat), so its share within the limits
and its percentiles are independent draws of a pass's, whose spread is the run-to-run uncertainty
(:mod:`tuner.stats._batches`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from tuner.bench._load import LoadResult
from tuner.bench._record import RequestRecord

__all__ = ["FILL_RESIDENCES", "SteadyPass", "by_period", "passes_too_short", "steady_pass", "steady_passes"]

T = TypeVar("T")

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
    periods: tuple[int, ...] = ()
    """The sizes of the busy periods ``judged`` falls into, in order (the first may have begun in the fill)."""
    too_short: bool = False
    """The fill was more than half the pass: ``judged`` is its last half (module docstring)."""


def by_period(passes: Sequence[SteadyPass], values: Sequence[Sequence[T]]) -> list[list[T]]:
    """``values`` (per pass, one per judged request) split by the passes' busy periods: batches as independent as
    a queue's, at every load (module docstring)."""
    out: list[list[T]] = []
    for p, batch in zip(passes, values, strict=True):
        i = 0
        for size in p.periods or (len(batch),):
            out.append(list(batch[i : i + size]))
            i += size
    return out


def passes_too_short(passes: Sequence[SteadyPass]) -> bool:
    """Whether any of ``passes`` was too short for steady state (module docstring)."""
    return any(p.too_short for p in passes)


def _starts(ok: Sequence[RequestRecord]) -> list[int]:
    """Where each busy period begins: the arrivals that found none of the earlier requests (``ok`` in arrival
    order) in flight."""
    starts, latest = [], -math.inf
    for i, r in enumerate(ok):
        if r.t_origin >= latest:
            starts.append(i)
        latest = max(latest, r.t_end)
    return starts


def _periods(starts: Sequence[int], begin: int, end: int) -> tuple[int, ...]:
    """The sizes of the busy periods (``starts``) within requests ``begin:end``."""
    cuts = [begin, *(i for i in starts if begin < i < end), end]
    return tuple(b - a for a, b in itertools.pairwise(cuts))


def steady_pass(run: LoadResult) -> SteadyPass:
    """``run``'s steady requests (module docstring); a closed loop's are all of them."""
    ok = sorted((r for r in run.records if r.ok), key=lambda r: (r.t_origin, r.index))
    if not ok or any(r.t_scheduled is None for r in ok):
        return SteadyPass(judged=ok)
    filled = ok[0].t_origin + FILL_RESIDENCES * statistics.median(r.e2e_s for r in ok)
    fill = sum(1 for r in ok if r.t_origin < filled)
    starts = _starts(ok)
    too_short = fill * 2 > len(ok)
    begin = len(ok) // 2 if too_short else fill
    return SteadyPass(judged=ok[begin:], fill=begin, periods=_periods(starts, begin, len(ok)), too_short=too_short)


def steady_passes(runs: Sequence[LoadResult]) -> list[SteadyPass]:
    """Every run's steady requests."""
    return [steady_pass(run) for run in runs]
