"""When an open-loop scenario's requests arrive: the schedule, drawn before anything is sent.

A scenario with ``rate`` gets ``requests`` arrivals at that mean rate; the first at the start of the window and
the gaps after it drawn from the benchmark seed:

* ``poisson``: exponential gaps (mean ``1/rate``), the arrivals of many independent users;
* ``constant``: evenly spaced, ``1/rate`` apart;
* ``gamma``: gamma gaps of shape ``burstiness`` and mean ``1/rate`` (shape 1 is Poisson; below 1 the arrivals
  come in bursts, above 1 they are more regular), as AIPerf's and ``vllm bench serve``'s ``--burstiness``.

A ``trace`` scenario replays its file's offsets divided by ``trace_speed``. The seed is the benchmark's (plus
the repeat), never the trial's: every trial sees the same arrivals, so two configs differ by what they do with
them, not by the luck of the draw (common random numbers).
"""

from __future__ import annotations

import random

from tuner.config import Scenario, load_trace

__all__ = ["arrival_schedule", "offered_rps"]


def arrival_schedule(scenario: Scenario, *, count: int, seed: int) -> list[float] | None:
    """Seconds from the start at which each of ``count`` requests is due (None: closed loop)."""
    if scenario.trace is not None:
        lines = load_trace(scenario.trace)[:count]
        return [line.offset_s / scenario.trace_speed for line in lines]
    if scenario.rate is None:
        return None
    rate = scenario.rate
    rng = random.Random(f"arrivals:{seed}:{scenario.name}")
    out, t = [], 0.0
    for _ in range(count):
        out.append(t)
        if scenario.arrival == "constant":
            t += 1.0 / rate
        elif scenario.arrival == "gamma":
            shape = scenario.burstiness
            t += rng.gammavariate(shape, 1.0 / (rate * shape))
        else:
            t += rng.expovariate(rate)
    return out


def offered_rps(schedule: list[float]) -> float | None:
    """The rate a schedule offers: arrivals after the first over the time they span (None: fewer than two)."""
    if len(schedule) < 2 or schedule[-1] <= schedule[0]:
        return None
    return (len(schedule) - 1) / (schedule[-1] - schedule[0])
