"""The configuration is verified on the process that really serves, and before readiness when it never arrives.

Real processes throughout: the simulator behind launch wrapper scripts, managed by the real ProcessService.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures_sshd import SimUnit, sim_argv

from tuner.config import ReadinessSection
from tuner.endpoint import Endpoint
from tuner.errors import ConfigNotApplied, Phase, StartFailed, TrialFailure
from tuner.sim.testing import READY_MARKER
from tuner.spec import LaunchSpec, spec_matches
from tuner.target import Target
from tuner.target.services import BaseService, ProcessService

SIM = (sys.executable, "-u", "-m", "tuner.sim")
# The readiness wait is far longer than any test: a failure must come from a verify step, never a timeout.
PATIENT = ReadinessSection(timeout_s=3600, poll_interval_s=0.05, request_timeout_s=5)

MakeService = Callable[..., ProcessService]


def wrapper(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "run.sh"
    script.write_text(f'#!/bin/sh\npython="{sys.executable}"\n{body}\n')
    script.chmod(0o755)
    return script


def wrapped(spec: LaunchSpec, script: Path) -> LaunchSpec:
    """``spec`` launched as ``run.sh FLAGS...`` instead of ``python -u -m tuner.sim FLAGS...``."""
    assert spec.argv[: len(SIM)] == SIM
    return LaunchSpec(argv=(str(script), *spec.argv[len(SIM) :]), env=spec.env)


def trial_of(base: LaunchSpec) -> LaunchSpec:
    """A trial's configuration: another DDTree budget and top-k cap than the base."""
    argv = list(base.argv)
    argv[argv.index("--speculative-ddtree-budget") + 1] = "8"
    return LaunchSpec(argv=tuple(argv), env={**base.env, "SGLANG_DDTREE_MAX_TOPK": "3"})


def target_for(service: BaseService, base: LaunchSpec, port: int, config: ReadinessSection = PATIENT) -> Target:
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}")
    return Target(host=None, service=service, endpoint=endpoint, base=base, readiness_config=config)


def log_of(target: Target, failure: TrialFailure) -> str:
    """The log of the process ``failure`` is about (the restart ``bring_up`` hands on with it)."""
    assert failure.restarted is not None
    return target.service.read_log(failure.restarted.log_cursor).text


def test_a_wrapper_that_drops_the_flags_fails_before_readiness(
    tmp_path: Path, port: int, sim_spec: Callable[..., LaunchSpec], process_service: MakeService
) -> None:
    # The wrapper execs the server with flags of its own: the trial's never reach it. Its server would take
    # ten minutes to load: only a check before readiness can fail this trial while the test runs.
    script = wrapper(tmp_path, f'exec "$python" -u -m tuner.sim --host 127.0.0.1 --port {port} --sim-load-time 600')
    base = wrapped(sim_spec(port), script)
    target = target_for(process_service(base), base, port)
    with pytest.raises(ConfigNotApplied) as caught:
        target.bring_up(trial_of(base), label="trial-1")
    failure = caught.value
    assert failure.phase == Phase.APPLY
    assert failure.reason.startswith("config not applied: argv is ")
    assert "readiness was not awaited" in failure.reason, "the check before readiness failed it"
    assert "--speculative-ddtree-budget 8" in failure.evidence
    # Still loading: readiness never saw it serve (the simulator logs this marker after its load time).
    assert failure.restarted is not None and target.service.is_alive(failure.restarted.new)
    assert "Load weight end" not in log_of(target, failure)


@pytest.mark.parametrize(
    "body",
    [
        '"$python" -u -m tuner.sim --host 127.0.0.1 --port "$PORT" --sim-load-time 0.2',
        'env -u SGLANG_DDTREE_MAX_TOPK "$python" -u -m tuner.sim "$@"',
    ],
    ids=["drops-flags", "drops-env"],
)
def test_a_wrapper_whose_child_serves_without_the_config_fails_on_the_socket_owner(
    body: str, tmp_path: Path, port: int, sim_spec: Callable[..., LaunchSpec], process_service: MakeService
) -> None:
    # No exec: the wrapper (the recorded pid) still carries the trial's flags and environment, the server it
    # runs as a child does not. Only the process holding the port tells the truth.
    script = wrapper(tmp_path, f"PORT={port}\n{body}")
    base = wrapped(sim_spec(port), script)
    service = process_service(base)
    target = target_for(service, base, port)
    trial = trial_of(base)
    with pytest.raises(ConfigNotApplied) as caught:
        target.bring_up(trial, label="trial-1")
    assert caught.value.phase == Phase.APPLY
    assert "readiness was not awaited" not in caught.value.reason, "it served: the check after readiness failed it"
    assert READY_MARKER in log_of(target, caught.value)
    recorded = service.running_spec()
    assert recorded is not None and recorded.argv[1] == str(script)
    assert spec_matches(trial, recorded) == [], "the wrapper itself carries the configuration"


