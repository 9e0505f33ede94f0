"""The workload matters: the simulator accepts more draft tokens on HumanEval code than on random words."""

from __future__ import annotations

import pytest

from tests.bench.conftest import DDTREE
from tuner.bench import HttpBenchmark
from tuner.config import BenchmarkSection, Scenario
from tuner.endpoint import Endpoint
from tuner.sim import ServerConfig, acceptance_length
from tuner.sim.testing import SimProcess

CFG = ServerConfig.from_argv(DDTREE, {"SGLANG_DDTREE_MAX_TOPK": "6"})


def test_humaneval_prompts_accept_more_than_random_words(ddtree_sim: SimProcess) -> None:
    code = Scenario(name="code", concurrency=2, prompt_tokens=200, output_tokens=96, requests=4, prompts="humaneval")
    prose = Scenario(name="prose", concurrency=2, prompt_tokens=200, output_tokens=96, requests=4)
    section = BenchmarkSection(scenarios=(code, prose), warmup_requests=0, repeats=1, request_timeout_s=60)
    bench = HttpBenchmark(endpoint=Endpoint(base_url=ddtree_sim.url), config=section)
    on_code, on_prose = bench.run_scenario(code), bench.run_scenario(prose)
    assert on_code.accept_length is not None and on_prose.accept_length is not None
    # The model's own figures at these contexts (code ~4.8, prose ~3.1), within the engine's rounding.
    assert on_code.accept_length == pytest.approx(acceptance_length(CFG, context_tokens=250), rel=0.08)
    assert on_prose.accept_length == pytest.approx(
        acceptance_length(CFG, context_tokens=250, workload="prose"), rel=0.05
    )
    assert on_code.accept_length > on_prose.accept_length + 1.0
