"""One contract for every correctness gate: HumanEval against a real simulator and sandbox, and the model's gate.

Both are started on the same launch command: a normal DDTree config, or one in the simulator's documented
corrupting region (:func:`tuner.sim.corrupts_code`: DDTree top-k >= 9 with budget >= 24), where every answer
is wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tuner.config import ReadinessSection
from tuner.config._gate import DEFAULT_TASKS, GateSection
from tuner.endpoint import Endpoint
from tuner.errors import GateFailed
from tuner.gate import BaseGate, GateResult, HumanEvalGate, check_gate
from tuner.sim import ServerConfig, corrupts_code
from tuner.sim.inprocess import ModelGate, ModelService, model_readiness
from tuner.sim.testing import SimFleet
from tuner.spec import LaunchSpec

NORMAL = [
    "--host", "127.0.0.1", "--sim-load-time", "0.3", "--sim-time-scale", "20",
    "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12",
    "--speculative-dflash-block-size", "8", "--speculative-dflash-draft-window-size", "2048",
]  # fmt: skip
NORMAL_ENV = {"SGLANG_DDTREE_MAX_TOPK": "6"}
# Fewer running requests so the wider verify buffers still fit the simulated GPU.
CORRUPTING = [*NORMAL, "--speculative-ddtree-budget", "24", "--max-running-requests", "16"]
CORRUPTING_ENV = {"SGLANG_DDTREE_MAX_TOPK": "9"}

SECTION = GateSection(tasks=DEFAULT_TASKS[:2], min_passed=2, concurrency=2)


@dataclass(frozen=True, kw_only=True)
class Subject:
    gate: BaseGate
    kill: Callable[[], None]
    """Make the server die at once."""


Start = Callable[[Sequence[str], Mapping[str, str]], Subject]


def _humaneval(fleet: SimFleet) -> Start:
    def start(flags: Sequence[str], env: Mapping[str, str]) -> Subject:
        sim = fleet.start(*flags, env=env)
        # The default judge: the namespace sandbox where the machine allows it, else rlimits.
        return Subject(gate=HumanEvalGate(endpoint=Endpoint(base_url=sim.url), section=SECTION), kill=sim.kill)

    return start


def _model(flags: Sequence[str], env: Mapping[str, str]) -> Subject:
    service = ModelService(base=LaunchSpec(argv=(sys.executable, "-m", "tuner.sim", *flags), env=env), load_time_s=0.3)
    model_readiness(
        service=service,
        restarted=service.restart(label="contract"),
        endpoint=Endpoint(base_url="http://127.0.0.1:1"),
        config=ReadinessSection(),
    )
    return Subject(gate=ModelGate(service=service, section=SECTION), kill=lambda: service.die("Killed"))


@pytest.fixture(params=["humaneval", "model"])
def start(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Start]:
    """``start(flags, env)``: a gate bound to a ready server running that launch command."""
    fleet = SimFleet(log_dir=tmp_path)
    started: list[Subject] = []

    def tracked(flags: Sequence[str], env: Mapping[str, str]) -> Subject:
        made = (_humaneval(fleet) if request.param == "humaneval" else _model)(flags, env)
        started.append(made)
        return made

    try:
        yield tracked
    finally:
        for made in started:
            made.gate.close()
        fleet.close()


def _check_shape(result: GateResult) -> None:
    assert isinstance(result, GateResult)
    assert result.total == len(SECTION.tasks)
    assert [o.task_id for o in result.outcomes] == list(SECTION.tasks)  # one outcome per problem, in order
    assert result.passed == sum(o.passed for o in result.outcomes)
    assert len(result.failures) == result.total - result.passed


def test_the_configs_are_on_either_side_of_the_corrupting_region() -> None:
    assert not corrupts_code(ServerConfig.from_argv(NORMAL, NORMAL_ENV))
    assert corrupts_code(ServerConfig.from_argv(CORRUPTING, CORRUPTING_ENV))


def test_a_normal_config_passes_every_problem(start: Start) -> None:
    result = start(NORMAL, NORMAL_ENV).gate.run()
    _check_shape(result)
    assert result.passed == result.total, result.summary()
    assert all(o.reason == "" for o in result.outcomes)
    check_gate(result, SECTION)  # does not raise


def test_a_corrupting_config_fails_every_problem_with_a_reason(start: Start) -> None:
    result = start(CORRUPTING, CORRUPTING_ENV).gate.run()
    _check_shape(result)
    assert result.passed == 0, result.summary()
    for outcome in result.outcomes:
        assert not outcome.passed and outcome.reason
        assert not outcome.reason.startswith("request failed"), "a wrong answer, not an unreachable server"
    with pytest.raises(GateFailed) as info:
        check_gate(result, SECTION)
    assert info.value.reason == f"correctness gate: 0/{result.total} passed (need {SECTION.min_passed})"
    for task in SECTION.tasks:
        assert task in info.value.evidence


def test_a_dead_server_fails_every_problem_as_a_request_failure(start: Start) -> None:
    subject = start(NORMAL, NORMAL_ENV)
    subject.kill()
    result = subject.gate.run()
    _check_shape(result)
    assert result.passed == 0
    assert all(o.reason.startswith("request failed") for o in result.outcomes), result.summary()


def test_close_is_idempotent(start: Start) -> None:
    gate = start(NORMAL, NORMAL_ENV).gate
    assert gate.run().passed == len(SECTION.tasks)
    gate.close()
    gate.close()
