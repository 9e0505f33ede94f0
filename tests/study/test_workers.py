"""Several workers, each with its own server, share one study in one database."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from fixtures_study import running_study_trials, study_toml
from optuna.trial import FrozenTrial, TrialState

from tuner.sim.testing import free_port
from tuner.study import make_storage
from tuner.study._fleet import Claims, Slots, WorkerId
from tuner.trials import counted_trials, is_counted, record_of

# Fast heartbeats; a generous stale limit, so a loaded machine never makes a live worker look dead (a killed
# worker on this host is recognised by its PID at once).
FAST_HEARTBEAT = "heartbeat_s = 0.2\nstale_after_s = 120\n"


def storage_for(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, str]:
    if backend == "postgresql":
        return str(request.getfixturevalue("postgres_url")), f"shared-{tmp_path.name}"
    return f"sqlite:///{tmp_path / 'shared.db'}", "shared"


def start_worker(
    tmp_path: Path,
    tag: str,
    *,
    storage: str,
    study_name: str,
    trials: int,
    port: int | None = None,
    model: str | None = None,
    flags: tuple[str, ...] = (),
) -> subprocess.Popen[str]:
    text = study_toml(name=study_name, port=port or free_port(), gate=False)
    if model is not None:
        text = text.replace('"--model-path", "/models/Kimi-K2.6"', f'"--model-path", "{model}"')
    head = f'[study]\nname = "{study_name}"'
    text = text.replace(head, f'{head}\nstorage = "{storage}"\n{FAST_HEARTBEAT}')
    path = tmp_path / f"worker-{tag}.toml"
    path.write_text(text)
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", "start", "--trials", str(trials), "--config", str(path), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def duplicate_restarts(trials: list[FrozenTrial]) -> int:
    """Server restarts spent on params another trial had already started (retries of killed trials aside)."""
    seen: set[str] = set()
    repeats = 0
    for t in sorted(trials, key=lambda t: t.number):
        if record_of(t).command is None or record_of(t).retry_of is not None:
            continue
        key = repr(sorted(t.params.items()))
        repeats += key in seen
        seen.add(key)
    return repeats


def assert_exact(study: optuna.Study, total: int) -> None:
    assert counted_trials(study) == total
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    baselines = [t for t in study.trials if record_of(t).is_baseline and is_counted(t)]
    assert len(baselines) == 1, "the baseline is measured exactly once"
    assert duplicate_restarts(study.trials) == 0
    slots = sorted(record_of(t).slot for t in study.trials if is_counted(t))
    story = [
        (t.number, t.state.name, record_of(t).slot, record_of(t).worker_name,
         record_of(t).failure_reason, t.datetime_start, t.datetime_complete)
        for t in study.trials
    ]  # fmt: skip
    assert slots == list(range(total)), story


@pytest.mark.parametrize(("backend", "workers", "total"), [
    ("sqlite", 2, 6), ("postgresql", 2, 6), ("sqlite", 4, 8), ("postgresql", 4, 8),
])  # fmt: skip
def test_workers_share_a_study_and_stop_at_exactly_the_total(
    backend: str, workers: int, total: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    storage, study_name = storage_for(backend, tmp_path, request)
    gate = StartGate(storage, study_name, total)
    procs = [
        start_worker(tmp_path, str(i), storage=storage, study_name=study_name, trials=total) for i in range(workers)
    ]
    gate.open_when_waiting(procs)
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    study = optuna.load_study(study_name=study_name, storage=storage)
    assert_exact(study, total)
    assert len({record_of(t).worker for t in study.trials if record_of(t).worker is not None}) >= 2
    ran = {record_of(t).worker_name for t in study.trials if record_of(t).worker_name is not None}
    assert 2 <= len(ran) <= workers


class StartGate:
    """Holds every slot of a fresh study until all workers wait for one, then frees them at once.

    Without it, a worker that starts a few seconds late on a loaded machine may find the study already done, and
    the test would not race anything: with it, every worker races for every slot from the same instant.
    """

    def __init__(self, storage: str, study_name: str, total: int) -> None:
        study = optuna.create_study(study_name=study_name, storage=make_storage(storage), direction="maximize")
        self._claims = Claims(study)
        me = WorkerId(name="test-gate", process=f"{socket.gethostname()}:{os.getpid()}")
        self._slots = Slots(self._claims, me, stale_after_s=3600)
        self._held = [self._slots.claim(total, [], is_counted=is_counted) for _ in range(total)]
        assert all(self._held)

    def open_when_waiting(self, procs: list[subprocess.Popen[str]]) -> None:
        deadline = time.monotonic() + 240
        while len(self._claims.held("tune:worker:")) < len(procs):  # each registers before its first slot
            assert time.monotonic() < deadline, "the workers never all joined the study"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
            time.sleep(0.05)
        for slot in self._held:
            assert slot is not None
            self._slots.release(slot)


def kill_simulator_on(port: int) -> None:
    """The killed worker's simulated server outlives it (it has a session of its own): stop that one process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tuner.sim" in argv and str(port).encode() in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def wait_for_trial_of(study_name: str, storage: str, pid: int, proc: subprocess.Popen[str]) -> int:
    """The number of a RUNNING trial of the worker with this pid whose server was launched."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for t in running_study_trials(storage, study_name):
            if (record_of(t).worker or "").endswith(f":{pid}") and record_of(t).heartbeat is not None:
                return t.number
        time.sleep(0.05)
    raise AssertionError("the worker never started a trial")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_sigkilled_worker_is_failed_over_and_the_total_stays_exact(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    storage, study_name = storage_for(backend, tmp_path, request)
    total = 6
    port = free_port()
    victim = start_worker(tmp_path, "victim", storage=storage, study_name=study_name, trials=total, port=port)
    request.addfinalizer(lambda: kill_simulator_on(port))
    survivor = start_worker(tmp_path, "survivor", storage=storage, study_name=study_name, trials=total)
    wait_for_trial_of(study_name, storage, victim.pid, victim)
    os.killpg(victim.pid, signal.SIGKILL)  # mid-trial, at once; tune only: its server has a session of its own
    victim.wait()
    _, err = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, err
    study = optuna.load_study(study_name=study_name, storage=storage)
    killed = [t for t in study.trials if record_of(t).worker == f"{socket.gethostname()}:{victim.pid}"]
    killed = [t for t in killed if t.state == TrialState.FAIL]
    assert len(killed) == 1 and "stale" in record_of(killed[0]).interrupted
    retries = [t for t in study.trials if record_of(t).retry_of == killed[0].number]
    assert len(retries) == 1 and retries[0].params == killed[0].params and is_counted(retries[0])
    assert "re-enqueued" in err  # the survivor noticed (while starting, or between its trials)
    assert_exact(study, total)


def test_a_worker_on_a_different_target_is_refused_unless_mixing_is_allowed(tmp_path: Path) -> None:
    storage, name = f"sqlite:///{tmp_path / 'mixed.db'}", "mixed"
    first = start_worker(tmp_path, "a", storage=storage, study_name=name, trials=1, model="/models/a")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    other = start_worker(tmp_path, "b", storage=storage, study_name=name, trials=2, model="/models/b")
    _, err = other.communicate(timeout=120)
    assert other.returncode != 0
    assert "differs from the study's" in err and "model-path /models/a" in err and "model-path /models/b" in err
    assert "--allow-mixed-targets" in err
    mixed = start_worker(
        tmp_path, "c", storage=storage, study_name=name, trials=2, model="/models/b", flags=("--allow-mixed-targets",)
    )
    _, err = mixed.communicate(timeout=120)
    assert mixed.returncode == 0, err
    study = optuna.load_study(study_name=name, storage=storage)
    targets = [record_of(t).target_fingerprint for t in study.trials if is_counted(t)]
    assert targets == ["model-path /models/a", "model-path /models/b"]


def fresh_database(url: str, name: str) -> str:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return url.rsplit("/", 1)[0] + f"/{name}"


def _inprocess_worker(config_path: str, storage: str, study_name: str, total: int, index: int, barrier: Any) -> None:
    import functools

    from tuner.config import base_spec, load_config
    from tuner.sim.inprocess import ModelService, model_parts, model_target
    from tuner.study import Console, run_study

    config = load_config(config_path)
    service = ModelService(base=base_spec(config.target))
    barrier.wait(timeout=120)
    with open(os.devnull, "w") as quiet:
        run_study(
            config,
            trials=total,
            storage=storage,
            study_name=study_name,
            target=model_target(config, service),
            parts_factory=functools.partial(model_parts, noise=0.02, seed=index),
            console=Console(stream=quiet, live=False),
            worker_name=f"model-{index}",
        )


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_eight_model_workers_started_together_stay_exact(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The tightest race: eight workers against in-process models (a trial takes milliseconds) from one barrier."""
    import multiprocessing

    storage, study_name = storage_for(backend, tmp_path, request)
    if backend == "postgresql":  # a database of its own: the eight also race to create Optuna's schema
        storage = fresh_database(storage, f"fleet_{tmp_path.name.replace('-', '_')}")
    text = Path(__file__).resolve().parents[2].joinpath("studies", "demo.toml").read_text()
    path = tmp_path / "demo.toml"
    path.write_text(text.replace('on_exit = "stop"', f'on_exit = "stop"\nartifacts_dir = "{tmp_path / "artifacts"}"'))
    workers, total = 8, 16
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(workers)
    procs = [
        ctx.Process(target=_inprocess_worker, args=(str(path), storage, study_name, total, i, barrier))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * workers
    assert_exact(optuna.load_study(study_name=study_name, storage=storage), total)
