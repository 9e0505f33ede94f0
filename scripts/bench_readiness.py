"""How quickly the loop notices a ready server, and a dead one.

Against the simulated server run by the real process manager:

1. **ready -> noticed**: a watcher tails the server log every millisecond for "The server is fired up and ready
   to roll!"; the overhead is when ``wait_ready`` returns minus when that line appeared (it includes the
   ``/health`` probe and the real generation request that readiness requires).
2. **dies while loading -> failure raised**: SIGKILL at a random point of the weight load; latency from the kill
   to ``StartFailed``.
3. **dies under load -> failure raised**: ``--sim-crash-after`` kills the server mid-benchmark; latency from the
   process's exit (a watcher polls ``/proc`` every millisecond) to ``DiedUnderLoad``.

    .venv/bin/python scripts/bench_readiness.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from tuner.bench import HttpBenchmark
from tuner.config import BenchmarkSection, ReadinessSection, Scenario
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad, StartFailed
from tuner.sim.testing import free_port
from tuner.spec import LaunchSpec
from tuner.target.hosts import LocalHost
from tuner.target.readiness import wait_ready
from tuner.target.services import ProcessService

MARKER = b"The server is fired up and ready to roll!"


def sim(port: int, *extra: str, load: float) -> LaunchSpec:
    argv = (
        sys.executable, "-u", "-m", "tuner.sim", "--host", "127.0.0.1", "--port", str(port),
        "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12",
        "--speculative-dflash-block-size", "8", "--speculative-dflash-draft-window-size", "2048",
        "--sim-load-time", str(load), *extra,
    )  # fmt: skip
    return LaunchSpec(argv=argv, env={"SGLANG_DDTREE_MAX_TOPK": "6"})


def watch(predicate, stop: threading.Event) -> list[float]:  # type: ignore[no-untyped-def]
    """Record the first time predicate() holds, polling every millisecond in a thread."""
    seen: list[float] = []

    def loop() -> None:
        while not stop.is_set() and not seen:
            if predicate():
                seen.append(time.monotonic())
            time.sleep(0.001)

    threading.Thread(target=loop, daemon=True).start()
    return seen


def ready_overhead(tmp: Path, poll: float) -> float:
    port = free_port()
    svc = ProcessService(host=LocalHost(), base=sim(port, load=0.5), log_dir=str(tmp / f"r{port}"), stop_grace_s=5)
    try:
        restarted = svc.restart(label="ready")
        log = tmp / f"r{port}" / "ready.log"
        stop = threading.Event()
        seen = watch(lambda: log.exists() and MARKER in log.read_bytes(), stop)
        cfg = ReadinessSection(timeout_s=30, poll_interval_s=poll)
        wait_ready(service=svc, restarted=restarted, endpoint=Endpoint(base_url=f"http://127.0.0.1:{port}"), config=cfg)
        noticed = time.monotonic()
        stop.set()
        return noticed - seen[0]
    finally:
        svc.stop()


def crash_while_loading(tmp: Path, poll: float) -> float:
    port = free_port()
    svc = ProcessService(host=LocalHost(), base=sim(port, load=3.0), log_dir=str(tmp / f"c{port}"), stop_grace_s=5)
    try:
        restarted = svc.restart(label="crash")
        cfg = ReadinessSection(timeout_s=30, poll_interval_s=poll)
        delay = random.uniform(0.3, 2.5)
        killed: list[float] = []

        def kill() -> None:
            time.sleep(delay)
            os.kill(restarted.new.pid, signal.SIGKILL)
            killed.append(time.monotonic())

        threading.Thread(target=kill, daemon=True).start()
        try:
            wait_ready(
                service=svc, restarted=restarted, endpoint=Endpoint(base_url=f"http://127.0.0.1:{port}"), config=cfg
            )
        except StartFailed:
            return time.monotonic() - killed[0]
        raise AssertionError("the kill went unnoticed")
    finally:
        svc.stop()


def crash_under_load(tmp: Path) -> float:
    port = free_port()
    spec = sim(port, "--sim-crash-after", "1.5", load=0.3)
    svc = ProcessService(host=LocalHost(), base=spec, log_dir=str(tmp / f"l{port}"), stop_grace_s=5)
    try:
        restarted = svc.restart(label="load")
        endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}")
        ready = wait_ready(
            service=svc,
            restarted=restarted,
            endpoint=endpoint,
            config=ReadinessSection(timeout_s=30, poll_interval_s=0.05),
        )
        stop = threading.Event()
        died = watch(lambda: not svc.is_alive(restarted.new), stop)
        bench = HttpBenchmark(
            endpoint=ready.endpoint or endpoint,
            config=BenchmarkSection(scenarios=(), warmup_requests=0, repeats=1, request_timeout_s=60),
        )
        scenario = Scenario(name="long", concurrency=8, prompt_tokens=64, output_tokens=2000, requests=64)
        try:
            bench.run_scenario(scenario)
        except DiedUnderLoad:
            raised = time.monotonic()
            deadline = time.monotonic() + 5
            while not died and time.monotonic() < deadline:
                time.sleep(0.001)
            stop.set()
            return raised - died[0]
        finally:
            bench.close()
        raise AssertionError("the crash went unnoticed")
    finally:
        svc.stop()


def summary(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"| {name} | {statistics.median(ms):.0f} ms | {max(ms):.0f} ms | {len(ms)} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    random.seed(1)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for poll in (0.1, 1.0):
            rows.append(
                summary(f"ready -> noticed (poll {poll} s)", [ready_overhead(tmp, poll) for _ in range(args.runs)])
            )
            rows.append(
                summary(
                    f"dies while loading -> StartFailed (poll {poll} s)",
                    [crash_while_loading(tmp, poll) for _ in range(args.runs)],
                )
            )
        rows.append(summary("dies under load -> DiedUnderLoad", [crash_under_load(tmp) for _ in range(args.runs)]))
    print("| measurement | median | max | runs |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
