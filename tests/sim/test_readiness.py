"""Readiness reads the simulator's start-up lines as it reads SGLang's: every phase, in each emulated version."""

from __future__ import annotations

import sys

import pytest

from tuner.config import ReadinessSection
from tuner.endpoint import Endpoint
from tuner.sim.inprocess import ModelService, model_readiness
from tuner.target.readiness import wait_ready
from tuner.target.services import LaunchSpec

PHASES = ["loading weights", "capturing cuda graphs", "warming up", "serving"]
FLAGS = {
    "0.5.23": ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8",
               "--speculative-draft-window-size", "2048"],
    "ddtree-pr29907": ["--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8",
                       "--speculative-ddtree-budget", "12", "--speculative-dflash-draft-window-size", "2048"],
}  # fmt: skip


def _spec(version: str, port: int) -> LaunchSpec:
    argv = (sys.executable, "-u", "-m", "tuner.sim", "--host", "127.0.0.1", "--port", str(port),
            "--sim-sglang-version", version, *FLAGS[version],
            "--sim-load-time", "1.5", "--sim-time-scale", "3")  # fmt: skip
    return LaunchSpec(argv=argv, env={"SGLANG_DDTREE_MAX_TOPK": "6"})


@pytest.mark.parametrize("version", sorted(FLAGS))
def test_readiness_sees_every_start_up_phase(process_service, port, version: str) -> None:  # type: ignore[no-untyped-def]
    svc = process_service(_spec(version, port))
    restarted = svc.restart(label="t")
    config = ReadinessSection(timeout_s=30, poll_interval_s=0.05, request_timeout_s=2)
    ready = wait_ready(service=svc, restarted=restarted, endpoint=Endpoint(base_url=f"http://127.0.0.1:{port}"),
                       config=config)  # fmt: skip
    assert list(ready.phase_times) == PHASES
    # Each phase is timed by the poll that first read its line, so two lines read by one poll share a time (a
    # loaded machine can delay a poll past a whole phase): the times never go backwards, and the order of the
    # phases (above) is what the log said; a restart slowed past the first line sees it at once (0 s). The
    # CUDA-graph phase ends at the version's own capture line.
    times = [ready.phase_times[p] for p in PHASES]
    assert times[0] >= 0 and times == sorted(times) and times[-1] <= ready.seconds
    log = svc.read_log("0").text
    assert "Capture target verify CUDA graph end." in log
    assert ("Capture target verify CUDA graph end. bs=[" in log) == (version == "0.5.23")


@pytest.mark.parametrize("version", sorted(FLAGS))
def test_the_in_process_model_logs_the_same_phases(version: str) -> None:
    service = ModelService(base=_spec(version, 1))
    ready = model_readiness(
        service=service,
        restarted=service.restart(label="t"),
        endpoint=Endpoint(base_url="http://127.0.0.1:1"),
        config=ReadinessSection(),
    )
    assert list(ready.phase_times) == PHASES
    assert "Capture target verify CUDA graph end." in service.read_log("0").text
