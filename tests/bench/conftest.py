"""Real simulator subprocesses for the benchmark tests (free loopback ports, killed by process group)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tuner.sim.testing import SimFleet, SimProcess, spawn_sim

#: The seed session's best DDTree config: acceptance ~4.8 tokens per step, so events carry several tokens.
DDTREE = [
    "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12",
    "--speculative-dflash-block-size", "8", "--speculative-dflash-draft-window-size", "2048",
]  # fmt: skip
#: Exact pacing (no noise), a short load, metrics on. Time scale 2 keeps timings well above event-loop jitter.
FAST = [
    "--host",
    "127.0.0.1",
    "--sim-load-time",
    "0.3",
    "--sim-noise",
    "0",
    "--sim-seed",
    "1",
    "--enable-metrics",
]
TIME_SCALE = 2.0


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    """``start_sim(*flags, env=...)``: a ready simulator; every one started is killed at teardown."""
    fleet = SimFleet(log_dir=tmp_path, base_args=FAST)
    yield fleet.start
    fleet.close()


@pytest.fixture(scope="module")
def ddtree_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    """One healthy DDTree simulator shared by a module's measurement tests."""
    sim = spawn_sim(
        [*FAST, *DDTREE, "--sim-time-scale", str(TIME_SCALE)],
        log_dir=tmp_path_factory.mktemp("sim"),
        env={"SGLANG_DDTREE_MAX_TOPK": "6"},
    )
    try:
        sim.wait_ready()
        yield sim
    finally:
        sim.kill()
