"""One contract for every benchmark: the HTTP load generator against a real simulator, and the in-process model.

Both serve the same launch command (a DDTree config whose scheduler dies, by fault injection, under one heavy
scenario), so each test states what any :class:`~tuner.bench.BaseBenchmark` must do with it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.bench.conftest import DDTREE, FAST
from tuner.bench import (
    BaseBenchmark,
    FirstPasses,
    HttpBenchmark,
    ScenarioResult,
    WarmupPolicy,
    arrival_schedule,
)
from tuner.bench._latency import span_rate
from tuner.config import BenchmarkSection, ReadinessSection, Scenario
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad, Phase
from tuner.sim.inprocess import ModelBenchmark, ModelService, model_readiness
from tuner.sim.testing import SimFleet
from tuner.spec import LaunchSpec
from tuner.stats import Noise, RepeatDecision

#: Light scenarios run; SIXTEEN_LONG's batch outgrows the injected limit and the scheduler dies (a full KV pool
#: would only slow it down: SGLang retracts requests).
FLAGS = [*FAST, *DDTREE, "--mem-fraction-static", "0.72", "--max-running-requests", "16", "--sim-time-scale", "4",
         "--sim-crash-above-batch-tokens", "20000"]  # fmt: skip
ENV = {"SGLANG_DDTREE_MAX_TOPK": "6"}
SECTION = BenchmarkSection(scenarios=(), warmup_requests=1, repeats=3, request_timeout_s=30.0)

LIGHT = Scenario(name="c2-light", concurrency=2, prompt_tokens=64, output_tokens=32, requests=2)
OTHER = Scenario(name="c1-other", concurrency=1, prompt_tokens=32, output_tokens=16, requests=3)
SIXTEEN_LONG = Scenario(name="c16-long", concurrency=16, prompt_tokens=4000, output_tokens=64, requests=16)


@dataclass(frozen=True, kw_only=True)
class Subject:
    """A benchmark bound to a freshly started server, and the two ways the test sees that server's fate."""

    benchmark: BaseBenchmark
    kill: Callable[[], None]
    """Make the server die at once (SIGKILL for a process, a crash for the model)."""
    exited: Callable[[float], bool]
    """Whether the server is gone (waiting up to the given seconds for a process to exit)."""


def _http_subject(tmp_path: Path) -> tuple[Subject, Callable[[], None]]:
    fleet = SimFleet(log_dir=tmp_path)
    sim = fleet.start(*FLAGS, env=ENV)

    def exited(timeout: float) -> bool:
        try:
            sim.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    bench = HttpBenchmark(endpoint=Endpoint(base_url=sim.url), config=SECTION)
    return Subject(benchmark=bench, kill=sim.kill, exited=exited), fleet.close


def _model_subject() -> Subject:
    service = ModelService(base=LaunchSpec(argv=(sys.executable, "-m", "tuner.sim", *FLAGS), env=ENV), load_time_s=0.3)
    # Booted and checked the way the study does it: restart, then readiness reads the log.
    model_readiness(
        service=service,
        restarted=service.restart(label="contract"),
        endpoint=Endpoint(base_url="http://127.0.0.1:1"),
        config=ReadinessSection(),
    )
    return Subject(
        benchmark=ModelBenchmark(service=service, config=SECTION),
        kill=lambda: service.die("Killed"),
        exited=lambda timeout: not service.state().running,
    )


