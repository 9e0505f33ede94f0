"""Ground truth: the noise-free scenario model, the true objective and the enumerated optimum."""

from __future__ import annotations

import random

import pytest

from tuner.sim import ServerConfig, acceptance_length, decode_tok_s
from tuner.sim.inprocess import model_scenario, parse_server_config, true_objective, true_optimum
from tuner.sim.inprocess._truth import _enumerate, _FastConfigs

from .conftest import MakeConfig


def _small(text: str) -> str:
    """The demo space, coarsened so that enumerating it takes well under a second."""
    text = text.replace("low = 2\nhigh = 32", "low = 5\nhigh = 32\nstep = 7")
    text = text.replace("low = 1\nhigh = 10", "low = 3\nhigh = 10\nstep = 3")
    return text.replace("low = 0.70\nhigh = 0.92\nstep = 0.01", "low = 0.70\nhigh = 0.90\nstep = 0.05")


def test_scenario_model_agrees_with_the_simulator_model() -> None:
    from tuner.config import Scenario

    cfg = ServerConfig(algorithm="DDTREE", ddtree_budget=12, ddtree_topk=6, block_size=8, draft_window=2048)
    one = Scenario(name="c1", concurrency=1, prompt_tokens=512, output_tokens=512, requests=2)
    m = model_scenario(cfg, one)
    ctx = 512 + 256
    # The counters' figure (tokens per verify step): the model's acceptance, less the last step's spare tokens.
    assert m.accept_length == pytest.approx(acceptance_length(cfg, context_tokens=ctx, workload="prose"), rel=0.01)
    # Decode dominates a long single stream: the aggregate is the model's decode speed less the prefill.
    truth = decode_tok_s(cfg, concurrency=1, context_tokens=ctx, workload="prose")  # random prompts are prose
    assert m.tok_s == pytest.approx(truth, rel=0.03)
    assert m.tok_s < truth
    # A pool too small for the whole wave: slower, with the scheduler's retractions, not a failure.
    tight = ServerConfig(algorithm="DFLASH", block_size=4, draft_window=1024, mem_fraction_static=0.71)
    roomy = ServerConfig(algorithm="DFLASH", block_size=4, draft_window=1024, mem_fraction_static=0.85)
    crowd = Scenario(name="c32", concurrency=32, prompt_tokens=3000, output_tokens=480, requests=32)
    slow, fast = model_scenario(tight, crowd), model_scenario(roomy, crowd)
    assert slow.died is None and slow.retractions and not fast.retractions
    assert "KV cache pool is full. Retract requests." in slow.retractions[0]
    assert slow.tok_s < 0.8 * fast.tok_s
    # A prompt longer than the whole pool is refused, as SGLang refuses it.
    huge = Scenario(name="c1", concurrency=1, prompt_tokens=30000, output_tokens=16, requests=1)
    refused = model_scenario(tight, huge)
    assert refused.died is not None and refused.died.startswith("Input length (30000 tokens) exceeds")
    assert refused.tok_s == 0


def test_true_objective_scores_failures_zero(make_config: MakeConfig) -> None:
    cfg = make_config()
    assert true_objective(cfg, cfg.baseline) > 250
    corrupt = {**cfg.baseline, "budget": 28, "topk": 9, "max_running_requests": 16}
    assert true_objective(cfg, corrupt) == 0.0
    oom = {**cfg.baseline, "budget": 32, "topk": 10, "max_running_requests": 128, "mem_fraction_static": 0.92}
    assert true_objective(cfg, oom) == 0.0


def test_true_optimum_is_the_best_of_the_space(make_config: MakeConfig) -> None:
    cfg = make_config(edit=_small)
    value, params = true_optimum(cfg)
    assert value == pytest.approx(true_objective(cfg, params))
    everything = list(_enumerate(cfg.space))
    assert all(not cfg.space.violations(p) for p in everything)
    sample = random.Random(1).sample(everything, 300)
    assert max(true_objective(cfg, p) for p in sample) <= value
    assert value > true_objective(cfg, cfg.baseline)


def test_fast_config_mapping_matches_the_parser(make_config: MakeConfig) -> None:
    cfg = make_config(edit=_small)
    fast = _FastConfigs(cfg)
    from tuner.config import base_spec
    from tuner.space import render

    for p in random.Random(2).sample(list(_enumerate(cfg.space)), 50):
        assert fast(p) == parse_server_config(render(cfg.space, base_spec(cfg.target), p))
