"""One `tune start` for a fleet: `[target.ssh] hosts` runs one worker per host over the test sshd."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from fixtures_sshd import SMALL_SPACE_AND_BENCHMARK, Sshd, sim_argv
from fixtures_study import running_study_trials
from optuna.trial import TrialState

from tuner.config import StudyConfig, fleet_member, load_config
from tuner.errors import ConfigError
from tuner.sim.testing import free_port
from tuner.trials import is_counted, record_of


def fleet_file(
    sshd: Sshd, tmp_path: Path, *, trials: int, hosts: list[str] | None = None, time_scale: float = 20.0
) -> Path:
    """Two simulated servers reached over one sshd: two loopback ports stand for two GPU boxes."""
    ports = [free_port(), free_port()]
    entries = hosts or [
        f'{{ host = "127.0.0.1", port = {sshd.port}, base_url = "http://127.0.0.1:{p}", '
        f"command = {json.dumps(list(sim_argv(p, '--sim-time-scale', str(time_scale))))} }}"
        for p in ports
    ]
    text = f"""
[study]
name = "fleet"
storage = "sqlite:///{tmp_path / "fleet.db"}"
trials = {trials}
seed = 5
on_exit = "stop"
heartbeat_s = 0.2
stale_after_s = 5
artifacts_dir = "{tmp_path / "runs" / "fleet" / "artifacts"}"

[target]
transport = "ssh"
manager = "process"
base_url = "http://127.0.0.1:{ports[0]}"
command = {json.dumps(list(sim_argv(ports[0])))}
env = {{ SGLANG_DDTREE_MAX_TOPK = "6" }}
log_dir = "{tmp_path / "remote-logs"}"
stop_grace_s = 5
{sshd.ssh_table()}hosts = [{", ".join(entries)}]

[readiness]
timeout_s = 30
poll_interval_s = 0.05
progress = false

