#!/usr/bin/env python3
"""Does the workload matter? Acceptance length on HumanEval coding requests vs random words, on the simulator.

Starts the simulator with the seed's DDTree config (budget 12, top-k 6, block 8, window 2048), benchmarks the
same concurrency and output length with ``prompts = "humaneval"`` and ``prompts = "random"`` through `tune`'s
own HTTP benchmark, and prints each scenario's measured acceptance length (from the server's counters) and
tok/s next to the model's noise-free acceptance for that workload.

    .venv/bin/python scripts/bench_workloads.py [--scale 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.bench import HttpBenchmark  # noqa: E402
from tuner.config import BenchmarkSection, Scenario  # noqa: E402
from tuner.endpoint import Endpoint  # noqa: E402
from tuner.sim import ServerConfig, acceptance_length  # noqa: E402
from tuner.sim.testing import spawn_sim  # noqa: E402

DDTREE = [
    "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12",
    "--speculative-dflash-block-size", "8", "--speculative-dflash-draft-window-size", "2048",
]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=4.0, help="simulator time scale (default 4)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = {"SGLANG_DDTREE_MAX_TOPK": "6"}
    cfg = ServerConfig.from_argv(DDTREE, env)
    scenarios = [
        Scenario(name=kind, concurrency=4, prompt_tokens=300, output_tokens=256, requests=16, prompts=kind)
        for kind in ("humaneval", "random")
    ]
    section = BenchmarkSection(scenarios=tuple(scenarios), warmup_requests=2, repeats=3, request_timeout_s=120)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sim = spawn_sim(
            ["--host", "127.0.0.1", "--enable-metrics", "--sim-load-time", "0.3", "--sim-time-scale", str(args.scale),
             *DDTREE],
            log_dir=Path(tmp),
            env=env,
        )  # fmt: skip
        try:
            sim.wait_ready()
            bench = HttpBenchmark(endpoint=Endpoint(base_url=sim.url), config=section)
            for sc in scenarios:
                r = bench.run_scenario(sc)
                workload = "code" if sc.prompts == "humaneval" else "prose"
                rows.append({
                    "prompts": sc.prompts,
                    "measured_accept": r.accept_length,
                    "model_accept": acceptance_length(cfg, context_tokens=sc.prompt_tokens + 128, workload=workload),
                    "output_tok_s": r.output_tok_s / args.scale,
                    "prompt_tokens_mean": r.prompt_tokens,
                })  # fmt: skip
        finally:
            sim.kill()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(
                f"{row['prompts']:>10}: acceptance {row['measured_accept']:.2f} (model {row['model_accept']:.2f}), "
                f"{row['output_tok_s']:.1f} tok/s at concurrency 4 (unscaled), "
                f"mean prompt {row['prompt_tokens_mean']:.0f} tokens"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
