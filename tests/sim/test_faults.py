"""Under load: a full KV pool (slower, never a crash), a crash injected under load, and the other injected faults."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tuner.sim import ServerConfig
from tuner.sim._model import kv_pool_tokens
from tuner.sim.testing import SimProcess, sse_events

DFLASH = ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"]
PROMPT = " ".join(["w"] * 200)


def _burst(sim: SimProcess, *, streams: int, max_tokens: int) -> tuple[list[str], float]:
    """``streams`` requests sent together; each one's outcome ("complete" with all its tokens, or "cut")."""
    results: list[str] = []
    together = threading.Barrier(streams)

    def one() -> None:
        together.wait(30)
        try:
            with httpx.Client(base_url=sim.url, timeout=60) as http:
                events = sse_events(http, "/v1/completions", {"prompt": PROMPT, "max_tokens": max_tokens})
            text = "".join(json.loads(d)["choices"][0]["text"] for _, d in events[:-1])
            results.append("complete" if len(text.split()) == max_tokens else "short")
        except (httpx.HTTPError, AssertionError):
            results.append("cut")

    threads = [threading.Thread(target=one) for _ in range(streams)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return results, time.monotonic() - t0


def test_a_full_kv_pool_retracts_and_slows_down_but_completes(start_sim) -> None:
    # At 0.70 the pool holds ~15k tokens: 12 requests growing to 2,000 tokens each do not fit together.
    common = [*DFLASH, "--max-running-requests", "32", "--sim-time-scale", "8", "--enable-metrics"]
    tight, roomy = [*common, "--mem-fraction-static", "0.70"], [*common, "--mem-fraction-static", "0.85"]
    assert 12 * 2000 > kv_pool_tokens(ServerConfig.from_argv(tight, {})) > 2000
    times, steps = {}, {}
    for name, flags in (("roomy", roomy), ("tight", tight)):
        sim = start_sim(*flags)
        results, times[name] = _burst(sim, streams=12, max_tokens=1800)
        assert results == ["complete"] * 12, (name, results)
        assert sim.proc.poll() is None, "a full pool must not take the server down"
        retractions = [ln for ln in sim.log().splitlines() if "KV cache pool is full. Retract requests." in ln]
        assert bool(retractions) == (name == "tight"), sim.log()
        metrics = httpx.get(f"{sim.url}/metrics").text
        counted = [ln for ln in metrics.splitlines() if ln.startswith("sglang:num_retracted_requests_total{")]
        assert (float(counted[0].split()[-1]) > 0) == (name == "tight")
        # Slower in the server's own steps (SGLang logs a "Decode batch" line every 40 of them), not in wall
        # time: a loaded test machine stretches both runs alike and hides the difference.
        steps[name] = sum("Decode batch" in ln for ln in sim.log().splitlines())
    assert "#retracted_reqs: " in retractions[0] and "#new_token_ratio: " in retractions[0]
    assert steps["tight"] > 1.3 * steps["roomy"], (steps, times)


def test_crash_under_load_cuts_streams(start_sim) -> None:
    # Fault injection: the scheduler dies once a batch holds more than 1,500 tokens of context.
    sim = start_sim(*DFLASH, "--sim-crash-above-batch-tokens", "1500", "--sim-time-scale", "4")
    results, _ = _burst(sim, streams=12, max_tokens=400)
    assert sim.wait_exit(10) == 1
    assert results and all(r == "cut" for r in results)
    log = sim.log()
    assert "Traceback (most recent call last)" in log
    assert "CUDA error: an illegal memory access was encountered" in log


def test_health_before_ready(start_sim) -> None:
    sim = start_sim(*DFLASH, "--sim-health-before-ready", "1.5", ready=False)
    sim.wait_log("Uvicorn running on")
    with httpx.Client(base_url=sim.url, timeout=5) as http:
        deadline = time.monotonic() + 5
        while http.get("/health").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
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


def test_a_stall_at_the_nth_arrival_and_every_mth_after(start_sim, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--sim-stall-after 2 --sim-stall-every 3``: the engine stops at the 2nd, 5th and 8th arrivals (a benchmark's
    passes of 3 requests each stall at the same one), and the requests that arrive then wait for it."""
    log = tmp_path / "requests.jsonl"
    flags = ["--sim-time-scale", "4", "--sim-request-log", str(log)]
    sim = start_sim(*DFLASH, *flags, "--sim-stall-after", "2", "--sim-stall-every", "3", "--sim-stall-s", "4")
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        for _ in range(8):  # one at a time: the log's order is the arrivals'
            assert http.post("/v1/completions", json={"prompt": "a b", "max_tokens": 2}).status_code == 200
    ttft = [row["first_token"] - row["arrival"] for row in map(json.loads, log.read_text().splitlines())]
    assert len(ttft) == 8
    stalled = [ttft[i] for i in (1, 4, 7)]
    others = [t for i, t in enumerate(ttft) if i not in (1, 4, 7)]
    assert min(stalled) >= 1.0 - 0.01 and max(others) < min(stalled), ttft  # 4 modelled seconds at time scale 4


@pytest.mark.parametrize("flags", [["--sim-stall-every", "3"], ["--sim-stall-after", "2", "--sim-stall-every", "0"]])
def test_a_stall_every_needs_its_first_arrival(flags: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        ServerConfig.from_argv([*DFLASH, *flags], {})
    assert info.value.code == 2
