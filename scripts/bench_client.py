#!/usr/bin/env python3
"""Client capacity: can `tune`'s HTTP benchmark drive 64 streams at full speed without being the bottleneck?

Starts the simulated server (no noise) with a time scale chosen so each of 64 streams is paced at ~200 tok/s,
runs :class:`tuner.bench.HttpBenchmark` against it, and reports, per configuration:

* client CPU (this process, all threads) in cores and in ms per 1,000 streamed tokens;
* aggregate output tok/s against the ideal (64 x the simulator's noise-free per-stream pace);
* the per-stream decode pace against the simulator's ground truth (``tuner.sim.decode_tok_s``);
* TTFT p50/p99 (a saturated client delays stream *starts*, not their pace: REFERENCE.md).

Two server configurations bracket the event rate: DDTREE (one SSE event per ~4.8 tokens) and no speculation
(one token per event, the worst case, 12,800 events/s). The verdict needs all three: client CPU < 0.7 core,
aggregate >= 95% of ideal, TTFT p99 small against a request's duration.

    .venv/bin/python scripts/bench_client.py [--streams 64] [--rate 200] [--seconds 6] [--repeats 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.bench import HttpBenchmark  # noqa: E402
from tuner.config import BenchmarkSection, Scenario  # noqa: E402
from tuner.endpoint import Endpoint  # noqa: E402
from tuner.sim import ServerConfig, decode_tok_s  # noqa: E402

CONFIGS = {
    "ddtree": [
        "--speculative-algorithm",
        "DDTREE",
        "--speculative-ddtree-budget",
        "12",
        "--speculative-dflash-block-size",
        "8",
        "--speculative-dflash-draft-window-size",
        "2048",
    ],
    "no-spec": [],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SimProcess:
    """A simulator subprocess in its own process group (killed as a group, never by name)."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, log: Path | None = None) -> None:
        self.port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "tuner.sim",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--sim-load-time",
            "0.3",
            *argv,
        ]
        self._log = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
        )
        self.base_url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0, trust_env=False) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"simulator exited with {self.proc.returncode}")
                try:
                    if c.get(self.base_url + "/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        raise TimeoutError("simulator not ready")

    def cpu_seconds(self) -> float:
        """User+system CPU of the simulator process (Linux /proc)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        if self._log is not subprocess.DEVNULL:
            self._log.close()  # type: ignore[union-attr]

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run_one(name: str, *, streams: int, rate: float, seconds: float, repeats: int, prompt: int) -> dict[str, object]:
    argv = CONFIGS[name]
    cfg = ServerConfig.from_argv(argv, {})
    context = prompt + int(rate * seconds) // 2
    base = decode_tok_s(cfg, concurrency=streams, context_tokens=context, workload="prose")
    scale = rate / base
    out_tokens = int(rate * seconds)
    scenario = Scenario(
        name=f"{name}-c{streams}",
        concurrency=streams,
        prompt_tokens=prompt,
        output_tokens=out_tokens,
        requests=streams,
    )
    section = BenchmarkSection(scenarios=(scenario,), warmup_requests=streams, repeats=repeats, flush_cache=False)
    sim_argv = [*argv, "--sim-noise", "0", "--sim-time-scale", f"{scale:.6f}"]
    with SimProcess(sim_argv) as sim:
        sim.wait_ready()
        bench = HttpBenchmark(endpoint=Endpoint(base_url=sim.base_url), config=section)
        bench.run_scenario(
            Scenario(name="prime", concurrency=4, prompt_tokens=prompt, output_tokens=8, requests=4)
        )  # import/JIT/resolve-model costs out of the measurement
        cpu0, sim0, t0 = _cpu_self(), sim.cpu_seconds(), time.perf_counter()
        result = bench.run_scenario(scenario)
        cpu1, sim1, t1 = _cpu_self(), sim.cpu_seconds(), time.perf_counter()
    wall = t1 - t0
    # Tokens streamed in the timed section: warm-up plus measured repeats.
    tokens = out_tokens * streams * (1 + repeats)
    truth = decode_tok_s(cfg, concurrency=streams, context_tokens=context, workload="prose") * scale
    ideal = truth * streams
    client_cores = (cpu1 - cpu0) / wall
    return {
        "config": name,
        "streams": streams,
        "time_scale": round(scale, 3),
        "ideal_per_stream_tok_s": round(truth, 1),
        "ideal_aggregate_tok_s": round(ideal, 0),
        "aggregate_tok_s": round(result.output_tok_s, 0),
        "aggregate_vs_ideal": round(result.output_tok_s / ideal, 4),
        "per_stream_tok_s": round(result.per_stream_tok_s, 1),
        "per_stream_vs_truth": round(result.per_stream_tok_s / truth, 4),
        "ttft_p50_ms": round((result.ttft_p50_s or 0) * 1000, 1),
        "ttft_p99_ms": round((result.ttft_p99_s or 0) * 1000, 1),
        "request_seconds": round(out_tokens / truth, 2),
        "client_cores": round(client_cores, 3),
        "client_ms_per_1k_tokens": round((cpu1 - cpu0) * 1000 / (tokens / 1000), 1),
        "sim_cores": round((sim1 - sim0) / wall, 3),
        "accept_length": result.accept_length,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--rate", type=float, default=200.0, help="target tok/s per stream")
    ap.add_argument("--seconds", type=float, default=6.0, help="modelled duration of one request")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    ap.add_argument("--config", choices=[*CONFIGS, "all"], default="all")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    names = list(CONFIGS) if args.config == "all" else [args.config]
    rows = [
        run_one(
            n,
            streams=args.streams,
            rate=args.rate,
            seconds=args.seconds,
            repeats=args.repeats,
            prompt=args.prompt,
        )
        for n in names
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"== {row['config']} ({row['streams']} streams)")
            for k, v in row.items():
                print(f"  {k:26} {v}")
    ok = all(
        float(r["client_cores"]) < 0.7  # type: ignore[arg-type]
        and float(r["aggregate_vs_ideal"]) >= 0.95  # type: ignore[arg-type]
        for r in rows
    )
    print("VERDICT:", "client is not the bottleneck" if ok else "CLIENT-BOUND or short of ideal")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
