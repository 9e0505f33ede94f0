"""Client processes: the load spread over worker processes against a real simulator, merged exactly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures_rerun import ClientRerun
from tuner.bench import STREAM_CLIENTS, HttpBenchmark, stream_client
from tuner.bench._load import LoadTarget
from tuner.bench._record import RequestSpec
from tuner.bench._workers import InProcessRunner, ProcessRunner, _split, choose_processes
from tuner.config import BenchmarkSection, Scenario, load_config
from tuner.endpoint import Endpoint
from tuner.errors import ConfigError, DiedUnderLoad
from tuner.sim.testing import SimProcess

ROOT = Path(__file__).resolve().parents[2]
WORKER_MODULE = b"tuner.bench._workers"


def worker_children(parent: int | None = None) -> set[int]:
    """Live client worker processes whose parent is ``parent`` (default: this test process), from /proc."""
    parent = os.getpid() if parent is None else parent
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat[0] != "Z" and int(stat[1]) == parent and WORKER_MODULE in cmdline:
            found.add(int(entry.name))
    return found


def all_workers_with_pids(pids: set[int]) -> set[int]:
    """Which of ``pids`` still run the worker module (any parent; zombies count as gone)."""
    alive = set()
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[0] != "Z" and WORKER_MODULE in cmdline:
            alive.add(pid)
    return alive


def _section(sc: Scenario, processes: int | str, **kw: object) -> BenchmarkSection:
    return BenchmarkSection(
        scenarios=(sc,),
        warmup_requests=int(kw.pop("warmup", 2)),  # type: ignore[call-overload]
        repeats=int(kw.pop("repeats", 2)),  # type: ignore[call-overload]
        request_timeout_s=float(kw.pop("timeout", 30.0)),  # type: ignore[arg-type]
        client_processes=processes,
    )


def _specs(n: int, max_tokens: int) -> list[RequestSpec]:
    return [RequestSpec(index=i, prompt=f"prompt number {i} " * 8, max_tokens=max_tokens) for i in range(n)]


@pytest.fixture
def plain_sim(start_sim: Callable[..., SimProcess]) -> SimProcess:
    """No speculation: one token per event, deterministic counts."""
    return start_sim("--sim-time-scale", "4")


def test_split_gives_each_process_requests_in_proportion_to_its_streams() -> None:
    parts = _split(16, 8, 3)  # streams 3, 3, 2
    assert [len(p) for p in parts] == [6, 6, 4]
    assert sorted(i for p in parts for i in p) == list(range(16))
    assert _split(5, 4, 2) == [[0, 2, 4], [1, 3]]


def test_choose_processes() -> None:
    assert choose_processes("auto", concurrency=16, cores=8) == 1
    assert choose_processes("auto", concurrency=64, cores=8) == 4
    assert choose_processes("auto", concurrency=256, cores=2) == 2  # capped by cores
    assert choose_processes(6, concurrency=4) == 4  # never more processes than streams
    with pytest.raises(ValueError, match="'auto' or an integer"):
        choose_processes(0, concurrency=4)


@pytest.mark.parametrize("http_client", STREAM_CLIENTS)
def test_processes_run_the_same_requests_as_one_process(plain_sim: SimProcess, http_client: str) -> None:
    target = LoadTarget(
        url=plain_sim.url + "/v1/completions",
        headers={},
        api="completions",
        model="default",
        timeout_s=30.0,
        client=stream_client(http_client),
    )
    specs = _specs(12, 24)

    async def both() -> tuple[object, object]:
        one = InProcessRunner(target=target, streams=6)
        many = ProcessRunner(target=target, streams=6, processes=3)
        try:
            await one.start()
            await many.start()
            assert len(worker_children()) == 3
            return await one.run(specs, concurrency=6), await many.run(specs, concurrency=6)
        finally:
            await one.aclose()
            await many.aclose()

    single, merged = asyncio.run(both())
    assert not worker_children()
    by_index = {r.index: r for r in single.records}  # type: ignore[attr-defined]
    assert sorted(by_index) == sorted(r.index for r in merged.records) == list(range(12))  # type: ignore[attr-defined]
    for rec in merged.records:  # type: ignore[attr-defined]
        ref = by_index[rec.index]
        assert rec.ok and ref.ok
        assert (rec.output_tokens, rec.event_tokens, rec.prompt_tokens) == (
            ref.output_tokens,
            ref.event_tokens,
            ref.prompt_tokens,
        )
        # One time axis: every record lies inside the merged window.
        assert merged.t_begin <= rec.t_due <= rec.t_start <= rec.t_sent < rec.t_end <= merged.t_end  # type: ignore[attr-defined]
    assert len(merged.cpu_s) == 3 and len(single.cpu_s) == 1  # type: ignore[attr-defined]
    assert merged.started == 12 and merged.cancelled == 0  # type: ignore[attr-defined]


def test_multi_process_scenario_summarises_like_one_process(plain_sim: SimProcess) -> None:
    sc = Scenario(name="c4", concurrency=4, prompt_tokens=32, output_tokens=48, requests=8)
    ep = Endpoint(base_url=plain_sim.url)
    one = HttpBenchmark(endpoint=ep, config=_section(sc, 1)).run_scenario(sc)
    two = HttpBenchmark(endpoint=ep, config=_section(sc, 2)).run_scenario(sc)
    assert not worker_children()
    for field in ("requests", "output_tokens", "prompt_tokens", "tokens_from_usage", "short_requests", "errors"):
        assert getattr(two, field) == getattr(one, field), field
    assert len(two.repeats_tok_s) == len(one.repeats_tok_s) == 2
    # Same pacing server, same statistics: the figures agree (loosely: the machine is shared).
    assert two.per_stream_tok_s == pytest.approx(one.per_stream_tok_s, rel=0.25)
    assert two.output_tok_s == pytest.approx(one.output_tok_s, rel=0.25)


def test_a_failure_in_one_process_stops_all_and_is_died_under_load(start_sim: Callable[..., SimProcess]) -> None:
    sim = start_sim("--sim-time-scale", "4", "--sim-malformed-chunks", "0.05")
    sc = Scenario(name="c4-bad", concurrency=4, prompt_tokens=16, output_tokens=64, requests=8)
    with pytest.raises(DiedUnderLoad) as info:
        HttpBenchmark(endpoint=Endpoint(base_url=sim.url), config=_section(sc, 2, warmup=0)).run_scenario(sc)
    assert "malformed chunk" in info.value.reason
    assert not worker_children()


def test_a_worker_that_dies_fails_the_scenario(plain_sim: SimProcess, client_rerun: ClientRerun) -> None:
    """A client process killed after the first counted pass (a pass run again first, when its client stalled):
    the next pass fails."""
    sc = Scenario(name="c4", concurrency=4, prompt_tokens=16, output_tokens=32, requests=4)
    bench = HttpBenchmark(endpoint=Endpoint(base_url=plain_sim.url), config=_section(sc, 2, warmup=0, repeats=3))
    killed: list[int] = []

    def kill_a_worker(scenario: Scenario, repeat: int, so_far: object) -> None:
        if not killed:
            pid = min(worker_children())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    bench._on_repeat = kill_a_worker
    with pytest.raises(DiedUnderLoad) as info:
        bench.run_scenario(sc)
    assert "client process died" in info.value.reason
    assert f"load-generator process {killed[0]} exited" in info.value.evidence
    assert not worker_children()
    client_rerun.check()


def test_workers_die_with_their_parent(plain_sim: SimProcess) -> None:
    """A parent killed outright (no cleanup at all) leaves no worker behind."""
    code = f"""
