#!/usr/bin/env python3
"""Accuracy: does `tune`'s HTTP benchmark measure what the simulator is known to deliver?

For a few configurations and concurrencies, runs the simulator at its DEFAULT noise (2%) and compares the
measured per-stream decode pace with the noise-free ground truth ``tuner.sim.decode_tok_s`` (times the time
scale), and the measured acceptance length with ``tuner.sim.acceptance_length``. Pass: every pace within 2%.
Outputs are long (512 tokens) so a request's clamped last step (~accept/2 tokens short) stays under 0.5%.

    .venv/bin/python scripts/bench_accuracy.py [--scale 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_client import SimProcess  # noqa: E402

from tuner.bench import HttpBenchmark  # noqa: E402
from tuner.config import BenchmarkSection, Scenario  # noqa: E402
from tuner.endpoint import Endpoint  # noqa: E402
from tuner.sim import ServerConfig, acceptance_length, decode_tok_s  # noqa: E402

CASES: list[tuple[str, list[str], dict[str, str], tuple[int, ...]]] = [
    (
        "ddtree b12 k6 w2048",
        [
            "--speculative-algorithm",
            "DDTREE",
            "--speculative-ddtree-budget",
            "12",
            "--speculative-dflash-block-size",
            "8",
            "--speculative-dflash-draft-window-size",
            "2048",
        ],
        {"SGLANG_DDTREE_MAX_TOPK": "6"},
        (1, 8, 32),
    ),
    (
        "ddtree b24 k4 w1024",
        [
            "--speculative-algorithm",
            "DDTREE",
            "--speculative-ddtree-budget",
            "24",
            "--speculative-dflash-block-size",
            "12",
            "--speculative-dflash-draft-window-size",
            "1024",
        ],
        {"SGLANG_DDTREE_MAX_TOPK": "4"},
        (1, 16),
    ),
    (
        "dflash block 16",
        ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "16"],
        {},
        (1, 8),
    ),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=4.0, help="--sim-time-scale (all durations divided by it)")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--output", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-requests", type=int, default=16, help="requests per repeat at least")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for name, argv, env, concurrencies in CASES:
        cfg = ServerConfig.from_argv(argv, env)
        ctx = args.prompt + args.output // 2
        with SimProcess([*argv, "--sim-time-scale", str(args.scale), "--enable-metrics"], env=env) as sim:
            sim.wait_ready()
            for c in concurrencies:
                sc = Scenario(
                    name=f"c{c}",
                    concurrency=c,
                    prompt_tokens=args.prompt,
                    output_tokens=args.output,
                    requests=c,
                )
                section = BenchmarkSection(scenarios=(sc,), warmup_requests=1, repeats=args.repeats)
                result = HttpBenchmark(endpoint=Endpoint(base_url=sim.base_url), config=section).run_scenario(sc)
                truth = decode_tok_s(cfg, concurrency=c, context_tokens=ctx, workload="prose") * args.scale
                accept = acceptance_length(cfg, context_tokens=ctx, workload="prose")
                rows.append(
                    {
                        "config": name,
                        "concurrency": c,
                        "truth_per_stream_tok_s": round(truth, 2),
                        "measured_per_stream_tok_s": round(result.per_stream_tok_s, 2),
                        "error_pct": round(100 * (result.per_stream_tok_s / truth - 1), 2),
                        "aggregate_tok_s": round(result.output_tok_s, 1),
                        "truth_accept": round(accept, 3),
                        "measured_accept": None if result.accept_length is None else round(result.accept_length, 3),
                        "accept_method": result.accept_method,
                    }
                )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'config':22} {'c':>3} {'truth':>9} {'measured':>9} {'err%':>6} {'accept':>7} {'meas.':>7}")
        for r in rows:
            print(
                f"{r['config']:22} {r['concurrency']:>3} {r['truth_per_stream_tok_s']:>9} "
                f"{r['measured_per_stream_tok_s']:>9} {r['error_pct']:>6} {r['truth_accept']:>7} "
                f"{r['measured_accept']!s:>7}"
            )
    worst = max(abs(float(r["error_pct"])) for r in rows)  # type: ignore[arg-type]
    ok = worst <= 2.0
    print(f"VERDICT: worst per-stream error {worst:.2f}% -> {'within 2%' if ok else 'OUT OF TOLERANCE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
