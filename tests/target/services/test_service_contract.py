"""One contract for every service manager: plain process (local, over SSH), systemd unit over SSH, the model."""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fixtures_sshd import Sshd, free_port, sim_argv, write_sim_unit

from tuner.config import ReadinessSection, SystemdSection
from tuner.endpoint import Endpoint
from tuner.sim.inprocess import ModelService, model_readiness
from tuner.spec import LaunchSpec, spec_matches
from tuner.target.hosts import BaseHost, LocalHost
from tuner.target.readiness import ReadinessCheck, wait_ready
from tuner.target.services import BaseService, ProcessService, Restarted
from tuner.target.services._systemd import SystemdService

READY = ReadinessSection(timeout_s=30, poll_interval_s=0.05, request_timeout_s=5)


@dataclass
class Managed:
    service: BaseService
    base: LaunchSpec
    port: int
    unit_file: Path | None = None
    readiness: ReadinessCheck = wait_ready
    sees_sockets: bool = True
    """Whether the manager can tell which process holds a port (``serves`` answers True/False, not None)."""

    def spec(self, *extra: str, env: dict[str, str] | None = None) -> LaunchSpec:
        """The base spec with flags replaced (same port) and environment overrides."""
        argv = list(self.base.argv)
        for flag, value in zip(extra[::2], extra[1::2], strict=True):
            i = argv.index(flag)
            argv[i + 1] = value
        return LaunchSpec(argv=tuple(argv), env={**self.base.env, **(env or {})})


@pytest.fixture(params=["process-local", "process-ssh", "systemd-ssh", "model"])
def managed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Managed]:
    kind: str = request.param
    if kind == "model":
        yield from _model()
        return
    host: BaseHost
    if kind == "process-local":
        host = LocalHost()
    else:
        server: Sshd = request.getfixturevalue("sshd")
        host = server.host()  # type: ignore[assignment]
    unit_file = None
    if kind == "systemd-ssh":
        unit = write_sim_unit(server)
        base = LaunchSpec(argv=unit.argv, env=unit.env)
        section = SystemdSection(unit=unit.name, unit_dir=str(unit.path.parent))
        service: BaseService = SystemdService(host=host, section=section, base=base)
        port, unit_file = unit.port, unit.path
    else:
        port = free_port()
        base = LaunchSpec(argv=sim_argv(port), env={"SGLANG_DDTREE_MAX_TOPK": "6"})
        service = ProcessService(host=host, base=base, log_dir=str(tmp_path / "logs"), stop_grace_s=5)
    try:
        yield Managed(service=service, base=base, port=port, unit_file=unit_file)
    finally:
        try:
            service.stop()
            service.revert()
        finally:
            host.close()


def _model() -> Iterator[Managed]:
    # The in-process model of the simulator: the same command line, its log read by the study's readiness.
    port = free_port()
    base = LaunchSpec(argv=sim_argv(port), env={"SGLANG_DDTREE_MAX_TOPK": "6"})
    service = ModelService(base=base, load_time_s=0.3)
    try:
        yield Managed(service=service, base=base, port=port, readiness=model_readiness, sees_sockets=False)
    finally:
        service.stop()
        service.revert()


def _ready(m: Managed, restarted: Restarted) -> None:
    m.readiness(
        service=m.service,
        restarted=restarted,
        endpoint=Endpoint(base_url=f"http://127.0.0.1:{m.port}"),
        config=READY,
    )