def test_a_wrapper_that_runs_the_server_as_a_child_passes(
    tmp_path: Path, port: int, sim_spec: Callable[..., LaunchSpec], process_service: MakeService
) -> None:
    script = wrapper(tmp_path, '"$python" -u -m tuner.sim "$@"\necho "wrapper: server exited with $?"')
    base = wrapped(sim_spec(port), script)
    service = process_service(base)
    trial = trial_of(base)
    up = target_for(service, base, port).bring_up(trial, label="trial-1")
    assert up.settle_reads == 1
    recorded = service.running_spec()
    assert recorded is not None and recorded.argv[1] == str(script), "the recorded pid is the wrapper"
    # The server is its child, found by the listening socket, and carries the flags and the environment.
    (owner,) = service.running_specs(port=port)
    assert owner.argv[: len(SIM)] == SIM
    assert spec_matches(trial, owner) == []
    assert owner.env["SGLANG_DDTREE_MAX_TOPK"] == "3"


@pytest.mark.parametrize("launch", ["direct", "exec-wrapper", "child-wrapper"])
def test_a_config_that_arrived_costs_one_read(
    launch: str, tmp_path: Path, port: int, sim_spec: Callable[..., LaunchSpec], process_service: MakeService
) -> None:
    base = sim_spec(port)
    if launch != "direct":
        body = '"$python" -u -m tuner.sim "$@"'
        base = wrapped(base, wrapper(tmp_path, ("exec " if launch == "exec-wrapper" else "") + body))
    target = target_for(process_service(base), base, port, ReadinessSection(timeout_s=3600, poll_interval_s=0.05))
    up = target.bring_up(trial_of(base), label="trial-1")
    # Popen returns once the server's own program runs: its first read matches. A wrapper's shell runs first and
    # execs or forks the server when the machine lets it: a read may catch the shell (the window's purpose).
    if launch == "direct":
        assert up.settle_reads == 1, "the first read matched: the settle window cost nothing"
    else:
        assert up.settle_reads >= 1
    restored = target.bring_up(None, label="restored")
    assert restored.settle_reads == 0, "the base command is not compared (the manager may run it its own way)"


def test_a_server_that_dies_at_once_is_reported_by_readiness_not_as_not_applied(
    tmp_path: Path, port: int, sim_spec: Callable[..., LaunchSpec], process_service: MakeService
) -> None:
    # The process runs without the trial's flags, then exits: a failed start, whatever its argv said.
    script = wrapper(tmp_path, "exec \"$python\" -c 'import sys, time; time.sleep(0.5); sys.exit(3)'")
    base = wrapped(sim_spec(port), script)
    config = ReadinessSection(timeout_s=3600, poll_interval_s=0.05, verify_settle_s=3600)
    target = target_for(process_service(base), base, port, config)
    with pytest.raises(StartFailed) as caught:
        target.bring_up(trial_of(base), label="trial-1")
    assert "status 3" in caught.value.reason, caught.value.reason


def test_a_drop_in_overridden_by_a_later_one_fails_before_readiness(sim_unit: SimUnit) -> None:
    # Someone's zz-override.conf sorts after tune's drop-in and sets ExecStart again: tune's flags never run.
    from tuner.config import SystemdSection
    from tuner.target.services._systemd import SystemdService, systemd_quote

    override = sim_argv(sim_unit.port, "--sim-load-time", "600")
    dropins = sim_unit.path.parent / f"{sim_unit.name}.d"
    dropins.mkdir(exist_ok=True)
    (dropins / "zz-override.conf").write_text(
        "[Service]\nExecStart=\nExecStart=" + " ".join(systemd_quote(a) for a in override) + "\n"
    )
    base = LaunchSpec(argv=sim_unit.argv, env=sim_unit.env)
    host = sim_unit.server.host()
    section = SystemdSection(unit=sim_unit.name, unit_dir=str(sim_unit.path.parent))
    service = SystemdService(host=host, section=section, base=base)
    try:
        target = target_for(service, base, sim_unit.port)
        with pytest.raises(ConfigNotApplied) as caught:
            target.bring_up(trial_of(base), label="trial-1")
        assert caught.value.phase == Phase.APPLY
        assert caught.value.reason.startswith("config not applied: argv is "), caught.value.reason
        assert "--sim-load-time 600" in caught.value.reason.split(", expected ")[0]
        assert "readiness was not awaited" in caught.value.reason
        failure = caught.value
        assert failure.restarted is not None and service.is_alive(failure.restarted.new)
        assert "Load weight end" not in log_of(target, failure), "still loading: readiness never saw it serve"
    finally:
        service.stop()
        service.revert()
        host.close()
