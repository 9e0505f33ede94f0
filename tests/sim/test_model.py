"""The performance model's calibration and shape (pure functions, no server)."""

from __future__ import annotations

import random

import pytest

from tuner.sim import (
    ServerConfig,
    acceptance_length,
    aggregate_tok_s,
    corrupts_code,
    decode_tok_s,
    max_concurrent_requests,
    startup_failure,
    startup_seconds,
)

CTX = 768  # a ~512-token prompt plus a few hundred generated tokens
REF = ServerConfig(algorithm="DDTREE", ddtree_budget=12, ddtree_topk=6, draft_window=2048, block_size=8)


def _space_single_stream() -> list[ServerConfig]:
    cfgs = [ServerConfig(algorithm="DFLASH", block_size=b, draft_window=2048) for b in (4, 8, 12, 16)]
    cfgs += [
        ServerConfig(algorithm="DDTREE", block_size=blk, draft_window=2048, ddtree_budget=b, ddtree_topk=k)
        for blk in (4, 8, 12, 16)
        for b in range(2, 33)
        for k in range(1, 11)
    ]
    return cfgs


def _best(c: int) -> tuple[float, ServerConfig]:
    best = max(
        (aggregate_tok_s(cfg, concurrency=c, context_tokens=CTX) / c, i, cfg)
        for i, cfg in enumerate(_space_single_stream())
        if not corrupts_code(cfg)
    )
    return best[0], best[2]


def test_reference_config_calibration() -> None:
    assert acceptance_length(REF, context_tokens=CTX) == pytest.approx(4.8, abs=0.1)
    assert decode_tok_s(REF, concurrency=1, context_tokens=CTX) == pytest.approx(149, rel=0.03)


def test_best_single_stream_and_optima_differ() -> None:
    best1, cfg1 = _best(1)
    best32, cfg32 = _best(32)
    assert best1 == pytest.approx(170, rel=0.03)
    assert cfg1 != cfg32
    # Neither optimum sits on a corner of the demo space.
    assert cfg1.algorithm == "DDTREE"
    assert 2 < cfg1.ddtree_budget < 32 and 1 < cfg1.ddtree_topk < 10
    assert cfg1.block_size in (8, 12) and cfg32.block_size in (8, 12)
    assert best32 < best1


def test_concurrency_slows_big_trees_more() -> None:
    big = ServerConfig(algorithm="DDTREE", ddtree_budget=30, ddtree_topk=4, block_size=12, draft_window=2048)
    small = ServerConfig(algorithm="DDTREE", ddtree_budget=6, ddtree_topk=2, block_size=8, draft_window=2048)
    r1 = decode_tok_s(big, concurrency=1, context_tokens=CTX) / decode_tok_s(
        small, concurrency=1, context_tokens=CTX
    )
    r64 = decode_tok_s(big, concurrency=64, context_tokens=CTX) / decode_tok_s(
        small, concurrency=64, context_tokens=CTX
    )
    assert r64 < r1


def test_window_matches_training_window_on_long_context() -> None:
    accs = {
        w: acceptance_length(
            ServerConfig(algorithm="DDTREE", draft_window=w, block_size=8), context_tokens=16000
        )
        for w in (None, 512, 2048, 4096)
    }
    assert accs[2048] == max(accs.values())
    assert accs[None] < accs[4096] < accs[2048]
    assert accs[512] < accs[2048]


def test_queueing_beyond_max_running_requests() -> None:
    cfg = ServerConfig(algorithm="DFLASH", block_size=8, max_running_requests=16)
    assert decode_tok_s(cfg, concurrency=32, context_tokens=CTX) == pytest.approx(
        decode_tok_s(cfg, concurrency=16, context_tokens=CTX) / 2
    )


def test_failures_reachable_but_not_dominant() -> None:
    rng = random.Random(0)
    n, failed_start, failed_load = 4000, 0, 0
    for _ in range(n):
        cfg = ServerConfig(
            algorithm=rng.choice(["DDTREE", "DFLASH"]),
            block_size=rng.choice([4, 8, 12, 16]),
            draft_window=rng.choice([None, 512, 1024, 2048, 4096]),
            ddtree_budget=rng.randint(2, 32),
            ddtree_topk=rng.randint(1, 10),
            max_running_requests=rng.choice([16, 32, 48, 64, 96, 128]),
            mem_fraction_static=rng.uniform(0.70, 0.92),
        )
        if startup_failure(cfg) is not None:
            failed_start += 1
        elif min(32, cfg.max_running_requests) > max_concurrent_requests(cfg, context_tokens=CTX):
            failed_load += 1
    assert failed_start > 0 and failed_load > 0
    assert 0.08 < (failed_start + failed_load) / n < 0.25


def test_startup_failures_and_time() -> None:
    assert startup_failure(ServerConfig(algorithm="DFLASH", block_size=16, draft_window=8)).startswith(
        "AssertionError"
    )
    oom = ServerConfig(
        algorithm="DDTREE",
        ddtree_budget=32,
        ddtree_topk=10,
        max_running_requests=128,
        mem_fraction_static=0.92,
    )
    assert "torch.OutOfMemoryError: CUDA out of memory" in (startup_failure(oom) or "")
    assert startup_failure(REF) is None
    wide = ServerConfig(algorithm="DDTREE", ddtree_budget=32)
    assert startup_seconds(wide, load_time=360) > startup_seconds(REF, load_time=360) > 360


def test_corrupt_region_is_a_minority_away_from_optimum() -> None:
    assert corrupts_code(ServerConfig(algorithm="DDTREE", ddtree_budget=24, ddtree_topk=9))
    assert not corrupts_code(ServerConfig(algorithm="DDTREE", ddtree_budget=23, ddtree_topk=10))
    assert not corrupts_code(ServerConfig(algorithm="DFLASH", ddtree_budget=32, ddtree_topk=10))
    assert not corrupts_code(_best(1)[1])


def test_from_argv_uses_env_topk() -> None:
    cfg = ServerConfig.from_argv(
        ["--speculative-algorithm", "DDTREE", "--speculative-num-draft-tokens", "8"],
        {"SGLANG_DDTREE_MAX_TOPK": "3"},
    )
    assert (cfg.algorithm, cfg.block_size, cfg.ddtree_topk, cfg.draft_window) == ("DDTREE", 8, 3, None)
