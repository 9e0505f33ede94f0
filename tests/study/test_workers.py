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

import optuna
import pytest
from fixtures_study import study_toml
from optuna.trial import FrozenTrial, TrialState

from tuner.sim.testing import free_port
from tuner.study import counted_trials, is_counted
from tuner.trials import attrs

FAST_HEARTBEAT = "heartbeat_s = 0.2\nstale_after_s = 5\n"


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
        text = text.replace('"tuner.sim",', f'"tuner.sim", "--model-path", "{model}",')
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
        if attrs.COMMAND not in t.user_attrs or t.user_attrs.get(attrs.RETRY_OF) is not None:
            continue
        key = repr(sorted(t.params.items()))
        repeats += key in seen
        seen.add(key)
    return repeats


def assert_exact(study: optuna.Study, total: int) -> None:
    assert counted_trials(study) == total
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    baselines = [t for t in study.trials if t.user_attrs.get(attrs.BASELINE) and is_counted(t)]
    assert len(baselines) == 1, "the baseline is measured exactly once"
    assert duplicate_restarts(study.trials) == 0
    slots = sorted(t.user_attrs[attrs.SLOT] for t in study.trials if is_counted(t))
    assert slots == list(range(total))


@pytest.mark.parametrize(("backend", "workers", "total"), [
    ("sqlite", 2, 6), ("postgresql", 2, 6), ("sqlite", 4, 8), ("postgresql", 4, 8),
])  # fmt: skip
def test_workers_share_a_study_and_stop_at_exactly_the_total(
    backend: str, workers: int, total: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    storage, study_name = storage_for(backend, tmp_path, request)
    procs = [
        start_worker(tmp_path, str(i), storage=storage, study_name=study_name, trials=total) for i in range(workers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    study = optuna.load_study(study_name=study_name, storage=storage)
    assert_exact(study, total)
    assert len({t.user_attrs[attrs.WORKER] for t in study.trials if attrs.WORKER in t.user_attrs}) == workers
    assert len({t.user_attrs[attrs.WORKER_NAME] for t in study.trials if attrs.WORKER_NAME in t.user_attrs}) == workers


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
        try:
            study = optuna.load_study(study_name=study_name, storage=storage)
            running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        except (KeyError, optuna.exceptions.OptunaError, ValueError):
            running = []  # the worker is still creating the study
        for t in running:
            if t.user_attrs.get(attrs.WORKER, "").endswith(f":{pid}") and attrs.HEARTBEAT in t.user_attrs:
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
    killed = [t for t in study.trials if t.user_attrs.get(attrs.WORKER) == f"{socket.gethostname()}:{victim.pid}"]
    killed = [t for t in killed if t.state == TrialState.FAIL]
    assert len(killed) == 1 and "stale" in killed[0].user_attrs[attrs.INTERRUPTED]
    retries = [t for t in study.trials if t.user_attrs.get(attrs.RETRY_OF) == killed[0].number]
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
    targets = [t.user_attrs[attrs.TARGET_FINGERPRINT] for t in study.trials if is_counted(t)]
    assert targets == ["model-path /models/a", "model-path /models/b"]
