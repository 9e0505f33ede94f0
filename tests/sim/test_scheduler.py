"""The batch scheduler: admission, retraction on a full KV pool, aborts, and its noise-free closed loop."""

from __future__ import annotations

import dataclasses

import pytest

from tuner.config import Scenario
from tuner.sim import ServerConfig, acceptance_length, step_time_s
from tuner.sim._model import kv_pool_gb, kv_pool_tokens, request_memory_gb, verify_width
from tuner.sim._scheduler import (
    INIT_NEW_TOKEN_RATIO,
    PREFILL_S_PER_TOKEN,
    BatchScheduler,
    SchedRequest,
    simulate_open,
    simulate_scenario,
)
from tuner.sim.inprocess import model_scenario

TIGHT = ServerConfig(algorithm="DFLASH", block_size=8, draft_window=2048, mem_fraction_static=0.70)


def _accept(cfg: ServerConfig, workload: str = "prose"):  # type: ignore[no-untyped-def]
    return lambda bucket: acceptance_length(cfg, context_tokens=bucket * 32, workload=workload)


def test_admission_reserves_what_running_requests_may_still_generate() -> None:
    sched = BatchScheduler(TIGHT)
    # Each request: a 2,000-token prompt that may grow by 4,000: at ratio 0.7 it reserves 4,800 tokens' KV.
    for _ in range(8):
        sched.submit(SchedRequest(prompt_tokens=2000, max_tokens=4000))
    prefill = sched.admit()
    admitted = len(sched.running)
    reserve = request_memory_gb(TIGHT, context_tokens=2000 + round(INIT_NEW_TOKEN_RATIO * 4000))
    assert admitted == int(kv_pool_gb(TIGHT) / reserve) == 3
    assert 7 * request_memory_gb(TIGHT, context_tokens=2000) < kv_pool_gb(TIGHT)  # seven prompts alone would fit
    assert prefill == 2000 * admitted and len(sched.waiting) == 5


def test_a_full_pool_retracts_the_least_advanced_and_reestimates_the_ratio() -> None:
    sched = BatchScheduler(TIGHT)
    reqs = [SchedRequest(prompt_tokens=p, max_tokens=6000) for p in (5000, 5000, 4000)]
    for r in reqs:
        sched.running.append(r)
        r.needs_prefill = False
    reqs[0].generated, reqs[1].generated, reqs[2].generated = 3000, 2000, 2000  # 21,000 tokens: ~15,000 fit
    retraction = sched.make_room()
    assert retraction is not None and retraction.aborted is None
    # Fewest generated tokens first; between equals, the longer prompt.
    assert sched.running == [reqs[0], reqs[2]] and list(sched.waiting) == [reqs[1]]
    assert retraction.requests == 1 and retraction.tokens_gained == 7000
    # SGLang's estimate after a retraction: what the kept requests decoded, plus 20 steps each, per token asked.
    assert retraction.ratio_after == pytest.approx((3000 + 2000 + 2 * 20) / (2 * 6000 + 1))
    assert "KV cache pool is full. Retract requests. #retracted_reqs: 1" in retraction.log_lines()[-1]
    assert all(r.needs_prefill for r in sched.waiting)  # they re-run their prompt and output when readmitted


def test_a_request_that_alone_outgrows_the_pool_is_aborted() -> None:
    sched = BatchScheduler(TIGHT)
    huge = SchedRequest(prompt_tokens=2 * kv_pool_tokens(TIGHT), max_tokens=10)
    sched.running.append(huge)
    retraction = sched.make_room()
    assert retraction is not None and retraction.aborted is huge and not sched.running


def test_the_ratio_decays_per_step_and_resets_when_idle() -> None:
    sched = BatchScheduler(TIGHT)
    sched.submit(SchedRequest(prompt_tokens=10, max_tokens=50))
    sched.admit()
    assert sched.make_room() is None and sched.ratio < INIT_NEW_TOKEN_RATIO
    while sched.running:
        sched.advance(lambda r: 4.0)
    assert sched.idle and sched.ratio == INIT_NEW_TOKEN_RATIO


def test_a_crowded_pool_is_slower_not_broken() -> None:
    roomy = ServerConfig(algorithm="DFLASH", block_size=8, draft_window=2048, mem_fraction_static=0.85)
    runs = {
        cfg.mem_fraction_static: simulate_scenario(
            cfg, concurrency=12, requests=12, prompt_tokens=200, output_tokens=1800, accept=_accept(cfg)
        )
        for cfg in (TIGHT, roomy)
    }
    tight, easy = runs[0.70], runs[0.85]
    assert tight.failed is None and tight.generated == easy.generated == 12 * 1800
    assert tight.retractions and not easy.retractions
    assert tight.seconds > 1.3 * easy.seconds


