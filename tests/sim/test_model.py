"""The performance model's calibration and shape (pure functions, no server)."""

from __future__ import annotations

import random

import pytest

from tuner.sim import ServerConfig, acceptance_length, corrupts_code, decode_tok_s, step_time_s
from tuner.sim._model import aggregate_tok_s, cuda_graph_max_bs, startup_failure, startup_seconds, verify_width

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


def _best(c: int, algorithm: str | None = None) -> tuple[float, ServerConfig]:
    best = max(
        (aggregate_tok_s(cfg, concurrency=c, context_tokens=CTX) / c, i, cfg)
        for i, cfg in enumerate(_space_single_stream())
        if not corrupts_code(cfg) and algorithm in (None, cfg.algorithm)
    )
    return best[0], best[2]


def test_reference_config_calibration() -> None:
    """The seed's DDTREE config: budget 12, top-k cap 6, window 2048, block 8 -> ~149 tok/s, acceptance ~4.8."""
    assert acceptance_length(REF, context_tokens=CTX) == pytest.approx(4.8, abs=0.1)
    assert decode_tok_s(REF, concurrency=1, context_tokens=CTX) == pytest.approx(149, rel=0.03)
    assert acceptance_length(REF, context_tokens=CTX, workload="prose") == pytest.approx(3.1, abs=0.2)


def test_best_single_stream_and_optima_differ() -> None:
    best1, cfg1 = _best(1)
    best32, cfg32 = _best(32)
    assert best1 == pytest.approx(170, rel=0.03)
    assert cfg1 != cfg32 and best32 < best1
    # At one stream a tree beats the best chain, with a budget inside the range; at 32 streams big trees cost.
    assert cfg1.algorithm == "DDTREE" and 12 < cfg1.budget < 32
    assert _best(1, "DFLASH")[0] < best1
    assert verify_width(cfg32) < verify_width(cfg1)