@pytest.fixture(params=["http", "model"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    if request.param == "model":
        made, teardown = _model_subject(), (lambda: None)
    else:
        made, teardown = _http_subject(tmp_path)
    try:
        yield made
    finally:
        made.benchmark.close()
        teardown()


def _check_result(result: ScenarioResult, scenario: Scenario) -> None:
    repeats = SECTION.repeats
    assert isinstance(result, ScenarioResult)
    # The load as set: a closed loop's streams, or an open loop's rate and cap (never its request count).
    if scenario.open_loop:
        assert result.rate == scenario.rate and result.concurrency == scenario.max_concurrency
    else:
        assert result.name == scenario.name and result.concurrency == scenario.concurrency and result.rate is None
    assert result.name == scenario.name
    assert len(result.repeats_tok_s) == repeats
    assert all(x > 0 for x in result.repeats_tok_s)
    assert result.output_tok_s > 0
    assert result.score <= result.output_tok_s
    assert result.requests == scenario.requests * repeats
    assert result.errors == 0
    assert result.output_tokens == scenario.requests * scenario.output_tokens * repeats
    assert result.warmup_requests == SECTION.warmup_requests
    # DDTree drafts several tokens per step; the simulator reports its acceptance either way.
    assert result.accept_length is not None and result.accept_length > 1.0
    assert result.accept_method is not None
    # Per-stream figures, per repeat and summarised, for the per_stream_tok_s metric.
    assert len(result.repeats_per_stream_tok_s) == repeats
    assert result.per_stream_tok_s > 0
    assert result.per_stream_score is not None and result.per_stream_score <= result.per_stream_tok_s


def test_run_scenario_summarises_every_repeat(subject: Subject) -> None:
    for scenario in (LIGHT, OTHER):  # one benchmark, several scenarios: nothing carries over between them
        _check_result(subject.benchmark.run_scenario(scenario), scenario)


@pytest.mark.parametrize("when", ["before any scenario", "after a scenario"])
def test_a_killed_server_raises_died_under_load(subject: Subject, when: str) -> None:
    if when == "after a scenario":
        _check_result(subject.benchmark.run_scenario(LIGHT), LIGHT)
    subject.kill()
    assert subject.exited(30.0)
    with pytest.raises(DiedUnderLoad) as info:
        subject.benchmark.run_scenario(OTHER)
    assert info.value.phase is Phase.BENCHMARK
    assert f"scenario {OTHER.name}" in info.value.reason
    assert info.value.evidence


def test_a_server_crashing_mid_scenario_raises_died_under_load(subject: Subject) -> None:
    _check_result(subject.benchmark.run_scenario(LIGHT), LIGHT)  # the config itself serves
    with pytest.raises(DiedUnderLoad) as info:
        subject.benchmark.run_scenario(SIXTEEN_LONG)
    assert info.value.phase is Phase.BENCHMARK
    assert info.value.reason.startswith(f"died under load in scenario {SIXTEEN_LONG.name}: ")
    assert "no longer answers /health" in info.value.reason
    assert subject.exited(30.0), "the scheduler's crash must take the server down"


def test_close_is_idempotent_and_leaves_the_server_alone(subject: Subject) -> None:
    _check_result(subject.benchmark.run_scenario(LIGHT), LIGHT)
    subject.benchmark.close()
    subject.benchmark.close()
    assert not subject.exited(0.0), "close() releases clients, never the server"


def _settled(slowdown: float) -> FirstPasses:
    """Five first passes ``slowdown`` slower than the repeats after them, with a 1% noise."""
    pair = (100.0 * (1.0 - slowdown), (100.0, 100.0))
    return FirstPasses(pairs=(pair,) * 5, noise=Noise(ss=0.0001 * 20, df=20), warmup_s=1.0, pass_s=1.0)


def test_auto_warmup_runs_none_until_the_study_shows_first_passes_are_slower(subject: Subject) -> None:
    bench = subject.benchmark
    bench.warmup_policy = WarmupPolicy(mode="auto", tolerance=0.03)
    # No study: the warm-up is one measured pass, never counted.
    probed = bench.run_scenario(LIGHT)
    _check_result(dataclasses.replace(probed, warmup_requests=SECTION.warmup_requests), LIGHT)
    assert probed.warmup == "probe" and probed.warmup_requests == LIGHT.requests
    assert probed.first_pass_tok_s is not None and probed.first_pass_tok_s > 0
    # A study that saw first passes as fast as the rest (or none yet): no warm-up, the first pass counts.
    for seen in (_settled(0.0), FirstPasses()):
        bench.use_first_passes(lambda name, seen=seen: seen)
        skipped = bench.run_scenario(LIGHT)
        _check_result(dataclasses.replace(skipped, warmup_requests=SECTION.warmup_requests), LIGHT)
        assert skipped.warmup == "none" and skipped.warmup_requests == 0 and skipped.first_pass_tok_s is None
    # One that saw them 20% slower warms up (with the probe: sized like the scenario).
    bench.use_first_passes(lambda name: _settled(0.2))
    kept = bench.run_scenario(LIGHT)
    assert kept.warmup == "probe" and kept.first_pass_tok_s is not None


def test_extend_scenario_adds_one_counted_repeat_to_the_summary(subject: Subject) -> None:
    bench = subject.benchmark
    first = bench.run_scenario(LIGHT).stopped_by(RepeatDecision(verdict="objective", reason="test"))
    _check_result(first, LIGHT)
    bench.run_scenario(OTHER)  # another scenario in between, as the objective's repeats come after the first pass
    more = bench.extend_scenario(LIGHT, first)
    n = SECTION.repeats + 1
    assert more.name == LIGHT.name and more.repeats_tok_s[: n - 1] == first.repeats_tok_s
    assert len(more.repeats_tok_s) == n and all(x > 0 for x in more.repeats_tok_s)
    assert len(more.repeats_per_stream_tok_s) == n
    assert more.requests == LIGHT.requests * n and more.output_tokens == LIGHT.requests * LIGHT.output_tokens * n
    assert more.seconds > first.seconds
    assert more.half_width is not None and more.score <= more.point  # re-summarised over every repeat
    # What ran before the counted repeats is the first pass's, and so is why the scenario stopped.
    assert (more.warmup, more.warmup_requests, more.warmup_s) == (first.warmup, first.warmup_requests, first.warmup_s)
    assert more.stopped == "objective"
    assert more.accept_length is not None and more.accept_length > 1.0


def test_extend_scenario_of_a_dead_server_raises_died_under_load(subject: Subject) -> None:
    first = subject.benchmark.run_scenario(LIGHT)
    subject.kill()
    assert subject.exited(30.0)
    with pytest.raises(DiedUnderLoad) as info:
        subject.benchmark.extend_scenario(LIGHT, first)
    assert info.value.phase is Phase.BENCHMARK


OPEN = Scenario(name="r8-open", concurrency=12, rate=8.0, prompt_tokens=64, output_tokens=16, requests=12)


def test_an_open_loop_scenario_reports_its_rates_and_per_request_latency(subject: Subject) -> None:
    """Open loop: the arrivals drawn from the benchmark seed, and the figures a service promises."""
    result = subject.benchmark.run_scenario(OPEN)
    _check_result(result, OPEN)
    # Each repeat draws its own arrivals (the seed plus the repeat): the offered rate is one of theirs.
    schedules = [arrival_schedule(OPEN, count=OPEN.requests, seed=SECTION.seed + r) or [] for r in range(3)]
    offered = [span_rate(s) or 0.0 for s in schedules]
    assert result.offered_rps is not None and min(offered) * 0.999 <= result.offered_rps <= max(offered) * 1.001
    assert result.achieved_rps is not None and result.achieved_rps > 0
    for p in (50, 90, 99):
        ttft, tpot, e2e = (getattr(result, f"{k}_p{p}_s") for k in ("ttft", "tpot", "e2e"))
        assert 0 < ttft < e2e and 0 < tpot < e2e
    assert result.ttft_p50_s <= result.ttft_p90_s <= result.ttft_p99_s  # type: ignore[operator]