"""
    text += SMALL_SPACE_AND_BENCHMARK
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


def tune(*argv: str, sigint: Callable[[], None] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # As from a terminal: a test run from a script's background job inherits SIGINT ignored, and then the
        # Ctrl-C this file sends would never arrive.
        preexec_fn=sigint or _sigint_default,
    )


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigterm_stops_workers_of_a_launcher_started_in_the_background(sshd: Sshd, tmp_path: Path) -> None:
    # A script's `tune start ... &` runs with SIGINT ignored, and its workers inherit that; the launcher stops them
    # with SIGINT, so a worker that kept the inherited SIG_IGN never stopped and the launcher waited forever.
    path = fleet_file(sshd, tmp_path, trials=40, time_scale=2.0)
    config = load_config(path)
    proc = tune("start", "--config", str(path), sigint=_sigint_ignored)
    _running_trials(config, proc)
    proc.send_signal(signal.SIGTERM)
    _stopped(proc, config)


def test_one_start_runs_a_worker_per_host_to_exactly_the_total(sshd: Sshd, tmp_path: Path) -> None:
    path = fleet_file(sshd, tmp_path, trials=6)
    proc = tune("start", "--config", str(path))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    config = load_config(path)
    names = [f"127.0.0.1:{fleet_member(config, i).target.base_url.rsplit(':', 1)[1]}" for i in range(2)]
    assert f"tune: 2 workers on study fleet: {names[0]}, {names[1]}" in err
    for name in names:  # each worker's progress lines carry its prefix, and its own log holds them
        assert f"[{name}] [1/6" in err or f"[{name}] [" in err
    logs = sorted((tmp_path / "runs" / "fleet" / "workers").glob("*.log"))
    assert len(logs) == 2 and all("trial #" in log.read_text() for log in logs)
    study = optuna.load_study(study_name="fleet", storage=config.study.storage)
    counted = [t for t in study.trials if is_counted(t)]
    assert len(counted) == 6
    assert not study.get_trials(states=(TrialState.RUNNING,)), "a finished fleet leaves no trial RUNNING"
    assert {record_of(t).worker_name for t in counted} == set(names)
    assert len([t for t in counted if record_of(t).is_baseline]) == 1
    # Both workers end near the same time; a given top is re-measured by one of them only.
    confirmed = re.findall(r"confirming the top \d+: ([#\d ]+)", err)
    assert confirmed and len(confirmed) == len(set(confirmed)), err
    status = subprocess.run(
        [sys.executable, "-m", "tuner", "status", "--config", str(path), "--wide"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0, status.stderr
    assert all(f"on {name}" in status.stdout for name in names), status.stdout


def test_ctrl_c_stops_every_worker_cleanly(sshd: Sshd, tmp_path: Path) -> None:
    # Servers at a tenth of the usual time scale: 40 trials take minutes, so the run cannot end while the test
    # looks, however loaded the machine (a bigger N would exhaust the small space instead).
    path = fleet_file(sshd, tmp_path, trials=40, time_scale=2.0)
    config = load_config(path)
    proc = tune("start", "--config", str(path))
    deadline = time.monotonic() + 120
    running: list[optuna.trial.FrozenTrial] = []
    while len({record_of(t).worker_name for t in running}) < 2:
        assert time.monotonic() < deadline, "both workers never ran a trial at once"
        assert proc.poll() is None, proc.communicate()
        trials = running_study_trials(config.study.storage, "fleet")
        running = [t for t in trials if record_of(t).worker_name is not None]
        time.sleep(0.05)
    # `tune status` reads the study a second or more later (longer on a loaded machine), when both workers may be
    # between trials: ask again until it catches trials running, as it does on nearly every look.
    while "running now: #" not in (
        status := subprocess.run(
            [sys.executable, "-m", "tuner", "status", "--config", str(path), "--wide"],
        capture_output=True,
        text=True,
        timeout=60,
        )
    ).stdout:
        assert time.monotonic() < deadline, f"`tune status` never showed a running trial:\n{status.stdout}"
        assert proc.poll() is None, proc.communicate()
    # `tune status` took a while: a worker may be between trials now. Interrupt right after seeing what runs.
    running = _running_trials(config, proc)
    os.kill(proc.pid, signal.SIGINT)  # what the terminal's Ctrl-C sends to the launcher
    study = _stopped(proc, config)
    for seen in running:  # each ended with its measurement or as interrupted (then retried), never lost
        t = study.trials[seen.number]
        assert t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
            t.state == TrialState.FAIL and record_of(t).interrupted
        ), (t.state, t.user_attrs)
    for i in range(2):  # on_exit = "stop": no server left on either host
        port = int(fleet_member(config, i).target.base_url.rsplit(":", 1)[1])
        with pytest.raises(OSError):
            import socket

            socket.create_connection(("127.0.0.1", port), timeout=1).close()


def _stopped(proc: subprocess.Popen[str], config: StudyConfig) -> optuna.Study:
    """The launcher exits 130 after stopping both workers, before the end of its 40 trials, none left RUNNING."""
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "stopping 2 workers" in err
    study = optuna.load_study(study_name="fleet", storage=config.study.storage)
    assert not study.get_trials(states=(TrialState.RUNNING,)), "every worker marks its running trial FAIL"
    assert sum(map(is_counted, study.trials)) < 40, "the workers ran on to the end of the study instead of stopping"
    return study


def _running_trials(config: StudyConfig, proc: subprocess.Popen[str]) -> list[optuna.trial.FrozenTrial]:
    """The fleet's running trials, as soon as there is one."""
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline and proc.poll() is None, "no trial runs any more"
        running = running_study_trials(config.study.storage, "fleet")
        if running and proc.poll() is None:
            return running
        time.sleep(0.02)


def test_a_per_host_command_must_match_the_search_space_baseline(sshd: Sshd, tmp_path: Path) -> None:
    port = free_port()
    argv = list(sim_argv(port))
    argv[argv.index("--speculative-ddtree-budget") + 1] = "16"
    other = f'{{ host = "127.0.0.1", port = {sshd.port}, command = {json.dumps(argv)} }}'
    path = fleet_file(sshd, tmp_path, trials=2, hosts=['"127.0.0.1"', other])
    config = load_config(path)
    assert fleet_member(config, 0).target.ssh.host == "127.0.0.1"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match=r"target\.ssh\.hosts\[1\]\.command"):
        fleet_member(config, 1)
