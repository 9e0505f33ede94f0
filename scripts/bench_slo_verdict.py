#!/usr/bin/env python3
"""Does an SLO verdict hold? Coverage of the attainment and p99 intervals, and the "meets" verdicts the truth keeps.

One config of the simulator's scheduler (:func:`tuner.sim._scheduler.simulate_open`, in model time: the same
arrivals and queue as the HTTP simulator, in milliseconds), Poisson arrivals at 30%, 60%, 90% and 100% of its
capacity (the completion rate of a saturated run). The truth at each load is what a 5000-request run (its first
500 left out: its own start) shows, as expected over ``--truth-runs`` such runs: near capacity one run is itself a
draw, whose share within a promise spreads by several points (at 100% of capacity, from 0 to 97%: there is no
steady state there, and the truth is that of a run of this length). Two promises per load, each a TTFT and a TPOT
limit scaled together so that the truth's share within them is 95% ("meets") or 85% ("misses"), 90% of requests
required. Per load and promise,
``--seeds`` independent measurements, each with its own arrivals, made by :func:`tuner.bench.latency_figures`
(the benchmark's own code):

* ``--mode fixed``: one pass of 320 requests (what a scenario of 320 requests measured before verdicts were
  sequential);
* ``--mode sequential``: passes of ``--pass-requests`` requests, each with fresh arrivals, added while the verdict
  is undecided, up to ``--budget`` passes (the benchmark's rule: :meth:`tuner.bench.BaseBenchmark.slo_pending`).

It prints, per load and promise: how often the stated attainment interval holds the truth's share, how many
"meets" and "misses" verdicts the truth keeps, the median requests per decided verdict (and the share decided),
and how often the TTFT and TPOT p99 intervals hold the truth's p99 (a missing bound holds its side). Run it on
another checkout (``PYTHONPATH=/path/to/checkout``) for that code's figures.

    .venv/bin/python scripts/bench_slo_verdict.py [--mode sequential] [--seeds 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout given there wins

import numpy as np  # noqa: E402

from tuner.bench import LoadResult, RequestRecord, arrival_schedule, latency_figures  # noqa: E402
from tuner.config import Scenario, Slo  # noqa: E402
from tuner.sim import ServerConfig  # noqa: E402
from tuner.sim._scheduler import simulate_open  # noqa: E402  (the model's scheduler, as sim.inprocess runs it)

#: A small batch (8 running requests), 512-token prompts, 64-token answers, acceptance 3.
BATCH, PROMPT, OUTPUT, ACCEPT = 8, 512, 64, 3.0
CONFIDENCE = 0.8
LOADS = (0.3, 0.6, 0.9, 1.0)
REQUIRED = 0.9
#: The truth's share within each promise's limits.
PROMISES = (("meets", 0.95), ("misses", 0.85))
TRUTH_REQUESTS, TRUTH_SKIP, FIXED_REQUESTS = 5000, 500, 320


@cache
def _pass(rate: float, requests: int, seed: int) -> LoadResult:
    sc = Scenario(name="slo", rate=rate, requests=requests, concurrency=requests, prompt_tokens=PROMPT,
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


def capacity() -> float:
    """Completions per second of a saturated run (arrivals far faster than the server)."""
    run = _pass(100.0, 3000, 1)
    ends = sorted(r.t_end for r in run.records)[500:]  # once the batch is full
    return (len(ends) - 1) / (ends[-1] - ends[0])


@dataclasses.dataclass(frozen=True)
class Truth:
    ttft_p99: float
    tpot_p99: float
    slos: dict[str, Slo]
    """Per promise, limits within which the truth's share is the promise's."""
    shares: dict[str, float]


def truth(rate: float, runs: int) -> Truth:
    """The figures of a 5000-request run at ``rate``, as expected over ``runs`` of them (each its own arrivals):
    near capacity one such run is itself a draw (its share within a promise spreads by several points), so one
    run would be a noisy target for every interval."""
    ttft, tpot = [], []
    for k in range(runs):
        records = sorted(_pass(rate, TRUTH_REQUESTS, 10**6 + k).records, key=lambda r: r.t_origin)[TRUTH_SKIP:]
        ttft.append(np.array([r.ttft_s for r in records]))
        tpot.append(np.array([r.tpot_s for r in records]))
    ttft, tpot = np.concatenate(ttft), np.concatenate(tpot)
    ttft_p99, tpot_p99 = float(np.percentile(ttft, 99)), float(np.percentile(tpot, 99))
    worst = np.maximum(ttft / ttft_p99, tpot / tpot_p99)
    slos, shares = {}, {}
    for name, share in PROMISES:
        scale = float(np.quantile(worst, share))
        slo = Slo(ttft_s=ttft_p99 * scale, tpot_s=tpot_p99 * scale, attainment=REQUIRED)
        slos[name] = slo
        shares[name] = float(np.mean(np.maximum(ttft / slo.ttft_s, tpot / slo.tpot_s) <= 1.0))  # type: ignore[operator]
    return Truth(ttft_p99=ttft_p99, tpot_p99=tpot_p99, slos=slos, shares=shares)


def measure(rate: float, slo: Slo, seed: int, args: argparse.Namespace) -> tuple[dict[str, object], int]:
    """One measurement's figures and the requests it took."""
    if args.mode == "fixed":
        return latency_figures([_pass(rate, FIXED_REQUESTS, seed)], slo=slo, confidence=CONFIDENCE), FIXED_REQUESTS
    runs: list[LoadResult] = []
    while True:
        runs.append(_pass(rate, args.pass_requests, seed * 1000 + len(runs)))
        figures = latency_figures(runs, slo=slo, confidence=CONFIDENCE, looks=args.budget)
        if figures.get("slo_verdict") != "undecided" or len(runs) >= args.budget:
            return figures, args.pass_requests * len(runs)