def test_lifecycle(managed: Managed) -> None:
    m = managed
    svc = m.service
    before = hashlib.sha256(m.unit_file.read_bytes()).hexdigest() if m.unit_file else None

    first = svc.restart(label="baseline")
    _ready(m, first)
    assert svc.is_alive(first.new)
    assert svc.state().running

    spec = m.spec("--speculative-ddtree-budget", "7", env={"SGLANG_DDTREE_MAX_TOPK": "3", "TUNE_MARK": "a b$c"})
    svc.apply(spec)
    assert svc.is_alive(first.new), "apply must not touch the running server"
    second = svc.restart(label="trial-1")
    assert second.old == first.new
    assert second.new != first.new
    _ready(m, second)
    assert not svc.is_alive(first.new)
    assert svc.is_alive(second.new)

    running = svc.running_spec()
    assert running is not None
    assert spec_matches(spec, running) == []
    assert running.env["SGLANG_DDTREE_MAX_TOPK"] == "3"  # the environment is part of the configuration
    assert running.env["TUNE_MARK"] == "a b$c"
    # The process that holds the port (or, on a port nobody holds, the live process's tree) carries it too.
    assert any(spec_matches(spec, s) == [] for s in svc.running_specs(port=m.port))
    assert any(spec_matches(spec, s) == [] for s in svc.running_specs(port=free_port()))

    log = svc.read_log(second.log_cursor).text
    assert "Load weight end" in log
    assert "The server is fired up and ready to roll!" in log
    # Following the log from its cursor returns only what is new.
    chunk = svc.read_log(second.log_cursor)
    later = svc.read_log(chunk.cursor)
    assert "ready to roll" not in later.text
    # Where a person reads the whole log, as a failed start names it: the file of this start, the unit's
    # journal, or nowhere (the in-process model has no log of its own).
    where = svc.log_location()
    if isinstance(svc, ProcessService):
        assert where is not None and where.split(" on ")[0].endswith("/trial-1.log")
    elif isinstance(svc, SystemdService):
        assert where is not None and where.startswith(f"`journalctl -u {svc.unit}`")
    else:
        assert where is None

    svc.stop()
    assert not svc.is_alive(second.new)
    assert not svc.state().running
    assert svc.running_spec() is None

    svc.revert()
    third = svc.restart(label="restored")
    _ready(m, third)
    restored = svc.running_spec()
    assert restored is not None and spec_matches(m.base, restored) == []
    svc.stop()
    if m.unit_file is not None:
        assert hashlib.sha256(m.unit_file.read_bytes()).hexdigest() == before  # byte-identical unit


# Tab/newline are left out: systemd C-unescapes "\t" in ExecStart but systemctl3 (shlex) does not; the
# systemd quoting of control characters is covered by tests/services/test_systemd_quoting.py.
METACHARACTERS = ("a;rm -rf x", "it's `id` | cat & 'q'", "two  spaces", "#not-a-comment", ";", "100% > 50%")


def test_metacharacters_stay_one_literal_argument(managed: Managed) -> None:
    # The simulator accepts any string for --served-model-name (the last one wins): every value must reach
    # the process's argv as one untouched argument.
    m = managed
    extra = [a for value in METACHARACTERS for a in ("--served-model-name", value)]
    spec = LaunchSpec(argv=(*m.base.argv, *extra), env=dict(m.base.env))
    m.service.apply(spec)
    restarted = m.service.restart(label="meta")
    _ready(m, restarted)
    running = m.service.running_spec()
    assert running is not None
    values = [running.argv[i + 1] for i, a in enumerate(running.argv) if a == "--served-model-name"]
    assert values == list(METACHARACTERS)
    assert spec_matches(spec, running) == []


def test_preflight_changes_nothing_and_names_the_program(managed: Managed) -> None:
    before = managed.unit_file.read_bytes() if managed.unit_file else None
    result = managed.service.preflight()
    assert result.findings and all(f.ok is not False for f in result.findings), result.findings
    # The program part is what `--help` is asked for: the interpreter and module, none of the flags.
    assert result.program and result.program[-1] == "tuner.sim"
    assert not managed.service.state().running
    if managed.unit_file:
        assert managed.unit_file.read_bytes() == before


def test_serves_tells_the_new_process_from_any_other(managed: Managed) -> None:
    restarted = managed.service.restart(label="serves")
    _ready(managed, restarted)
    # A manager that cannot see sockets must say so (None), never guess.
    assert managed.service.serves(restarted.new, managed.port) is (True if managed.sees_sockets else None)
    with socket.socket() as other:  # a listener that is not the server's (this test process holds it)
        other.bind(("127.0.0.1", 0))
        other.listen()
        expected = False if managed.sees_sockets else None
        assert managed.service.serves(restarted.new, other.getsockname()[1]) is expected


def test_two_process_services_sharing_a_state_dir_keep_their_own_servers(
    tmp_path: Path, sim_spec: Callable[..., LaunchSpec]
) -> None:
    """Two workers of one study on one host: the same state directory, the same restart label, two servers."""
    ports = [free_port(), free_port()]
    services = [
        ProcessService(
            host=LocalHost(),
            base=sim_spec(port),
            log_dir=str(tmp_path / f"logs-{port}"),
            state_dir=str(tmp_path / "state"),
            record_name=f"server-{port}.json",
        )
        for port in ports
    ]
    try:
        for visit in range(1, 6):  # both launch at the same instant, as two workers' confirmations do
            barrier = threading.Barrier(2)

            def launch(svc: ProcessService, barrier: threading.Barrier, label: str) -> None:
                barrier.wait()
                svc.restart(label=label)

            threads = [
                threading.Thread(target=launch, args=(svc, barrier, f"confirm-0003-{visit}")) for svc in services
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for svc, port in zip(services, ports, strict=True):
                spec = svc.running_spec()
                assert spec is not None and str(port) in spec.argv, (visit, spec)
    finally:
        for svc in services:
            svc.stop()
