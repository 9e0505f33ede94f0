#!/usr/bin/env python3
"""Rules that might tell an open-loop pass that has not reached steady state: how often each calls a pass too short.

Passes of ``--requests`` Poisson arrivals from an idle server through the simulator's scheduler
(:func:`tuner.sim.simulate_open`, model time: 512-token prompts, 64-token answers, acceptance 3), at 30%, 60%, 90%
and 100% of the config's capacity (the completion rate of a saturated run), for a small batch (8 running requests:
its cap sets its capacity) and a large one (64: its decode slowing sets it). A rule that holds must call few passes
too short at light load for both, and most near capacity. The rules (docs/measuring.md, "An SLO verdict"):

* ``empty``: the last busy period (since the last arrival that found the server empty) is over half the pass;
* ``room``: ... since the last arrival that found fewer requests in flight than the most seen decoding at once;
* ``relax``: the pass is under 4 relaxation times of a queue at the utilisation it shows, rho / (1 - sqrt(rho))^2
  arrivals, rho the mean number decoding over the most decoding at once;
* ``mser``: MSER-5's truncation point (White 1997) on the per-request end-to-end latency is past half the pass.

    .venv/bin/python scripts/bench_steady_rules.py [--passes 30] [--requests 160]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

import numpy as np  # noqa: E402

from tuner.bench import arrival_schedule  # noqa: E402
from tuner.config import Scenario  # noqa: E402
from tuner.sim import ServerConfig  # noqa: E402
from tuner.sim._scheduler import OpenRequestTimes, simulate_open  # noqa: E402  (as bench_slo_verdict.py)

PROMPT, OUTPUT, ACCEPT = 512, 64, 3.0
LOADS = (0.3, 0.6, 0.9, 1.0)
Rule = Callable[[Sequence[OpenRequestTimes]], bool]


def run(batch: int, rate: float, n: int, seed: int) -> list[OpenRequestTimes]:
    sc = Scenario(name="steady", rate=rate, requests=n, concurrency=n, prompt_tokens=PROMPT, output_tokens=OUTPUT)
    arrivals = arrival_schedule(sc, count=n, seed=seed) or []
    cfg = dataclasses.replace(ServerConfig(), max_running_requests=batch)
    out = simulate_open(cfg, arrivals=arrivals, prompt_tokens=[PROMPT] * n, output_tokens=[OUTPUT] * n,
                        accept=lambda _bucket: ACCEPT)  # fmt: skip
    return sorted(out.requests, key=lambda t: t.arrival)


def capacity(batch: int) -> float:
    ends = sorted(t.finish for t in run(batch, 200.0, 3000, 1))[500:]
    return (len(ends) - 1) / (ends[-1] - ends[0])


def _in_flight(reqs: Sequence[OpenRequestTimes]) -> np.ndarray:
    return np.array([sum(1 for e in reqs[:i] if e.finish > t.arrival) for i, t in enumerate(reqs)])


def _most_decoding(reqs: Sequence[OpenRequestTimes]) -> int:
    events = sorted([(t.first_token, 1) for t in reqs] + [(t.finish, -1) for t in reqs])
    level = most = 0
    for _, step in events:
        level += step
        most = max(most, level)
    return most


def _tail_over_half(reqs: Sequence[OpenRequestTimes], below: int) -> bool:
    starts = np.flatnonzero(_in_flight(reqs) < below)
    return (len(reqs) - int(starts[-1])) * 2 > len(reqs)


def empty(reqs: Sequence[OpenRequestTimes]) -> bool:
    return _tail_over_half(reqs, 1)


def room(reqs: Sequence[OpenRequestTimes]) -> bool:
    return _tail_over_half(reqs, _most_decoding(reqs))


def relax(reqs: Sequence[OpenRequestTimes]) -> bool:
    span = max(t.finish for t in reqs) - reqs[0].arrival
    rho = min(sum(t.finish - t.first_token for t in reqs) / span / _most_decoding(reqs), 0.999)
    return len(reqs) < 4 * rho / (1 - rho**0.5) ** 2


def mser(reqs: Sequence[OpenRequestTimes]) -> bool:
    k = len(reqs) // 5
    means = np.array([t.finish - t.arrival for t in reqs[: k * 5]]).reshape(k, 5).mean(axis=1)
    scores = [np.sum((means[d:] - means[d:].mean()) ** 2) / (k - d) ** 2 for d in range(k // 2 + 2)]
    return int(np.argmin(scores)) * 2 > k


RULES: dict[str, Rule] = {"empty": empty, "room": room, "relax": relax, "mser": mser}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=30)
    parser.add_argument("--requests", type=int, default=160)
    args = parser.parse_args()
    print(f"passes of {args.requests} requests, {args.passes} per cell: the share each rule calls too short")
    print("| batch (capacity) | rule | " + " | ".join(f"{load:.0%}" for load in LOADS) + " |")
    print("|---|---|" + "---|" * len(LOADS))
    for batch in (8, 64):
        cap = capacity(batch)
        passes = {load: [run(batch, load * cap, args.requests, 100 + s) for s in range(args.passes)] for load in LOADS}
        for name, rule in RULES.items():
            cells = " | ".join(f"{np.mean([rule(p) for p in passes[load]]):.0%}" for load in LOADS)
            print(f"| {batch} ({cap:.2f} req/s) | {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
