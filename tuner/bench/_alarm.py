"""Is the load generator the bottleneck? A check on every measurement, from the client's own figures.

A saturated client does not slow the streams it is reading so much as it delays their *starts* and the reading
of their first events (REFERENCE.md, "Load-generator cost"): aggregate throughput falls while per-stream pace
looks fine. So every scenario records, over its measured repeats:

* the CPU of every client process over its share of each run (``getrusage`` of the event-loop thread), as
  cores: a process near one core is saturated, whatever the server does;
* the start delay of every request: from when it was due (released, and its stream free) to when its body was
  written to the socket (httpx trace). A free event loop sends within a millisecond or so.

* the longest stall of every client process's event loop (:class:`~tuner.bench.MeasuredWindow`): while it
  cannot run, every event that arrives is stamped late, a first token, an end, the completion that starts an
  achieved rate.

The scenario is marked ``client_bound`` when the busiest process used more than ``cpu_budget_cores`` (0.8), or
the start delay p99 or the longest stall exceeds ``max(min_delay_s, delay_fraction x median request latency)``
(10%): a delay that costs about that fraction of the throughput, or of a request's latency. Sending a
scenario's first requests all at once always takes a few milliseconds per request (tens of ms for 32 long
prompts on a busy machine): the bound sits above that burst, so it catches a client that cannot keep up, not
one that merely starts many streams. The fix is more client processes (``[benchmark] client_processes``) or a
client machine with more cores (or fewer other programs on it).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.bench._load import LoadResult
from tuner.stats import percentile

__all__ = ["CPU_BUDGET_CORES", "MIN_START_DELAY_S", "START_DELAY_FRACTION", "ClientLoad", "client_load"]

#: Above this CPU share per process the client's event loop is the pace-setter (REFERENCE.md: ~0.7-0.8).
CPU_BUDGET_CORES = 0.8
#: Start delays below this never count: they are the cost of sending the first requests at once.
MIN_START_DELAY_S = 0.05
#: A start delay p99 above this fraction of the median request latency cuts the throughput measurably.
START_DELAY_FRACTION = 0.1


@dataclass(frozen=True, kw_only=True)
class ClientLoad:
    """The client's own load over a scenario's measured repeats."""

    processes: int
    cpu_cores: float | None
    """CPU of all client processes over the measured windows, in cores."""
    busiest_process_cores: float | None
    """The highest CPU share of one process over one run."""
    start_delay_p99_s: float | None
    start_delay_bound_s: float
    """What a start delay p99 or a stall may reach before the pass is client-bound."""
    cpu_budget_cores: float
    longest_stall_s: float | None = None
    """The longest time a client process's event loop could not run during a measured window."""

    @property
    def over_cpu(self) -> bool:
        return self.busiest_process_cores is not None and self.busiest_process_cores > self.cpu_budget_cores

    @property
    def late(self) -> bool:
        return self.start_delay_p99_s is not None and self.start_delay_p99_s > self.start_delay_bound_s

    @property
    def stalled(self) -> bool:
        return self.longest_stall_s is not None and self.longest_stall_s > self.start_delay_bound_s

    @property
    def bound(self) -> bool:
        return self.over_cpu or self.late or self.stalled

    @property
    def reason(self) -> str | None:
        """The causes, joined (``cpu``, ``start delay``, ``stall``: ``cpu, stall``), or None when not bound."""
        causes = (("cpu", self.over_cpu), ("start delay", self.late), ("stall", self.stalled))
        return ", ".join(r for r, hit in causes if hit) or None


def client_load(
    runs: Sequence[LoadResult],
    *,
    processes: int,
    cpu_budget_cores: float = CPU_BUDGET_CORES,
    min_delay_s: float = MIN_START_DELAY_S,
    delay_fraction: float = START_DELAY_FRACTION,
) -> ClientLoad:
    """Summarise the client's CPU and start delays over ``runs`` (see the module docstring)."""
    cpu = sum(c for run in runs for c in run.cpu_s)
    wall = sum(run.t_end - run.t_begin for run in runs)
    shares = [c / w for run in runs for c, w in zip(run.cpu_s, run.wall_s, strict=True) if w > 0]
    records = [rec for run in runs for rec in run.records]
    delays = [d for d in (rec.start_delay_s for rec in records) if d is not None]
    latencies = [rec.e2e_s for rec in records]
    bound = max(min_delay_s, delay_fraction * statistics.median(latencies)) if latencies else min_delay_s
    stalls = [s for run in runs for s in run.stall_s]
    return ClientLoad(
        processes=processes,
        cpu_cores=cpu / wall if wall > 0 else None,
        busiest_process_cores=max(shares) if shares else None,
        start_delay_p99_s=percentile(delays, 99),
        start_delay_bound_s=bound,
        cpu_budget_cores=cpu_budget_cores,
        longest_stall_s=max(stalls) if stalls else None,
    )
