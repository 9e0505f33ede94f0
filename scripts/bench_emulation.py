#!/usr/bin/env python3
"""Is a batch cap played by the client the same as the server's own flag? (``[search] emulate``, issue 51.)

For each cap and each seed it measures one open-loop scenario with an SLO twice, each run on a fresh server start:

* **flag**: the server started with the cap itself (SGLang's ``--max-running-requests C``, llama-server's
  ``-np C``), no client cap;
* **emulated**: the server started at the largest cap, the client holding at most ``C`` requests in flight
  (the scenario's ``max_concurrency``), as a study's trial plays it.

Per cap and way it prints SLO attainment, TTFT p99 and TPOT p99: the mean over the seeds and their run-to-run
range (min-max over the seeds: each a fresh start, its own arrivals and the server's own noise), and whether the
emulated mean lies within the flag's range. The seed sets the benchmark's arrivals and the simulator's noise.

On the simulator (``--server sim``, default) the scenario is studies/slo-chat.toml's chat-4rps on its config that
keeps the promise (DFLASH, block 8), at ``--time-scale`` (rates multiplied and limits divided by it). On
llama-server (``--server llama-server --binary PATH --gguf PATH``) it is a short chat at a rate its slots cannot
all keep up with, ``-c`` fixed while ``-np`` changes (so each slot's share of the context changes with the flag,
and not with the emulation).

    .venv/bin/python scripts/bench_emulation.py [--caps 16,32,48,64] [--seeds 3] [--time-scale 2]
    .venv/bin/python scripts/bench_emulation.py --server llama-server --binary .../llama-server --gguf ...gguf
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.bench import HttpBenchmark  # noqa: E402
from tuner.config import BenchmarkSection, Scenario, Slo  # noqa: E402
from tuner.dialects import LlamaServerDialect  # noqa: E402
from tuner.endpoint import Endpoint  # noqa: E402
from tuner.sim.testing import SimProcess, free_port, spawn_sim  # noqa: E402

FIGURES = ("attainment", "ttft_p99_s", "tpot_p99_s")

#: studies/slo-chat.toml's server on its config that keeps the promise (DFLASH, block 8).
SIM_ARGS = [
    "--model-path", "/models/Kimi-K2.6", "--host", "127.0.0.1", "--tp-size", "8", "--mem-fraction-static", "0.85",
    "--context-length", "32768", "--page-size", "1", "--num-continuous-decode-steps", "8",
    "--attention-backend", "triton", "--trust-remote-code", "--grammar-backend", "none",
    "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/models/Kimi-K2.6-DFlash",
    "--speculative-dflash-block-size", "8", "--speculative-draft-window-size", "2048", "--enable-metrics",
    "--sim-load-time", "0.1",
]  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Setup:
    """How to start the server at a cap, and the scenario both ways measure."""

    start: Callable[[int, int, Path], SimProcess]
    """(cap, seed, log dir) -> a serving server."""
    scenario: Scenario
    largest: int
    dialect: object | None = None


def _sim_setup(args: argparse.Namespace) -> Setup:
    k = args.time_scale

    def start(cap: int, seed: int, log_dir: Path) -> SimProcess:
        extra = ["--max-running-requests", str(cap), "--sim-time-scale", str(k), "--sim-seed", str(seed)]
        sim = spawn_sim([*SIM_ARGS, *extra], log_dir=log_dir)
        sim.wait_ready(timeout=60)
        return sim

    scenario = Scenario(
        name="chat-4rps", rate=4.0 * k, prompt_tokens=512, output_tokens=256, requests=args.requests,
        concurrency=args.requests, slo=Slo(ttft_s=3.0 / k, tpot_s=0.03 / k, attainment=0.99),
    )  # fmt: skip
    return Setup(start=start, scenario=scenario, largest=args.largest or 128)


def _llama_setup(args: argparse.Namespace) -> Setup:
    import subprocess

    def start(cap: int, seed: int, log_dir: Path) -> SimProcess:
        port = free_port()
        argv = [
            args.binary, "-m", args.gguf, "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-tb", "1",
            "-c", str(args.ctx), "-np", str(cap), "--metrics", "--seed", str(seed),
        ]  # fmt: skip
        log_path = log_dir / f"llama-server-{port}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        server = SimProcess(proc=proc, port=port, log_path=log_path)
        server.wait_log("llama_server: model loaded", timeout=120)
        return server

    scenario = Scenario(
        name="chat", rate=args.rate, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
        requests=args.requests, concurrency=args.requests,
        slo=Slo(ttft_s=args.ttft, tpot_s=args.tpot, attainment=0.9),
    )  # fmt: skip
    return Setup(start=start, scenario=scenario, largest=args.largest or 8, dialect=LlamaServerDialect())


def _measure(setup: Setup, *, cap: int, seed: int, emulated: bool, log_dir: Path) -> dict[str, float]:
    # As a trial plays it (tuner.study._emulate.capped): the cap is the open loop's max_concurrency and concurrency.
    scenario = replace(setup.scenario, max_concurrency=cap, concurrency=cap) if emulated else setup.scenario
    section = BenchmarkSection(
        scenarios=(scenario,), warmup_requests=2, repeats=1, request_timeout_s=300.0, flush_cache=False, seed=seed
    )
    server = setup.start(setup.largest if emulated else cap, seed, log_dir)
    try:
        kwargs = {"dialect": setup.dialect} if setup.dialect is not None else {}
        result = HttpBenchmark(endpoint=Endpoint(base_url=server.url), config=section, **kwargs).run_scenario(scenario)
    finally:
        server.kill()
    return {f: float(getattr(result, f) or 0.0) for f in FIGURES}


def _row(cap: int, way: str, runs: Sequence[dict[str, float]], flag: Sequence[dict[str, float]]) -> str:
    cells = [str(cap), way]
    for f in FIGURES:
        values = [r[f] for r in runs]
        mean, low, high = statistics.fmean(values), min(values), max(values)
        ref = [r[f] for r in flag]
        inside = "" if runs is flag else (" ✓" if min(ref) <= mean <= max(ref) else " ✗")
        scale = 100.0 if f == "attainment" else 1000.0
        unit = "%" if f == "attainment" else " ms"
        cells.append(f"{mean * scale:.4g}{unit} [{low * scale:.4g}, {high * scale:.4g}]{inside}")
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["sim", "llama-server"], default="sim")
    parser.add_argument("--caps", default="16,32,48,64")
    parser.add_argument("--largest", type=int, default=None, help="the cap the emulated runs' server starts at")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=160)
    parser.add_argument("--time-scale", type=float, default=2.0, help="sim: the simulator's time scale")
    parser.add_argument("--binary", help="llama-server: its binary")
    parser.add_argument("--gguf", help="llama-server: the model")
    parser.add_argument("--ctx", type=int, default=4096, help="llama-server: -c (split between the -np slots)")
    parser.add_argument("--rate", type=float, default=2.0, help="llama-server: requests/s")
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--ttft", type=float, default=2.0, help="llama-server: the SLO's TTFT limit (s)")
    parser.add_argument("--tpot", type=float, default=0.1, help="llama-server: the SLO's TPOT limit (s)")
    args = parser.parse_args()
    setup = _sim_setup(args) if args.server == "sim" else _llama_setup(args)
    caps = [int(c) for c in args.caps.split(",")]
    print(f"{args.server}: {setup.scenario.name} at {setup.scenario.rate:g} req/s, {args.requests} requests, "
          f"SLO {setup.scenario.slo.describe() if setup.scenario.slo else '-'}; emulated on a server at "
          f"{setup.largest}; {args.seeds} seeds, each run a fresh start", flush=True)  # fmt: skip
    print("| cap | way | attainment [range] | TTFT p99 [range] | TPOT p99 [range] |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for cap in caps:
            ways = {}
            for emulated in (False, True):
                ways[emulated] = [
                    _measure(setup, cap=cap, seed=seed, emulated=emulated, log_dir=Path(tmp))
                    for seed in range(args.seeds)
                ]
            print(_row(cap, "flag", ways[False], ways[False]), flush=True)
            print(_row(cap, "emulated", ways[True], ways[False]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
