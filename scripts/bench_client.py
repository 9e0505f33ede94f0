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

Side by side (``--side-by-side``): the same workload (one token per SSE event, ``--rate`` tok/s per stream,
``--tokens``-token requests, ``--rounds`` requests per stream) through tune's benchmark (each ``--http-client``
value) and through a plain aiohttp closed-loop client of the kind SGLang's ``bench_serving`` is, in the same
run, each client run in its own process; the simulator is pinned to CPU 0 and the client to CPU 1 (unless
``--no-pin``); medians of ``--reps`` interleaved repetitions. Client CPU is counted over the measured window
(the event-loop thread of every client process).

    .venv/bin/python scripts/bench_client.py --side-by-side [--side-streams 16,64,256] [--reps 3]

``--parse`` measures only tune's per-stream parsing path (the httpx stream client: response iteration, SSE, JSON,
accounting) over an in-memory transport: CPU ms per 1,000 tokens, no server, no sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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

    def wait_ready(self, timeout: float = 60.0) -> None:
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
    """This process plus its finished children: client worker processes are reaped at the end of a scenario."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


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
        "client_processes": result.client_processes,
        "client_bound": result.client_bound,
        "client_cpu_cores_measured_window": result.client_cpu_cores,
        "start_delay_p99_ms": round((result.start_delay_p99_s or 0) * 1000, 1),
        "accept_length": result.accept_length,
    }


def _sse_chunks(tokens: int) -> list[bytes]:
    """An SGLang-shaped chat stream: one token per event, per-chunk usage (``continuous_usage_stats``)."""
    head = {"id": "0123456789abcdef", "object": "chat.completion.chunk", "created": 1700000000, "model": "m"}
    out = []
    for i in range(tokens):
        delta = {"role": None, "content": " word", "reasoning_content": None, "tool_calls": None}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, "matched_stop": None}
        usage = {"prompt_tokens": 64, "total_tokens": 65 + i, "completion_tokens": i + 1}
        out.append(b"data: " + json.dumps({**head, "choices": [choice], "usage": usage}).encode() + b"\n\n")
    end = {**head, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]}
    out.append(b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n")
    return out


def parse_cost(*, tokens: int = 256, requests: int = 60, rounds: int = 5) -> float:
    """CPU ms per 1,000 tokens of tune's per-stream path alone (the httpx stream client: httpx response iteration,
    SSE decoding, JSON, accounting) over an in-memory transport: no sockets, no server; best of ``rounds``."""
    from tuner.bench._httpx import HttpxStreamClient

    chunks = _sse_chunks(tokens)

    async def body() -> Any:
        for c in chunks:
            yield c

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    async def run() -> float:
        client = HttpxStreamClient(client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
        kw: dict[str, Any] = {"url": "http://x/v1/chat/completions", "headers": {}, "index": 0}
        best = float("inf")
        for r in range(rounds + 1):
            cpu0 = _cpu_self()
            for _ in range(requests):
                rec = await client.stream(b"{}", timeout_s=30.0, api="chat", **kw)
                assert rec.ok and rec.output_tokens == tokens, rec
            if r:  # the first round warms up
                best = min(best, (_cpu_self() - cpu0) * 1000 / (requests * tokens / 1000))
        await client.aclose()
        return best

    return asyncio.run(run())


# -- side by side: tune's benchmark and a plain aiohttp closed-loop client, same workload, same run ------------

SIDE_PROMPT = 64


def _pin(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


async def _aiohttp_client(url: str, streams: int, requests: int, tokens: int) -> dict[str, float]:
    """A closed-loop aiohttp client the way SGLang's bench_serving reads a stream: line by line, json.loads."""
    import aiohttp

    from tuner.bench import build_body, build_prompt
    from tuner.bench._load import thread_cpu_s

    bodies = [
        build_body(
            api="completions",
            model="default",
            prompt=build_prompt(tokens=SIDE_PROMPT, seed=0, scenario="ref", phase=phase, repeat=0, index=i),
            max_tokens=tokens,
        )
        for phase in ("warmup", "measure")
        for i in range(requests if phase == "measure" else streams)
    ]
    ttfts: list[float] = []
    spans: list[tuple[float, float, int]] = []

    async def one(session: aiohttp.ClientSession, body: bytes, record: bool) -> None:
        t0 = time.monotonic()
        first = None
        n = 0
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
            async for line in resp.content:
                line = line.strip()
                if not line:
                    continue
                chunk = line.decode("utf-8").removeprefix("data: ")
                if chunk == "[DONE]":
                    continue
                data = json.loads(chunk)
                if data["choices"] and data["choices"][0].get("text"):
                    n += 1
                    if first is None:
                        first = time.monotonic()
        if record:
            ttfts.append((first or t0) - t0)
            spans.append((t0, time.monotonic(), n))

    async def run(queue: list[bytes], record: bool) -> None:
        async def worker() -> None:
            while queue:
                await one(session, queue.pop(), record)

        await asyncio.gather(*(worker() for _ in range(streams)))

    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        await run(list(reversed(bodies[:streams])), False)
        cpu0 = thread_cpu_s()
        await run(list(reversed(bodies[streams:])), True)
        cpu = thread_cpu_s() - cpu0
    window = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    out = sum(n for _, _, n in spans)
    ttfts.sort()
    return {"cpu_s": cpu, "window_s": window, "tokens": out, "ttft_p99_s": ttfts[int(0.99 * (len(ttfts) - 1))]}


