"""The client-bound alarm: the load generator's own CPU and start delays, on every HTTP measurement."""

from __future__ import annotations

import pytest

from tuner.bench import HttpBenchmark, ScenarioResult
from tuner.bench._alarm import client_load
from tuner.bench._http import MAX_CLIENT_RERUNS
from tuner.bench._load import LoadResult
from tuner.bench._request import RequestRecord
from tuner.cli._bench import format_table
from tuner.config import BenchmarkSection, Scenario
from tuner.endpoint import Endpoint
from tuner.metrics import scenario_attrs
from tuner.sim.testing import SimProcess
from tuner.study import describe_result

SC = Scenario(name="c2", concurrency=2, prompt_tokens=32, output_tokens=48, requests=4)


def _bench(sim: SimProcess, processes: int, **kw: float) -> HttpBenchmark:
    section = BenchmarkSection(scenarios=(SC,), warmup_requests=2, repeats=2, client_processes=processes)
    return HttpBenchmark(endpoint=Endpoint(base_url=sim.url), config=section, **kw)


def test_easy_load_is_not_client_bound(ddtree_sim: SimProcess) -> None:
    # The machine running the tests is shared: a start-delay floor of seconds keeps scheduling hiccups out of
    # this check, which is about the CPU figure and the default CPU budget.
    result = _bench(ddtree_sim, 1, min_start_delay_s=5.0).run_scenario(SC)
    assert result.client_bound is False and result.client_warning() is None
    assert result.client_processes == 1
    assert result.client_cpu_cores is not None and 0.0 < result.client_cpu_cores < 0.8
    assert result.client_busiest_process_cores is not None and result.client_busiest_process_cores < 0.8
    assert result.start_delay_p99_s is not None and result.start_delay_p99_s >= 0.0
    assert result.client_reruns == 0  # every pass the client kept up with counts at once


def test_client_over_its_cpu_budget_is_flagged_with_the_fix(ddtree_sim: SimProcess) -> None:
    for processes in (1, 2):
        result = _bench(ddtree_sim, processes, cpu_budget_cores=1e-6, min_start_delay_s=5.0).run_scenario(SC)
        assert result.client_bound is True
        assert result.client_processes == processes
        warning = result.client_warning()
        assert result.client_bound_by == "cpu"
        assert warning is not None and warning.startswith("WARNING c2: the load generator was the bottleneck")
        assert f"client_processes = {processes + 1}" in warning
        flat = scenario_attrs(result)
        assert flat["c2.client_bound"] is True
        assert flat["c2.client_cpu_cores"] == round(result.client_cpu_cores or -1, 4)
        # Each pass was run again (MAX_CLIENT_RERUNS times, never counted) before its last try was kept: a
        # client that stays over budget does not make the scenario run forever, and no re-run is in the figures.
        assert result.client_reruns == 2 * MAX_CLIENT_RERUNS == flat["c2.client_reruns"]
        assert len(result.repeats_tok_s) == 2 and result.requests == 2 * SC.requests
        assert "4 passes re-run (client-bound)" in describe_result(result)


def _run(delays: list[float], *, latency: float = 2.0, cpu: float = 0.2) -> LoadResult:
    recs = [
        RequestRecord(index=i, t_start=10.0 + d, t_end=10.0 + latency, t_due=10.0, t_sent=10.0 + d)
        for i, d in enumerate(delays)
    ]
    return LoadResult(records=recs, started=len(recs), t_begin=10.0, t_end=10.0 + latency, cpu_s=[cpu], wall_s=[1.0])


def test_start_delay_bound_is_relative_to_request_latency() -> None:
    easy = client_load([_run([0.001] * 50 + [0.09])], processes=1)  # p99 ~0.045 s: under 10% of 2 s
    assert not easy.bound and easy.start_delay_bound_s == pytest.approx(0.2, rel=0.01)
    late = client_load([_run([0.001] * 40 + [0.3] * 10)], processes=1)
    assert late.bound and late.start_delay_p99_s == pytest.approx(0.3) and late.reason == "start delay"
    busy = client_load([_run([0.0] * 10, cpu=0.9)], processes=1)
    assert busy.reason == "cpu"
    assert busy.bound and busy.busiest_process_cores == 0.9 and busy.cpu_cores == pytest.approx(0.45)  # 0.9 s over 2 s


def test_bench_table_marks_client_bound_scenarios() -> None:
    common = {"concurrency": 64, "repeats_tok_s": (1.0,), "output_tok_s": 1.0, "score": 1.0, "per_stream_tok_s": 1.0}
    ok = ScenarioResult(name="easy", client_cpu_cores=0.31, client_processes=2, **common)  # type: ignore[arg-type]
    bound = ScenarioResult(  # type: ignore[arg-type]
        name="hard", client_bound=True, client_cpu_cores=0.97, client_processes=1, **common
    )
    table = format_table([ok, bound])
    assert "0.31c/2p" in table and "BOUND" not in table.splitlines()[2]
    assert "0.97c/1p BOUND" in table.splitlines()[3]
    late = ScenarioResult(  # type: ignore[arg-type]
        name="late", client_bound=True, client_bound_by="start delay", start_delay_p99_s=0.163, **common
    )
    warning = late.client_warning()
    assert warning is not None and "requests went out late (request start delay p99 163 ms)" in warning
    assert "client_processes = 2" in warning
