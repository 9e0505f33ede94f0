"""Fault injection and dying under load, through a real simulator process."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tuner.sim import ServerConfig, max_concurrent_requests
from tuner.sim.testing import sse_events

DFLASH = ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"]


def test_dies_under_load_cuts_streams(start_sim) -> None:
    # Starts fine (no startup failure) but 12 long requests exceed the KV pool at 0.70.
    args = [
        *DFLASH,
        "--mem-fraction-static",
        "0.70",
        "--max-running-requests",
        "32",
        # Slow enough that a request outlasts the skew between the threads' starts on a loaded machine (at 20x
        # the first streams could finish before the last ones arrived, and never see the OOM).
        "--sim-time-scale",
        "2",
    ]
    cfg = ServerConfig.from_argv(args, {})
    assert (
        max_concurrent_requests(cfg, context_tokens=2000)
        < 12
        <= max_concurrent_requests(cfg, context_tokens=200)
    )
    sim = start_sim(*args)
    prompt = " ".join(["w"] * 200)
    results: list[str] = []
    together = threading.Barrier(12)

    def one() -> None:
        together.wait(30)
        try:
            with httpx.Client(base_url=sim.url, timeout=30) as http:
                sse_events(http, "/v1/completions", {"prompt": prompt, "max_tokens": 1800})
            results.append("complete")
        except (httpx.HTTPError, AssertionError):
            results.append("cut")

    threads = [threading.Thread(target=one) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sim.wait_exit(10) == 1
    assert results and all(r == "cut" for r in results)
    log = sim.log()
    assert "Traceback (most recent call last)" in log
    assert "torch.OutOfMemoryError: CUDA out of memory" in log


def test_health_before_ready(start_sim) -> None:
    sim = start_sim(*DFLASH, "--sim-health-before-ready", "1.5", ready=False)
    sim.wait_log("Capture cuda graph end")
    with httpx.Client(base_url=sim.url, timeout=5) as http:
        time.sleep(0.1)
        assert http.get("/health").status_code == 200
        assert http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code == 503
        assert http.get("/health_generate").status_code == 503
        sim.wait_ready()
        assert http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code == 200


def test_hang_accepts_but_never_answers(start_sim) -> None:
    sim = start_sim(*DFLASH, "--sim-hang")
    with pytest.raises(httpx.ReadTimeout), httpx.Client(base_url=sim.url, timeout=httpx.Timeout(0.5)) as http:
        http.get("/health")
    assert sim.proc.poll() is None


def test_malformed_chunks(start_sim) -> None:
    sim = start_sim(*DFLASH, "--sim-time-scale", "50", "--sim-malformed-chunks", "0.5")
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        events = sse_events(http, "/v1/completions", {"prompt": "a b", "max_tokens": 200})
    bad = 0
    for _, data in events[:-1]:
        try:
            json.loads(data)
        except json.JSONDecodeError:
            bad += 1
    assert 0.2 < bad / len(events) < 0.8


def test_crash_after(start_sim) -> None:
    sim = start_sim(*DFLASH, "--sim-crash-after", "0.5")
    ready = time.monotonic()
    assert sim.wait_exit(10) == 1
    assert 0.4 < time.monotonic() - ready < 3
    log = sim.log()
    assert "Traceback (most recent call last)" in log
    assert "CUDA error: an illegal memory access was encountered" in log