import asyncio, sys
from tuner.bench import stream_client
from tuner.bench._load import LoadTarget
from tuner.bench._workers import ProcessRunner
async def main():
    t = LoadTarget(url="{plain_sim.url}/v1/completions", headers={{}}, api="completions", model="m", timeout_s=30,
                   client=stream_client("aiohttp"))
    r = ProcessRunner(target=t, streams=2, processes=2)
    await r.start()
    print(" ".join(map(str, r.pids)), flush=True)
    await asyncio.sleep(3600)
asyncio.run(main())
"""
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        pids = {int(x) for x in parent.stdout.readline().split()}
        assert len(pids) == 2 and all_workers_with_pids(pids) == pids
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while all_workers_with_pids(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not all_workers_with_pids(pids)


def _study_with(tmp_path: Path, line: str) -> Path:
    text = (ROOT / "studies" / "demo.toml").read_text().replace("[benchmark]\n", f"[benchmark]\n{line}\n", 1)
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("value", ["0", '"many"', "true", "257", "1.5"])
def test_client_processes_config_errors(tmp_path: Path, value: str) -> None:
    text = (
        (ROOT / "studies" / "demo.toml")
        .read_text()
        .replace("[benchmark]\n", f"[benchmark]\nclient_processes = {value}\n")
    )
    path = tmp_path / "study.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == "benchmark.client_processes"
    assert '"auto" or a whole number' in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(("value", "expected"), [('"auto"', "auto"), ("3", 3)])
def test_client_processes_config(tmp_path: Path, value: str, expected: object) -> None:
    text = (
        (ROOT / "studies" / "demo.toml")
        .read_text()
        .replace("[benchmark]\n", f"[benchmark]\nclient_processes = {value}\n")
    )
    path = tmp_path / "study.toml"
    path.write_text(text)
    assert load_config(path).benchmark.client_processes == expected