def _tune_client(
    url: str, streams: int, requests: int, tokens: int, processes: int | str, library: str
) -> dict[str, float]:
    scenario = Scenario(
        name="side", concurrency=streams, prompt_tokens=SIDE_PROMPT, output_tokens=tokens, requests=requests
    )
    section = BenchmarkSection(
        scenarios=(scenario,),
        warmup_requests=streams,
        repeats=1,
        flush_cache=False,
        api="completions",
        client_processes=processes,
        http_client=library,
    )
    r = HttpBenchmark(endpoint=Endpoint(base_url=url, model="default"), config=section).run_scenario(scenario)
    window = r.output_tokens / r.output_tok_s
    return {
        "cpu_s": (r.client_cpu_cores or 0.0) * window,
        "window_s": window,
        "tokens": r.output_tokens,
        "ttft_p99_s": r.ttft_p99_s or 0.0,
        "processes": r.client_processes or 1,
        "client_bound": float(r.client_bound),
    }


def client_run(args: argparse.Namespace) -> int:
    """One client run in this (child) process, pinned as asked; prints one JSON line."""
    _pin(args.cpu)
    url = args.url.rstrip("/")
    if args.client_run == "aiohttp":
        row = asyncio.run(_aiohttp_client(url + "/v1/completions", args.streams, args.requests, args.tokens))
    else:
        procs = args.client_processes if args.client_processes == "auto" else int(args.client_processes)
        library = args.client_run.removeprefix("tune-")
        row = _tune_client(url, args.streams, args.requests, args.tokens, procs, library)
    print(json.dumps(row))
    return 0


def _child(kind: str, url: str, streams: int, args: argparse.Namespace, cpu: int | None) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--client-run", kind, "--url", url, "--streams", str(streams)]
    cmd += ["--requests", str(streams * args.rounds), "--tokens", str(args.tokens)]
    cmd += ["--client-processes", str(args.client_processes)]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} client failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _summary(
    streams: int, runs: dict[str, list[dict[str, float]]], tune: str, *, ideal: float, pinned: bool
) -> dict[str, object]:
    import statistics

    def med(kind: str, f: Callable[[dict[str, float]], float]) -> float:
        return statistics.median(f(r) for r in runs[kind])

    def ms_per_1k(r: dict[str, float]) -> float:
        return r["cpu_s"] * 1000 / (r["tokens"] / 1000)

    def cores(r: dict[str, float]) -> float:
        return r["cpu_s"] / r["window_s"]

    def of_ideal(r: dict[str, float]) -> float:
        return r["tokens"] / r["window_s"] / ideal

    return {
        "streams": streams,
        "tune_http_client": tune.removeprefix("tune-"),
        "aiohttp_ms_per_1k": med("aiohttp", ms_per_1k),
        "tune_ms_per_1k": med(tune, ms_per_1k),
        "tune_cores": med(tune, cores),
        "aiohttp_cores": med("aiohttp", cores),
        "tune_ideal": med(tune, of_ideal),
        "aiohttp_ideal": med("aiohttp", of_ideal),
        "tune_ttft_p99_s": med(tune, lambda r: r["ttft_p99_s"]),
        "aiohttp_ttft_p99_s": med("aiohttp", lambda r: r["ttft_p99_s"]),
        "tune_processes": med(tune, lambda r: r["processes"]),
        "tune_client_bound": sum(int(r["client_bound"]) for r in runs[tune]),
        "pinned": pinned,
    }


