"""Fixtures shared across the suite: a simulated server managed by the real process manager."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures_rerun import PLANTED_STALL_S, ClientRerun
from tuner.bench._planted import CLIENT_STALL_ENV
from tuner.sim.testing import free_port
from tuner.spec import LaunchSpec
from tuner.target.hosts import LocalHost
from tuner.target.services import ProcessService

ROOT = Path(__file__).resolve().parents[1]


def _sim_spec(port: int, *extra: str, env: dict[str, str] | None = None, load_time: float = 0.3) -> LaunchSpec:
    """The simulator's launch spec, as a study's target command would give it."""
    argv = (
        sys.executable, "-u", "-m", "tuner.sim",
        "--host", "127.0.0.1", "--port", str(port),
        "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12",
        "--speculative-dflash-block-size", "8", "--speculative-dflash-draft-window-size", "2048",
        "--sim-load-time", str(load_time), "--sim-seed", "1",
        *extra,
    )  # fmt: skip
    return LaunchSpec(argv=argv, env={"SGLANG_DDTREE_MAX_TOPK": "6", **(env or {})})


@pytest.fixture
def sim_spec() -> Callable[..., LaunchSpec]:
    """``sim_spec(port, *extra_flags, env=..., load_time=...)``: the simulator's launch spec."""
    return _sim_spec


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def process_service(tmp_path: Path) -> Iterator[Callable[[LaunchSpec], ProcessService]]:
    """ProcessService factories on this host; every server they started is stopped at teardown."""
    made: list[ProcessService] = []

    def make(base: LaunchSpec, *, grace: float = 5.0, log_dir: Path | None = None) -> ProcessService:
        d = log_dir or tmp_path / f"logs-{len(made)}"
        svc = ProcessService(host=LocalHost(), base=base, log_dir=str(d), stop_grace_s=grace)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.stop()


@pytest.fixture(params=["as-run", "client-rerun"])
def client_rerun(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientRerun:
    """Every test that plants a one-time event in a server during a measured pass, or reads a pass from the
    server's own records, runs twice: as the machine lets it, and with the first counted pass's client stalled
    (``TUNE_TEST_CLIENT_STALL``, inherited by client processes and ``tune`` subprocesses), so that tune runs that
    pass again on purpose."""
    if request.param == "as-run":
        return ClientRerun(forced=False)
    path = tmp_path / "client-stall"
    path.write_text(str(PLANTED_STALL_S))
    monkeypatch.setenv(CLIENT_STALL_ENV, str(path))
    return ClientRerun(forced=True, stall_file=path)


# Under pytest-xdist (`-n`, --dist loadgroup): the tests of one expensive session fixture run on one worker, so
# each worker does not start its own llama.cpp server or run its own 6-trial report study. A file whose tests
# share a server of their own (llama-server's) is a group apart, free to run beside its folder's.
_GROUPS = {"real": "llama", "report": "report-study"}
_FILE_GROUPS = {"test_llama_server.py": "llama-server"}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the marks into the scopes it distributes
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.path)).relative_to(ROOT / "tests").parts
        group = _FILE_GROUPS.get(parts[-1]) or (_GROUPS.get(parts[0]) if len(parts) > 1 else None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