@pytest.mark.parametrize(
    ("cfg", "scenario"),
    [
        (
            ServerConfig(algorithm="DDTREE", ddtree_budget=12, block_size=8, draft_window=2048),
            Scenario(name="c8", concurrency=8, prompt_tokens=512, output_tokens=64, requests=24),
        ),
        (
            ServerConfig(algorithm="DFLASH", block_size=12, max_running_requests=16),
            Scenario(name="c32", concurrency=32, prompt_tokens=1024, output_tokens=16, requests=32),
        ),
        (
            ServerConfig(algorithm="DDTREE", ddtree_budget=20, block_size=16, draft_window=2048),
            Scenario(name="c1", concurrency=1, prompt_tokens=512, output_tokens=32, requests=20, prompts="humaneval"),
        ),
    ],
)
def test_the_ground_truths_waves_are_the_schedulers_run(cfg: ServerConfig, scenario: Scenario) -> None:
    """Where the pool holds every wave, the truth computes each wave's expected length instead of running the
    scheduler over requests with spread-out starting fractions: the same figures, to about a percent."""
    fast = model_scenario(cfg, scenario)
    workload = "code" if scenario.prompts == "humaneval" else "prose"
    run = simulate_scenario(
        cfg,
        concurrency=scenario.concurrency,
        requests=scenario.requests,
        prompt_tokens=scenario.prompt_tokens,
        output_tokens=scenario.output_tokens,
        accept=_accept(cfg, workload),
    )
    assert not run.retractions and not fast.retractions
    assert fast.seconds == pytest.approx(run.seconds, rel=0.015)
    assert fast.accept_length == pytest.approx(run.generated / run.verify_steps, rel=0.015)


# -- open loop ----------------------------------------------------------------------------------------------

DDT = ServerConfig(algorithm="DDTREE", ddtree_budget=12, ddtree_topk=6, block_size=8, draft_window=2048)


def _open_run(cfg: ServerConfig, arrivals: list[float], *, output: int = 64, cap: int | None = None):  # type: ignore[no-untyped-def]
    n = len(arrivals)
    return simulate_open(
        cfg, arrivals=arrivals, prompt_tokens=[512] * n, output_tokens=[output] * n, accept=_accept(cfg),
        max_concurrency=cap,
    )  # fmt: skip


def test_a_lone_request_takes_its_prefill_and_steps() -> None:
    run = _open_run(DDT, [0.0])
    (t,) = run.requests
    first_step = 512 * PREFILL_S_PER_TOKEN + step_time_s(DDT, running=1, context_tokens=512)
    assert t.first_token == pytest.approx(first_step, rel=0.02) and t.tokens == 64
    assert t.finish > t.first_token and run.generated == 64


def test_below_capacity_requests_do_not_wait_and_above_it_they_queue() -> None:
    lone = _open_run(DDT, [0.0]).requests[0]
    e2e = lone.finish - lone.arrival
    sparse = _open_run(DDT, [i * 3 * e2e for i in range(10)])  # each alone: no queue
    assert all(t.first_token - t.arrival == pytest.approx(lone.first_token, rel=0.02) for t in sparse.requests)
    # Two running at most, a request every e2e / 8: the waiting queue grows, and so does every TTFT after it.
    cfg = dataclasses.replace(DDT, max_running_requests=2)
    crowd = _open_run(cfg, [i * e2e / 8 for i in range(24)])
    ttfts = [t.first_token - t.arrival for t in crowd.requests]
    assert ttfts[-1] > 5 * ttfts[0] and ttfts[12] < ttfts[-1]
    # Served at its capacity, two per e2e: 24 requests take about 12 e2e, though they all arrived within 3.
    assert max(t.finish for t in crowd.requests) > 10 * e2e


def test_step_time_grows_with_the_batch_and_the_verify_width() -> None:
    """Why the config that is fastest for one stream can miss a latency target in a full batch."""
    narrow = dataclasses.replace(DDT, ddtree_budget=4)
    for cfg in (DDT, narrow):
        assert step_time_s(cfg, running=16, context_tokens=512) > 1.5 * step_time_s(cfg, running=1, context_tokens=512)
    assert verify_width(DDT) > verify_width(narrow)
    assert step_time_s(DDT, running=16, context_tokens=512) > step_time_s(narrow, running=16, context_tokens=512)
    # Under open traffic the per-token time grows as arrivals fill the batch.
    e2e = _open_run(DDT, [0.0]).requests[0].finish
    busy = _open_run(DDT, [i * e2e / 12 for i in range(48)])
    lone_tpot = e2e / 64
    tpots = sorted((t.finish - t.first_token) / (t.tokens - 1) for t in busy.requests)
    assert tpots[len(tpots) // 2] > 1.5 * lone_tpot


def test_a_client_cap_holds_requests_at_the_client() -> None:
    lone = _open_run(DDT, [0.0]).requests[0]
    run = _open_run(DDT, [0.0] * 6, cap=2)
    finishes = sorted(t.finish for t in run.requests)
    # Two at a time: three rounds, each about a lone request's time; every request's TTFT counts from 0.
    assert finishes[-1] > 2.5 * lone.finish and len(run.requests) == 6
    assert max(t.first_token for t in run.requests) > 2 * lone.finish
