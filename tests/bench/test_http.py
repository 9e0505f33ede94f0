"""The HTTP benchmark against a real simulator with known, noise-free pacing."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.bench.conftest import DDTREE, TIME_SCALE
from tests.fixtures_rerun import ClientRerun
from tuner.bench import STREAM_CLIENTS, HttpBenchmark, ScenarioResult
from tuner.config import BenchmarkSection, Scenario
from tuner.dialects import parse_prometheus
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad, Phase
from tuner.sim import ServerConfig, acceptance_length, decode_tok_s, step_time_s
from tuner.sim._engine import PREFILL_S_PER_TOKEN
from tuner.sim.testing import SimProcess

CFG = ServerConfig.from_argv(DDTREE, {"SGLANG_DDTREE_MAX_TOPK": "6"})
#: The pace is measured alike whichever stream client carries it (how each names a failure, and the rest of the
#: client's contract: tests/bench/test_client_contract.py).
LIBRARIES = pytest.mark.parametrize("http_client", STREAM_CLIENTS)


def _bench(sim: SimProcess, scenario: Scenario, **kw: object) -> HttpBenchmark:
    section = BenchmarkSection(
        scenarios=(scenario,),
        warmup_requests=int(kw.pop("warmup", 2)),  # type: ignore[call-overload]
        repeats=int(kw.pop("repeats", 2)),  # type: ignore[call-overload]
        request_timeout_s=float(kw.pop("timeout", 30.0)),  # type: ignore[arg-type]
        api=str(kw.pop("api", "chat")),
        http_client=str(kw.pop("http_client", "aiohttp")),
    )
    return HttpBenchmark(endpoint=Endpoint(base_url=sim.url, model=kw.pop("model", None)), config=section)  # type: ignore[arg-type]


def _generated_total(sim: SimProcess) -> float:
    text = httpx.get(sim.url + "/metrics", trust_env=False).text
    return parse_prometheus(text)["sglang:generation_tokens_total"]


@LIBRARIES
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_pacing_matches_the_simulator_ground_truth(ddtree_sim: SimProcess, api: str, http_client: str) -> None:
    sc = Scenario(name=f"c4-{api}", concurrency=4, prompt_tokens=256, output_tokens=256, requests=4)
    before = _generated_total(ddtree_sim)
    result = _bench(ddtree_sim, sc, api=api, http_client=http_client).run_scenario(sc)
    after = _generated_total(ddtree_sim)

    ctx = sc.prompt_tokens + sc.output_tokens // 2
    truth = decode_tok_s(CFG, concurrency=4, context_tokens=ctx, workload="prose") * TIME_SCALE
    # A request's last step delivers only what max_tokens leaves room for: ~accept/2 of 256 tokens short.
    assert result.per_stream_tok_s == pytest.approx(truth, rel=0.03)
    assert result.itl_p50_s == pytest.approx(1.0 / truth, rel=0.15)
    # All four start together: one step carrying four prefills, then the first event.
    ttft = (4 * sc.prompt_tokens * PREFILL_S_PER_TOKEN + step_time_s(CFG, running=4, context_tokens=256)) / TIME_SCALE
    # Never faster than the server's first step; the upper side is left loose: on a shared, loaded machine the
    # client's own scheduling adds tens of milliseconds (what the client-bound alarm watches, not this test).
    assert result.ttft_p50_s is not None and 0.8 * ttft < result.ttft_p50_s < (result.e2e_p50_s or 0) / 2
    assert result.ttft_p99_s is not None and result.ttft_p99_s >= result.ttft_p50_s
    assert result.itl_p99_s is not None and result.itl_p99_s >= result.itl_p50_s
    # Aggregate: 4 streams at the decode pace, less the prefill/first-step time of each request.
    assert 0.85 * 4 * truth < result.output_tok_s < 1.02 * 4 * truth
    assert result.score <= result.output_tok_s

    # Warm-up is excluded: the server generated warm-up + measured tokens, the result counts only measured.
    assert result.requests == 2 * 4 and result.errors == 0
    assert result.output_tokens == 2 * 4 * 256
    assert after - before == (2 + (2 + result.client_reruns) * 4) * 256  # and any pass run again (client-bound)
    assert result.tokens_from_usage and result.short_requests == 0
    assert result.prompt_tokens == sc.prompt_tokens  # the prompt builder hits the target length
    assert result.cache_flushed is True

    # Acceptance from the server's counters (before/after the measured repeats), not from a model: the exact
    # Prometheus counters when the server has them, else /server_info's server-wide average.
    metrics = httpx.get(ddtree_sim.url + "/metrics", trust_env=False).text
    exact = "sglang:spec_verify_calls_total" in metrics
    assert result.accept_method == ("counters" if exact else "server_info: server-wide, lagging")
    assert result.accept_length == pytest.approx(acceptance_length(CFG, context_tokens=ctx, workload="prose"), rel=0.03)


def test_result_is_json_ready(ddtree_sim: SimProcess) -> None:
    import json

    sc = Scenario(name="c1", concurrency=1, prompt_tokens=64, output_tokens=32, requests=1)
    seen: list[tuple[int, int]] = []
    bench = _bench(ddtree_sim, sc, warmup=0, repeats=3)
    bench._on_repeat = lambda s, r, so_far: seen.append((r, len(so_far)))
    result = bench.run_scenario(sc)
    assert isinstance(result, ScenarioResult)
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["name"] == "c1" and len(doc["repeats_tok_s"]) == 3
    assert seen == [(0, 1), (1, 2), (2, 3)]
    assert result.ci_low is not None and result.ci_low <= result.output_tok_s <= (result.ci_high or 0)


def test_malformed_chunk_is_a_failure_not_a_score(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*DDTREE, "--sim-time-scale", "4", "--sim-malformed-chunks", "0.1")
    sc = Scenario(name="c4-bad", concurrency=4, prompt_tokens=32, output_tokens=64, requests=4)
    with pytest.raises(DiedUnderLoad) as info:
        _bench(sim, sc, warmup=0).run_scenario(sc)
    exc = info.value
    assert exc.phase is Phase.BENCHMARK
    assert exc.reason.startswith("died under load in scenario c4-bad: ")
    assert "malformed chunk" in exc.reason
    assert "request #" in exc.evidence


def test_server_dying_under_load_cuts_streams(start_sim) -> None:  # type: ignore[no-untyped-def]
    flags = [
        *DDTREE,
        "--mem-fraction-static",
        "0.72",
        "--max-running-requests",
        "16",
        "--sim-time-scale",
        "4",
        "--sim-crash-above-batch-tokens",
        "20000",
    ]
    sim = start_sim(*flags)
    # 16 requests of 4,000 tokens: the batch outgrows the injected limit and the scheduler dies with a CUDA error.
    sc = Scenario(name="c16-long", concurrency=16, prompt_tokens=4000, output_tokens=64, requests=16)
    with pytest.raises(DiedUnderLoad) as info:
        _bench(sim, sc, warmup=1).run_scenario(sc)
    reason = info.value.reason
    assert "died under load in scenario c16-long: " in reason
    assert "/16 requests failed" in reason
    assert "no longer answers /health" in reason
    assert sim.proc.wait(timeout=5) != 0


def test_a_stream_cut_by_a_crash_counts_the_tokens_it_delivered(  # type: ignore[no-untyped-def]
    start_sim, client_rerun: ClientRerun
) -> None:
    # The server dies 20 modelled seconds (5 s) after it is ready, in the middle of an 8,000-token stream (~50
    # modelled seconds): however slowly the client starts on a loaded machine, it is streaming by then. A pass
    # whose client stalled is a failed pass all the same (tune never runs a failed pass again).
    sim = start_sim(*DDTREE, "--sim-time-scale", "4", "--sim-crash-after", "20")
    sc = Scenario(name="c1-cut", concurrency=1, prompt_tokens=32, output_tokens=8000, requests=1)
    with pytest.raises(DiedUnderLoad) as info:
        _bench(sim, sc, warmup=0, repeats=1).run_scenario(sc)
    delivered = re.search(r"request #0 failed after [\d.]+ s \((\d+) tokens delivered\)", info.value.evidence)
    assert delivered is not None, info.value.evidence
    assert 0 < int(delivered.group(1)) < 8000, info.value.evidence  # what the stream carried, not `usage`'s 0
    client_rerun.check()


def test_http_error_is_a_failure(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*DDTREE, "--context-length", "256")
    sc = Scenario(name="too-long", concurrency=2, prompt_tokens=300, output_tokens=16, requests=2)
    with pytest.raises(DiedUnderLoad) as info:
        _bench(sim, sc, warmup=1).run_scenario(sc)
    assert "HTTP 400" in info.value.reason, info.value.evidence
    assert "maximum context length" in info.value.evidence


def test_request_timeout_is_a_failure(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*DDTREE, "--sim-hang")
    sc = Scenario(name="hung", concurrency=2, prompt_tokens=8, output_tokens=16, requests=2)
    with pytest.raises(DiedUnderLoad) as info:
        _bench(sim, sc, warmup=0, repeats=1, timeout=0.5, model="m").run_scenario(sc)
    assert "timeout" in info.value.reason
