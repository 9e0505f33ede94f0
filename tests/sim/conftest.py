"""Fixtures that run the simulator as a real subprocess on a free loopback port."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tuner.sim.testing import SimProcess, spawn_sim

# Short load, exact pacing and a fixed seed keep these tests fast and repeatable.
FAST = ["--sim-load-time", "0.3", "--sim-noise", "0", "--sim-seed", "1"]


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    """Start simulators (waiting for readiness unless ``ready=False``); all are killed at teardown."""
    started: list[SimProcess] = []

    def start(*args: str, env: Mapping[str, str] | None = None, ready: bool = True) -> SimProcess:
        sim = spawn_sim([*FAST, *args], log_dir=tmp_path, env=env)
        started.append(sim)
        if ready:
            sim.wait_ready()
        return sim

    yield start
    for sim in started:
        sim.kill()
