#!/usr/bin/env python3
"""How often do the latency percentiles' intervals hold the true percentile when requests queue?

The interval (:func:`tuner.stats.percentile_interval`) is exact for independent requests. Open-loop requests are
not independent: one that waits behind a full batch delays its neighbours. This runs many passes of the same
open-loop scenario (Poisson arrivals, a fresh schedule per pass) through the simulator's scheduler in model time,
two passes pooled per "trial" as a 2-repeat scenario would be, and computes each trial's intervals with
:func:`tuner.bench.latency_figures`, the benchmark's own code. The true percentile is that of every request of
every pass pooled. Per rate, measure and percentile it prints the coverage the binomial sums promise, the
coverage of as many requests drawn independently from that same pooled distribution (the script's own check: it
matches the sums), and the coverage observed under queueing.

    .venv/bin/python scripts/bench_percentile_ci.py [--trials 300] [--requests 160] [--rates 2,6,7.5]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tuner.bench import LoadResult, RequestRecord, arrival_schedule, latency_figures  # noqa: E402
from tuner.config import Scenario  # noqa: E402
from tuner.sim import ServerConfig  # noqa: E402
from tuner.sim._scheduler import simulate_open  # noqa: E402  (the model's scheduler, as sim.inprocess runs it)
from tuner.stats import percentile_interval  # noqa: E402

#: A small batch (8 running requests), 512-token prompts, 64-token answers, acceptance 3: capacity ~8 req/s.
BATCH, PROMPT, OUTPUT, ACCEPT = 8, 512, 64, 3.0
CONFIDENCE = 0.8
MEASURES = (("ttft", lambda r: r.ttft_s), ("tpot", lambda r: r.tpot_s))


def _pass(rate: float, requests: int, seed: int) -> LoadResult:
    sc = Scenario(name="ci", rate=rate, requests=requests, concurrency=requests, prompt_tokens=PROMPT,
                  output_tokens=OUTPUT)  # fmt: skip
    arrivals = arrival_schedule(sc, count=requests, seed=seed) or []
    cfg = dataclasses.replace(ServerConfig(), max_running_requests=BATCH)
    run = simulate_open(cfg, arrivals=arrivals, prompt_tokens=[PROMPT] * requests, output_tokens=[OUTPUT] * requests,
                        accept=lambda _bucket: ACCEPT)  # fmt: skip
    records = [
        RequestRecord(index=i, t_start=t.arrival, t_scheduled=t.arrival, t_sent=t.arrival, t_first=t.first_token,
                      t_end=t.finish, output_tokens=t.tokens)
        for i, t in enumerate(run.requests)
    ]  # fmt: skip
    return LoadResult(records=records, started=len(records))


def _exact(n: int, q: float) -> float:
    """The coverage the binomial sums promise for n independent requests (the ranks the interval picks)."""
    low, high = percentile_interval([float(i) for i in range(n)], q, CONFIDENCE)
    p = q / 100

    def cdf(k: int) -> float:
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))

    return 1.0 - (cdf(int(low)) if low is not None else 0.0) - (1.0 - cdf(int(high)) if high is not None else 0.0)


def _covers(bounds: tuple[float | None, float | None], truth: float) -> bool:
    low, high = bounds
    return (low is None or low <= truth) and (high is None or truth <= high)


def _rate_rows(rate: float, trials: int, requests: int) -> list[str]:
    pooled = [(_pass(rate, requests, 2 * k), _pass(rate, requests, 2 * k + 1)) for k in range(trials)]
    figures = [latency_figures(list(pair), confidence=CONFIDENCE) for pair in pooled]
    achieved = np.median([f["achieved_rps"] for f in figures])
    rows = []
    for name, read in MEASURES:
        every = [x for pair in pooled for run in pair for r in run.records if (x := read(r)) is not None]
        for q in (50, 99):
            truth = float(np.percentile(every, q))
            covered = sum(_covers((f[f"{name}_p{q}_low_s"], f[f"{name}_p{q}_high_s"]), truth) for f in figures)
            n = 2 * requests
            rng = np.random.default_rng(round(rate * 1000) + q)
            iid = sum(
                _covers(percentile_interval(rng.choice(every, n).tolist(), q, CONFIDENCE), truth) for _ in range(trials)
            )
            rows.append(f"{rate:>5g} {achieved:>8.2f} {name:>5} p{q:<3} {truth * 1000:>9.1f} "
                        f"{_exact(n, q):>7.1%} {iid / trials:>7.1%} {covered / trials:>9.1%}")  # fmt: skip
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--requests", type=int, default=160, help="requests per pass (two passes pooled per trial)")
    ap.add_argument("--rates", default="2,6,7.5", help="offered requests/s, comma-separated")
    args = ap.parse_args()
    print(f"{args.trials} trials of 2 x {args.requests} requests, batch {BATCH}, {CONFIDENCE:.0%} intervals")
    print(f"{'rate':>5} {'achieved':>8} {'':>5} {'':<4} {'true ms':>9} {'binom':>7} {'iid':>7} {'queueing':>9}")
    for rate in (float(r) for r in args.rates.split(",")):
        for row in _rate_rows(rate, args.trials, args.requests):
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
