"""Fixtures that run the simulator as a real subprocess on a free loopback port."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tuner.sim.testing import SimFleet, SimProcess

# Short load, exact pacing and a fixed seed keep these tests fast and repeatable.
FAST = ["--sim-load-time", "0.3", "--sim-noise", "0", "--sim-seed", "1"]


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    """Start simulators (waiting for readiness unless ``ready=False``); all are killed at teardown."""
    fleet = SimFleet(log_dir=tmp_path, base_args=FAST)
    yield fleet.start
    fleet.close()
