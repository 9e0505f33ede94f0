#!/usr/bin/env python3
"""Benchmark the simulated server itself: can it pace many concurrent streams without being the bottleneck?

Starts ``python -m tuner.sim`` (noise off) with a config whose per-stream speed at the top concurrency is
time-scaled to ~200 tok/s, drives it with an aiohttp client running in a *separate process* (so client and
server CPU are measured apart), and prints, per concurrency: streamed tokens/s against the model's ideal, the
client's time-to-first-token p99, and the simulator's CPU seconds per 1000 streamed tokens (from
``/proc/PID/stat``).

Usage::

    .venv/bin/python scripts/bench_sim.py                      # concurrency 1 and 64
    .venv/bin/python scripts/bench_sim.py --concurrency 64 --requests-per-stream 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIM_ARGS = [
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-dflash-block-size",
    "8",
    "--speculative-dflash-draft-window-size",
    "2048",
    "--max-running-requests",
    "64",
    "--mem-fraction-static",
    "0.85",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5), counted after the comm field
    return ticks / os.sysconf("SC_CLK_TCK")


# --- client process --------------------------------------------------------------------------------------


async def _client_main(
    url: str, concurrency: int, requests: int, prompt_tokens: int, max_tokens: int
) -> dict:
    import aiohttp

    prompt = " ".join(["w"] * prompt_tokens)
    ttfts: list[float] = []
    rates: list[float] = []
    total_tokens = 0

    async def stream(session: aiohttp.ClientSession) -> None:
        nonlocal total_tokens
        for _ in range(requests):
            t0 = time.perf_counter()
            first = last = 0.0
            tokens = after_first = 0
            payload = {"prompt": prompt, "max_tokens": max_tokens, "stream": True}
            async with session.post(f"{url}/v1/completions", json=payload) as resp:
                resp.raise_for_status()
                async for raw in resp.content:
                    if not raw.startswith(b"data: {"):
                        continue
                    text = json.loads(raw[6:])["choices"][0]["text"]
                    n = text.count(" ")  # every filler token is " word"
                    if not n:
                        continue
                    now = time.perf_counter()
                    if not first:
                        first = now
                        ttfts.append(now - t0)
                    else:
                        after_first += n
                    last = now
                    tokens += n
            total_tokens += tokens
            if last > first:
                rates.append(after_first / (last - first))

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(stream(session) for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ttfts.sort()
    return {
        "tokens": total_tokens,
        "wall": wall,
        "stream_rate": sum(rates) / len(rates),
        "ttft_p99": ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))],
        "client_cpu": ru.ru_utime + ru.ru_stime,
    }


# --- driver ----------------------------------------------------------------------------------------------


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout: float = 30) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"simulator exited with {proc.returncode}")
        try:
            r = httpx.post(f"{url}/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=2)
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("simulator did not become ready")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", type=str, default="1,64", help="comma-separated list")
    parser.add_argument(
        "--target-tok-s", type=float, default=200.0, help="per-stream pace at top concurrency"
    )
    parser.add_argument("--requests-per-stream", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument(
        "--client", nargs=5, metavar=("URL", "C", "REQ", "PROMPT", "MAX"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.client:
        url, c, req, prompt, mx = args.client
        print(json.dumps(asyncio.run(_client_main(url, int(c), int(req), int(prompt), int(mx)))))
        return 0

    sys.path.insert(0, str(REPO))
    from tuner.sim import ServerConfig, decode_tok_s

    levels = [int(c) for c in args.concurrency.split(",")]
    cfg = ServerConfig.from_argv(SIM_ARGS, {})
    ctx = args.prompt_tokens + args.max_tokens // 2  # mean context over a request
    scale = args.target_tok_s / decode_tok_s(cfg, concurrency=max(levels), context_tokens=ctx, workload="prose")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "tuner.sim",
        "--port",
        str(port),
        *SIM_ARGS,
        "--sim-noise",
        "0",
        "--sim-load-time",
        "0.2",
        "--sim-time-scale",
        f"{scale:.4f}",
    ]
    print("simulator:", " ".join(cmd[1:]))
    sim = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    rows = []
    try:
        _wait_ready(sim, url)
        for c in levels:
            ideal = decode_tok_s(cfg, concurrency=c, context_tokens=ctx, workload="prose") * scale
            cpu0 = _cpu_seconds(sim.pid)
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--client",
                    url,
                    str(c),
                    str(args.requests_per_stream),
                    str(args.prompt_tokens),
                    str(args.max_tokens),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            sim_cpu = _cpu_seconds(sim.pid) - cpu0
            res = json.loads(out.stdout)
            rows.append((c, ideal, res, sim_cpu))
    finally:
        sim.terminate()
        sim.wait(10)

    header = (
        f"{'conc':>4} {'ideal/stream':>12} {'stream tok/s':>12} {'ratio':>6} {'agg tok/s':>10} "
        f"{'ideal agg':>10} {'agg ratio':>9} {'ttft p99':>8} {'sim ms/1k tok':>13} {'sim cores':>9} "
        f"{'client ms/1k':>12}"
    )
    print(
        f"time scale {scale:.3f} (model per-stream at c={max(levels)}: {args.target_tok_s / scale:.1f} tok/s)"
    )
    print(header)
    for c, ideal, res, sim_cpu in rows:
        agg = res["tokens"] / res["wall"]
        print(
            f"{c:>4} {ideal:>12.1f} {res['stream_rate']:>12.1f} {res['stream_rate'] / ideal:>6.3f} "
            f"{agg:>10.0f} "
            f"{ideal * c:>10.0f} {agg / (ideal * c):>9.3f} {res['ttft_p99']:>7.3f}s "
            f"{1000 * 1000 * sim_cpu / res['tokens']:>13.1f} {sim_cpu / res['wall']:>9.2f} "
            f"{1000 * 1000 * res['client_cpu'] / res['tokens']:>12.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
