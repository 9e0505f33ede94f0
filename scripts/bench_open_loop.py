#!/usr/bin/env python3
"""Does the open-loop client hold its schedule? tune's HTTP benchmark at fixed request rates against the simulator.

Starts the simulated server (no noise, fast time scale, short answers: far from its capacity, so any lateness is
the client's) and runs one open-loop scenario per rate through :class:`tuner.bench.HttpBenchmark`, exactly as a
study does (client processes ``auto``). Per rate it prints:

* sent/offered: sends per second over the schedule's arrivals per second (the client holding its schedule);
* achieved/offered: completions per second over arrivals per second (the server keeping up);
* the start delay p99 (send time minus when the request was due) and the client's CPU in cores;
* TTFT p50/p99 from the scheduled arrival.

    .venv/bin/python scripts/bench_open_loop.py [--rates 10,100] [--seconds 10] [--arrival poisson]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.bench import HttpBenchmark  # noqa: E402
from tuner.config import BenchmarkSection, Scenario  # noqa: E402
from tuner.endpoint import Endpoint  # noqa: E402
from tuner.sim.testing import spawn_sim  # noqa: E402

#: No speculation, 16-token answers at time scale 10: ~10 ms a request, so 100 req/s keeps ~1 in flight.
SERVER = ["--host", "127.0.0.1", "--sim-load-time", "0.3", "--sim-noise", "0", "--sim-seed", "1",
          "--sim-time-scale", "10"]  # fmt: skip


def _measure(url: str, *, rate: float, seconds: float, arrival: str) -> dict[str, object]:
    requests = max(2, round(rate * seconds))
    sc = Scenario(
        name=f"r{rate:g}", rate=rate, arrival=arrival, requests=requests, concurrency=requests,
        prompt_tokens=128, output_tokens=16,
    )  # fmt: skip
    section = BenchmarkSection(scenarios=(sc,), warmup_requests=2, repeats=1, request_timeout_s=60.0, flush_cache=False)
    result = HttpBenchmark(endpoint=Endpoint(base_url=url), config=section).run_scenario(sc)
    offered = result.offered_rps or float("nan")
    return {
        "rate": rate,
        "requests": requests,
        "offered": offered,
        "sent/offered": (result.sent_rps or float("nan")) / offered,
        "achieved/offered": (result.achieved_rps or float("nan")) / offered,
        "delay p99 ms": (result.start_delay_p99_s or 0.0) * 1000,
        "TTFT p50 ms": (result.ttft_p50_s or 0.0) * 1000,
        "TTFT p99 ms": (result.ttft_p99_s or 0.0) * 1000,
        "client cores": result.client_cpu_cores,
        "processes": result.client_processes,
        "client-bound": result.client_bound,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,100", help="comma-separated request rates (req/s)")
    parser.add_argument("--seconds", type=float, default=10.0, help="schedule length per rate")
    parser.add_argument("--arrival", default="poisson", choices=["poisson", "constant", "gamma"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sim = spawn_sim(SERVER, log_dir=Path(tmp))
        try:
            sim.wait_ready(timeout=60)
            rows = [
                _measure(sim.url, rate=float(r), seconds=args.seconds, arrival=args.arrival)
                for r in args.rates.split(",")
            ]
        finally:
            sim.kill()
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in (row[k] for k in keys)]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