def side_by_side(args: argparse.Namespace) -> list[dict[str, object]]:
    """Per stream count: the sim paced at ``rate`` tok/s per stream, then interleaved client repetitions."""
    pin = not args.no_pin and len(os.sched_getaffinity(0)) >= 2
    server_cpu, client_cpu = (0, 1) if pin else (None, None)
    cfg = ServerConfig.from_argv([], {})
    tunes = [f"tune-{lib}" for lib in args.http_client.split(",")]
    rows = []
    for streams in args.side_streams:
        base = decode_tok_s(cfg, concurrency=streams, context_tokens=SIDE_PROMPT + args.tokens // 2)
        sim_argv = ["--sim-noise", "0", "--sim-time-scale", f"{args.rate / base:.6f}", "--max-running-requests", "512"]
        kinds = ["aiohttp", *tunes]
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
        with SimProcess(sim_argv) as sim:
            if server_cpu is not None:
                os.sched_setaffinity(sim.proc.pid, {server_cpu})
            sim.wait_ready()
            for rep in range(args.reps):
                for kind in kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]:  # rotate the order
                    runs[kind].append(_child(kind, sim.base_url, streams, args, client_cpu))
        rows.extend(_summary(streams, runs, t, ideal=streams * args.rate, pinned=pin) for t in tunes)
    return rows


def print_side_by_side(rows: list[dict[str, object]], args: argparse.Namespace) -> None:
    pinned = "server on CPU 0, client on CPU 1" if rows and rows[0]["pinned"] else "not pinned"
    print(
        f"one token per SSE event, {args.rate:.0f} tok/s per stream, {args.tokens}-token requests, "
        f"{args.rounds} request(s) per stream, medians of {args.reps} interleaved repetitions; {pinned}; "
        f"tune client_processes = {args.client_processes}"
    )
    print(
        "| streams | tune http_client | aiohttp CPU ms / 1k tok | tune CPU ms / 1k tok | tune / aiohttp "
        "| tune core use | tune % of ideal (aiohttp) | TTFT p99 tune / aiohttp | tune processes | client_bound runs |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = {k: float(v) for k, v in r.items() if isinstance(v, int | float)}
        a, t = f["aiohttp_ms_per_1k"], f["tune_ms_per_1k"]
        print(
            f"| {r['streams']} | {r['tune_http_client']} | {a:.1f} | {t:.1f} | {t / a:.2f}x | {f['tune_cores']:.2f} "
            f"| {f['tune_ideal']:.0%} ({f['aiohttp_ideal']:.0%}) "
            f"| {f['tune_ttft_p99_s'] * 1000:.0f} / {f['aiohttp_ttft_p99_s'] * 1000:.0f} ms "
            f"| {f['tune_processes']:.0f} | {r['tune_client_bound']}/{args.reps} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--rate", type=float, default=200.0, help="target tok/s per stream")
    ap.add_argument("--seconds", type=float, default=6.0, help="modelled duration of one request")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    ap.add_argument("--config", choices=[*CONFIGS, "all"], default="all")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--parse", action="store_true", help="only tune's per-stream parsing path, in memory (CPU ms / 1k tokens)"
    )
    ap.add_argument("--side-by-side", action="store_true", help="tune vs a plain aiohttp client, same run")
    ap.add_argument("--side-streams", type=lambda v: [int(x) for x in v.split(",")], default=[16, 64, 256])
    ap.add_argument("--tokens", type=int, default=256, help="side by side: output tokens per request")
    ap.add_argument("--rounds", type=int, default=2, help="side by side: measured requests per stream")
    ap.add_argument("--reps", type=int, default=3, help="side by side: interleaved repetitions")
    ap.add_argument("--client-processes", default="auto", help='side by side: tune\'s client_processes ("auto" or N)')
    ap.add_argument("--no-pin", action="store_true", help="side by side: do not pin server and client to a core each")
    ap.add_argument(
        "--http-client", default="httpx,aiohttp", help="side by side: tune's http_client value(s), comma-separated"
    )
    ap.add_argument("--client-run", choices=["tune-httpx", "tune-aiohttp", "aiohttp"], help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client_run:
        return client_run(args)
    if args.side_by_side:
        rows = side_by_side(args)
        if args.json:
            print(json.dumps(rows, indent=2))
        print_side_by_side(rows, args)
        return 0
    if args.parse:
        print(f"httpx stream client, in-memory transport: {parse_cost():.1f} CPU ms / 1k tokens (best of 5)")
        return 0
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
