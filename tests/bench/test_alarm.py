"""The client-bound alarm: the load generator's own CPU and start delays, on every HTTP measurement."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path
from typing import Any

import pytest

from tuner.bench import HttpBenchmark, MeasuredWindow, ScenarioResult
from tuner.bench._alarm import client_load
from tuner.bench._http import MAX_CLIENT_RERUNS
from tuner.bench._load import STALL_TICK_S, LoadResult
from tuner.bench._planted import CLIENT_STALL_ENV
from tuner.bench._record import RequestRecord
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


def _run(delays: list[float], *, latency: float = 2.0, cpu: float = 0.2, stall: float = 0.001) -> LoadResult:
    recs = [
        RequestRecord(index=i, t_start=10.0 + d, t_end=10.0 + latency, t_due=10.0, t_sent=10.0 + d)
        for i, d in enumerate(delays)
    ]
    return LoadResult(
        records=recs, started=len(recs), t_begin=10.0, t_end=10.0 + latency, cpu_s=[cpu], wall_s=[1.0], stall_s=[stall]
    )


def test_start_delay_bound_is_relative_to_request_latency() -> None:
    easy = client_load([_run([0.001] * 50 + [0.09])], processes=1)  # p99 ~0.045 s: under 10% of 2 s
    assert not easy.bound and easy.start_delay_bound_s == pytest.approx(0.2, rel=0.01)
    late = client_load([_run([0.001] * 40 + [0.3] * 10)], processes=1)
    assert late.bound and late.start_delay_p99_s == pytest.approx(0.3) and late.reason == "start delay"
    busy = client_load([_run([0.0] * 10, cpu=0.9)], processes=1)
    assert busy.reason == "cpu"
    # A stall is held to the same bound: 10% of the median latency (0.2 s here), and at least 50 ms.
    stalled = client_load([_run([0.001] * 10), _run([0.001] * 10, stall=0.25)], processes=1)
    assert stalled.bound and stalled.reason == "stall" and stalled.longest_stall_s == 0.25
    assert not client_load([_run([0.001] * 10, stall=0.15)], processes=1).bound
    assert not client_load([_run([0.001] * 10, latency=0.1, stall=0.04)], processes=1).bound
    assert client_load([_run([0.001] * 10, latency=0.1, stall=0.06)], processes=1).reason == "stall"
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
    stalled = ScenarioResult(  # type: ignore[arg-type]
        name="stalled", client_bound=True, client_bound_by="stall", client_stall_s=0.41,
        client_busiest_process_cores=0.2, **common,
    )  # fmt: skip
    warning = stalled.client_warning()
    assert warning is not None
    assert warning.startswith("WARNING stalled: the load generator's event loop stalled for 410 ms")
    assert "though it used only 0.20 core" in warning and "quieter client machine" in warning


def test_a_measured_window_freezes_the_heap_and_measures_its_loops_stalls() -> None:
    """Inside the window a full collection walks only the window's own objects (the heap before it is frozen),
    after it nothing stays frozen; the loop blocked for 0.3 s is a stall of at least that."""
    seen: dict[str, Any] = {}

    async def main() -> None:
        window = MeasuredWindow()
        async with window:
            seen["frozen"] = gc.get_freeze_count()
            await asyncio.sleep(0.05)  # the watch is running
            time.sleep(0.3)  # what a full collection of a big heap, or a starved core, does to the loop
            await asyncio.sleep(0.05)
        seen["stall"] = window.longest_stall_s

    before = gc.get_freeze_count()
    asyncio.run(main())
    assert seen["frozen"] > 1000 and gc.get_freeze_count() == before == 0
    # The watch's wake was due up to a tick after the block began: the stall is the block less up to a tick.
    assert 0.3 - STALL_TICK_S <= seen["stall"] < 10


def test_a_pass_whose_client_stalled_is_run_again(ddtree_sim: SimProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first measured window's loop is blocked for 0.5 s (as a starved core would): every event it read
    meanwhile was stamped late, so the pass does not count; it is run again and the figures are the rerun's."""
    windows: list[MeasuredWindow] = []
    enter = MeasuredWindow.__aenter__

    async def stalled_once(self: MeasuredWindow) -> MeasuredWindow:
        out = await enter(self)
        windows.append(self)
        if len(windows) == 1:
            asyncio.get_running_loop().call_later(0.02, time.sleep, 0.5)
        return out

    monkeypatch.setattr(MeasuredWindow, "__aenter__", stalled_once)
    section = BenchmarkSection(scenarios=(SC,), warmup_requests=0, repeats=2, client_processes=1)
    # A bound of 0.3 s at least: the machine's own hiccups stay under it; the planted stall does not.
    bench = HttpBenchmark(endpoint=Endpoint(base_url=ddtree_sim.url), config=section, min_start_delay_s=0.3)
    result = bench.run_scenario(SC)
    assert windows[0].longest_stall_s >= 0.5 - STALL_TICK_S
    # Two counted passes and every rerun, each in its own window (a busy machine may add a rerun of its own).
    assert result.client_reruns >= 1 and len(windows) == 2 + result.client_reruns
    assert result.client_stall_s is not None and result.client_stall_s < 0.5  # the stalled pass is not counted
    assert len(result.repeats_tok_s) == 2 and result.requests == 2 * SC.requests


@pytest.mark.parametrize("processes", [1, 2])
def test_a_planted_client_stall_makes_tune_run_the_first_counted_pass_again(
    ddtree_sim: SimProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """``TUNE_TEST_CLIENT_STALL`` (the test hook): the first counted pass's client is stalled, in this process or
    in a client process, never the warm-up's; tune runs that pass again, once; the stall file is gone after."""
    stall = tmp_path / "client-stall"
    stall.write_text("0.5")
    monkeypatch.setenv(CLIENT_STALL_ENV, str(stall))
    section = BenchmarkSection(scenarios=(SC,), warmup_requests=2, repeats=2, client_processes=processes)
    bench = HttpBenchmark(endpoint=Endpoint(base_url=ddtree_sim.url), config=section, min_start_delay_s=0.3)
    rows: list[dict[str, object]] = []
    bench._on_requests = rows.extend
    result = bench.run_scenario(SC)
    assert not stall.exists() and not Path(f"{stall}.armed").exists()
    # The first counted pass ran twice (a busy machine may add a rerun of its own, never fewer).
    assert result.client_reruns >= 1 and result.client_processes == processes
    first = [r for r in rows if r["repeat"] == 0]
    assert first[0]["attempt"] == 0 and first[0]["counted"] is False and first[0]["pass_client_stall_s"] >= 0.3
    assert len(result.repeats_tok_s) == 2 and result.requests == 2 * SC.requests
    assert result.client_stall_s is not None and result.client_stall_s < 0.5  # the stalled pass is not counted