def _covers(low: object, high: object, truth_value: float) -> bool:
    return (low is None or low <= truth_value) and (high is None or truth_value <= high)  # type: ignore[operator]


def _row(load: float, rate: float, name: str, t: Truth, args: argparse.Namespace) -> str:
    slo, share = t.slos[name], t.shares[name]
    runs = [measure(rate, slo, seed, args) for seed in range(args.seeds)]
    cover = np.mean([_covers(f["attainment_low"], f["attainment_high"], share) for f, _ in runs])
    met = [f for f, _ in runs if f["slo_verdict"] == "met"]
    missed = [f for f, _ in runs if f["slo_verdict"] == "missed"]
    kept = f"{sum(share >= REQUIRED for _ in met)}/{len(met)}"
    kept_misses = f"{sum(share < REQUIRED for _ in missed)}/{len(missed)}"
    decided = [n for f, n in runs if f["slo_verdict"] in ("met", "missed")]
    median = f"{statistics.median(decided):.0f}" if decided else "-"
    p99: Callable[[str, float], float] = lambda key, truth_value: float(np.mean(  # noqa: E731
        [_covers(f[f"{key}_p99_low_s"], f[f"{key}_p99_high_s"], truth_value) for f, _ in runs]))  # fmt: skip
    return (
        f"| {load:.0%} ({rate:.2f} req/s) | {name} ({share:.1%}) | {cover:.0%} | {kept} | {kept_misses} | {median} "
        f"({len(decided)}/{len(runs)} decided) | {p99('ttft', t.ttft_p99):.0%} | {p99('tpot', t.tpot_p99):.0%} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("fixed", "sequential"), default="sequential")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--pass-requests", type=int, default=160)
    parser.add_argument("--budget", type=int, default=6, help="passes at most (the benchmark's max_repeats)")
    parser.add_argument("--truth-runs", type=int, default=20, help="5000-request runs whose mean is the truth")
    args = parser.parse_args()
    cap = capacity()
    print(f"capacity {cap:.2f} req/s; {args.mode}; {args.seeds} seeds; 80% intervals; {REQUIRED:.0%} required")
    print("| load | promise (truth) | attainment covered | meets kept | misses kept | median requests per decided "
          "verdict | TTFT p99 covered | TPOT p99 covered |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for load in LOADS:
        rate = load * cap
        t = truth(rate, args.truth_runs)
        for name, _ in PROMISES:
            print(_row(load, rate, name, t, args), flush=True)


if __name__ == "__main__":
    main()