@pytest.mark.parametrize(
    ("budget", "block", "cap", "effective"),
    [
        (7, 8, 6, 1),  # budget <= block - 1: the plain chain of the spine fast path
        (3, 8, 6, 1),
        (12, 8, 6, 2),  # 12 // 7 + 1 = 2: the seed's cap of 6 changes nothing
        (8, 8, 6, 2),  # at least 2 once the tree branches
        (32, 8, 6, 5),
        (32, 8, 3, 3),  # the cap binds only when budget >= cap x (block - 1)
        (32, 4, 6, 6),
        (32, 4, 1, 1),
    ],
)
def test_effective_topk(budget: int, block: int, cap: int, effective: int) -> None:
    cfg = ServerConfig(algorithm="DDTREE", ddtree_budget=budget, block_size=block, ddtree_topk=cap)
    assert cfg.effective_topk == min(max(budget // (block - 1) + 1, 2), cap) if budget > block - 1 else 1
    assert cfg.effective_topk == effective


def test_a_cap_above_the_tree_width_changes_neither_acceptance_nor_cost() -> None:
    for cap in (2, 3, 6, 10):
        cfg = ServerConfig(algorithm="DDTREE", ddtree_budget=12, ddtree_topk=cap, block_size=8, draft_window=2048)
        assert acceptance_length(cfg, context_tokens=CTX) == acceptance_length(REF, context_tokens=CTX)
        assert step_time_s(cfg, running=4, context_tokens=CTX) == step_time_s(REF, running=4, context_tokens=CTX)
    # Where it binds (a big budget on a short block), a wider tree accepts more and costs more.
    narrow = ServerConfig(algorithm="DDTREE", ddtree_budget=32, ddtree_topk=2, block_size=4, draft_window=2048)
    wide = ServerConfig(algorithm="DDTREE", ddtree_budget=32, ddtree_topk=4, block_size=4, draft_window=2048)
    assert acceptance_length(narrow, context_tokens=CTX) < acceptance_length(wide, context_tokens=CTX)
    assert step_time_s(narrow, running=1, context_tokens=CTX) < step_time_s(wide, running=1, context_tokens=CTX)


def test_unset_budget_is_a_chain_of_the_block() -> None:
    chain = ServerConfig(algorithm="DDTREE", block_size=8, draft_window=2048)
    dflash = ServerConfig(algorithm="DFLASH", block_size=8, draft_window=2048)
    assert chain.budget == 7 and chain.effective_topk == 1
    assert acceptance_length(chain, context_tokens=CTX) == acceptance_length(dflash, context_tokens=CTX)
    assert verify_width(chain) == verify_width(dflash) == 8
    assert verify_width(REF) == 13  # the DDTree verify graph: budget + 1 tokens per request


def test_a_block_other_than_the_drafters_costs_acceptance() -> None:
    trained = ServerConfig(algorithm="DFLASH", block_size=8, drafter_block_size=8, draft_window=2048)
    other = ServerConfig(algorithm="DFLASH", block_size=8, drafter_block_size=16, draft_window=2048)
    beyond = ServerConfig(algorithm="DFLASH", block_size=16, drafter_block_size=8, draft_window=2048)
    assert acceptance_length(other, context_tokens=CTX) < acceptance_length(trained, context_tokens=CTX)
    # Positions past the trained block add little: 15 drafted positions barely beat 7.
    gain = acceptance_length(beyond, context_tokens=CTX) - acceptance_length(trained, context_tokens=CTX)
    assert 0 < gain < 0.5


def test_concurrency_slows_big_trees_more() -> None:
    big = ServerConfig(algorithm="DDTREE", ddtree_budget=30, ddtree_topk=4, block_size=12, draft_window=2048)
    small = ServerConfig(algorithm="DDTREE", ddtree_budget=6, ddtree_topk=2, block_size=8, draft_window=2048)
    r1 = decode_tok_s(big, concurrency=1, context_tokens=CTX) / decode_tok_s(small, concurrency=1, context_tokens=CTX)
    r64 = decode_tok_s(big, concurrency=64, context_tokens=CTX) / decode_tok_s(
        small, concurrency=64, context_tokens=CTX
    )
    assert r64 < r1


def test_window_matches_training_window_on_long_context() -> None:
    accs = {
        w: acceptance_length(ServerConfig(algorithm="DDTREE", draft_window=w, block_size=8), context_tokens=16000)
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


def test_graphs_are_captured_up_to_the_running_limit_and_never_shrink() -> None:
    cfg = ServerConfig(algorithm="DDTREE", ddtree_budget=32, max_running_requests=128, mem_fraction_static=0.92)
    assert cuda_graph_max_bs(cfg) == 128
    failure = startup_failure(cfg) or ""
    assert failure.startswith("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate")
    # Capturing fewer batch sizes (--cuda-graph-max-bs-decode) fits; bigger batches then run without graphs.
    fewer = ServerConfig(
        algorithm="DDTREE", ddtree_budget=32, max_running_requests=128, mem_fraction_static=0.92, cuda_graph_max_bs=16
    )
    assert startup_failure(fewer) is None and cuda_graph_max_bs(fewer) == 16
    graphed = step_time_s(fewer, running=16, context_tokens=CTX)
    eager = step_time_s(fewer, running=17, context_tokens=CTX)
    assert eager > 1.5 * graphed
    assert step_time_s(cfg, running=17, context_tokens=CTX) < 1.1 * graphed
    assert startup_failure(ServerConfig(algorithm="DFLASH", mem_fraction_static=0.68)) == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.68"
    )


def test_start_failures_reachable_but_rare() -> None:
    rng = random.Random(0)
    n, failed = 4000, 0
    for _ in range(n):
        cfg = ServerConfig(
            algorithm=rng.choice(["DDTREE", "DFLASH"]),
            block_size=rng.choice([4, 8, 12, 16]),
            draft_window=rng.choice([None, 2048, 4096]),
            ddtree_budget=rng.randint(2, 32),
            ddtree_topk=rng.randint(1, 10),
            max_running_requests=rng.choice([16, 32, 48, 64, 96, 128]),
            mem_fraction_static=rng.uniform(0.70, 0.92),
        )
        failed += startup_failure(cfg) is not None
    assert 0.005 < failed / n < 0.1


def test_startup_time() -> None:
    wide = ServerConfig(algorithm="DDTREE", ddtree_budget=32)
    assert startup_seconds(wide, load_time=360) > startup_seconds(REF, load_time=360) > 360


def test_corrupt_region_is_a_minority_with_fast_members() -> None:
    assert corrupts_code(ServerConfig(algorithm="DDTREE", ddtree_budget=24, ddtree_topk=9, block_size=8))
    assert not corrupts_code(ServerConfig(algorithm="DDTREE", ddtree_budget=23, ddtree_topk=10, block_size=8))
    assert not corrupts_code(ServerConfig(algorithm="DDTREE", ddtree_budget=24, ddtree_topk=8, block_size=8))
    assert not corrupts_code(ServerConfig(algorithm="DFLASH", ddtree_budget=32, ddtree_topk=10, block_size=8))
    # Only trees at least 3 wide take the faulty path: a cap of 10 on a 2-wide tree changes nothing.
    assert not corrupts_code(ServerConfig(algorithm="DDTREE", ddtree_budget=27, ddtree_topk=10, block_size=16))
    assert corrupts_code(ServerConfig(algorithm="DDTREE", ddtree_budget=30, ddtree_topk=10, block_size=16))
    ddtree = [cfg for cfg in _space_single_stream() if cfg.algorithm == "DDTREE"]
    assert 0.03 < sum(map(corrupts_code, ddtree)) / len(ddtree) < 0.08
    best_value, best = _best(1)
    assert not corrupts_code(best)
    fastest_wrong = max(aggregate_tok_s(c, concurrency=1, context_tokens=CTX) for c in ddtree if corrupts_code(c))
    assert 0.9 * best_value < fastest_wrong < best_value


def test_from_argv_resolves_as_sglang_does() -> None:
    cfg = ServerConfig.from_argv(
        ["--speculative-algorithm", "DDTREE", "--speculative-num-draft-tokens", "8"], {"SGLANG_DDTREE_MAX_TOPK": "3"}
    )
    assert (cfg.algorithm, cfg.block_size, cfg.ddtree_topk, cfg.draft_window) == ("DDTREE", 8, 3, None)
    assert (cfg.budget, cfg.max_running_requests) == (7, 48)  # budget: block - 1; DFLASH family: 48 running
    default = ServerConfig.from_argv(["--speculative-algorithm", "dflash"], {"SGLANG_DDTREE_MAX_TOPK": "x"})
    assert (default.algorithm, default.block_size, default.ddtree_topk) == ("DFLASH", 16, 6)
