"""Interruptions of a real `tune start` process: SIGTERM, and kill -9 followed by a second `tune start`."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from fixtures_study import running_trials
from optuna.trial import TrialState

from tuner.study import Console, Interrupted, run_study
from tuner.trials import counted_trials, record_of


def tune(config_path: str, trials: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", "start", "--trials", str(trials), "--config", config_path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_running_trial(cfg, proc: subprocess.Popen[str], *, after: int = 1) -> int:  # type: ignore[no-untyped-def]
    """The number of a trial that is RUNNING with its server launched."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        numbers = [n for n in running_trials(cfg.study.storage, with_attr="command") if n >= after]
        if numbers:
            return numbers[0]
        time.sleep(0.05)
    raise AssertionError("no trial started")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_marks_the_trial_failed_restores_and_hints(make_config, port) -> None:
    cfg = make_config(name="term")
    proc = tune(cfg.source, 4)
    number = wait_for_running_trial(cfg, proc)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"Resume with: tune start --trials 4 --config {cfg.source}\n" in err
    study = optuna.load_study(study_name=cfg.study.name, storage=cfg.study.storage)
    trial = study.trials[number]
    assert trial.state == TrialState.FAIL and record_of(trial).interrupted
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert [record_of(t).retry_of for t in waiting] == [number]
    assert not port_open(port), "on_exit = stop must leave no server behind"


def test_kill_9_then_start_again_reaches_the_total(make_config, port, tmp_path: Path) -> None:
    cfg = make_config(name="kill")
    proc = tune(cfg.source, 3)
    number = wait_for_running_trial(cfg, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # tune and nothing else: the server has its own session
    proc.wait()
    second = tune(cfg.source, 3)
    _, err = second.communicate(timeout=180)
    assert second.returncode == 0, err
    study = optuna.load_study(study_name=cfg.study.name, storage=cfg.study.storage)
    killed = study.trials[number]
    assert killed.state == TrialState.FAIL
    assert "stale" in record_of(killed).interrupted
    retries = [t for t in study.trials if record_of(t).retry_of == number]
    assert len(retries) == 1 and retries[0].params == killed.params
    assert retries[0].state in (TrialState.COMPLETE, TrialState.PRUNED)
    assert counted_trials(study) == 3
    reasons = [(record_of(t).failure_reason or "") for t in study.trials]
    assert not any("address already in use" in r.lower() for r in reasons), reasons


class _StopAfterTheVerdict(Console):
    """Sends this process SIGTERM when trial #1's score is printed: its verdict is already stored."""

    def line(self, text: str) -> None:
        super().line(text)
        if text.startswith("  score") and "best #" in text and self.scored == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)  # the handler raises here, in the main thread
        self.scored += text.startswith("  score")

    scored = 0


def test_a_stop_just_after_a_verdict_keeps_the_verdict(make_config) -> None:  # type: ignore[no-untyped-def]
    cfg = make_config(name="after")
    with pytest.raises(Interrupted, match=r"stopped at 2/4 trials\. Resume with"):
        run_study(cfg, trials=4, console=_StopAfterTheVerdict(stream=io.StringIO()))
    study = optuna.load_study(study_name=cfg.study.name, storage=cfg.study.storage)
    states = [t.state for t in study.trials]
    # Trial #1 stands as measured: not marked FAIL, not queued again (before, the stop's own bookkeeping tried to
    # update the finished trial and the run ended on UpdateFinishedTrialError).
    assert states == [TrialState.COMPLETE, TrialState.COMPLETE], states
    assert not any(record_of(t).interrupted is not None for t in study.trials)


@pytest.mark.timeout(900)  # 21 real `tune start` runs, each to a server's readiness: 300 s was not enough on a
# machine loaded many times over (each run's imports alone are seconds of CPU there)
def test_ctrl_c_at_any_moment_after_ready_stops_cleanly(tmp_path: Path, port: int) -> None:
    """Ctrl-C 0-1 s after a server became ready (every 0.05 s: the warm-up, the benchmark's event loop and its
    tasks, the scoring, the next restart), one real `tune start` each, the same study resumed: each stops with
    the resume hint and nothing else, and no trial that had its verdict loses it."""
    from fixtures_faults import Case, stop_after_ready

    case = Case(tmp_path, port, trials=60)
    try:
        stops = {round(0.05 * i, 2): stop_after_ready(case, 0.05 * i) for i in range(21)}
    finally:
        case.cleanup()
    unclean = {delay: stop.err for delay, stop in stops.items() if not stop.clean}
    assert not unclean, unclean
    assert sum(stop.signalled for stop in stops.values()) == len(stops)  # 60 trials: every run was stopped
