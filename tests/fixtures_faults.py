"""Fault cases: a real `tune start` subprocess against the simulator, with the world broken on purpose.

Each :class:`Case` writes a small study file in its own directory, runs ``python -m tuner ...`` the way a user
would, and can tell afterwards what the run left: the exit status and last line, counted trials, server
processes still alive (by the pids the process manager recorded), the lock file. ``scripts/bench_faults.py``
uses the same cases to measure the time from ``tune start`` to the verdict.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fixtures_study import study_toml

# Trials of a second or two: no gate, one scenario, a time-scaled simulator.
FAST = {"gate": False}
# Nor the end-of-study confirmation: these tests are about trials, runs and their faults, and a finished study's
# confirmation (the top 3 and the baseline re-measured twice: 6 more restarts than its 4 trials) has its own tests
# (tests/study/test_loop.py, test_small_space.py, test_gate_final.py, tests/report).
NO_CONFIRMATION = "confirm_top = 0"


@dataclass(frozen=True)
class Run:
    rc: int
    out: str
    err: str
    seconds: float
    cpu_s: float = float("nan")
    """CPU seconds tune (and what it waited for) used: a figure a loaded machine does not inflate."""

    @property
    def message(self) -> str:
        """The verdict: the first line tune printed as ``tune: ...`` (stderr), else its last line."""
        lines = [line for line in self.err.splitlines() if line.strip()]
        verdict = [line for line in lines if line.startswith("tune: ")]
        return (verdict[0] if verdict else (lines[-1] if lines else "")).strip()


class Case:
    def __init__(self, root: Path, port: int, *, name: str = "fault", trials: int = 2) -> None:
        self.root = root
        self.port = port
        self.name = name
        self.trials = trials
        self.path = root / f"{name}.toml"
        self.edit(lambda text: text)

    def edit(self, change: Callable[[str], str], *, search: str = "") -> None:
        text = study_toml(name=self.name, port=self.port, search=f"{NO_CONFIRMATION}\n{search}", **FAST)
        text = text.replace("trials = 4", f"trials = {self.trials}")
        self.path.write_text(change(text))

    @property
    def storage(self) -> Path:
        return self.root / "runs" / self.name / "study.db"

    @property
    def lock_path(self) -> Path:
        return Path(f"/tmp/tune-port-{self.port}.lock")

    def tune(self, *args: str, timeout: float = 180) -> Run:
        argv = [sys.executable, "-m", "tuner", *args]
        if "--config" not in args and args[:1] != ("resume",):
            argv += ["--config", str(self.path)]
        t0, cpu0 = time.monotonic(), _children_cpu()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.root)
        return Run(
            rc=proc.returncode,
            out=proc.stdout,
            err=proc.stderr,
            seconds=time.monotonic() - t0,
            cpu_s=_children_cpu() - cpu0,
        )

    def spawn(self, *extra: str, trials: int | None = None) -> subprocess.Popen[str]:
        """``tune start`` in the background, in its own session (the server gets its own session anyway)."""
        argv = [
            sys.executable,
            "-m",
            "tuner",
            "start",
            "--trials",
            str(trials or self.trials),
            "--config",
            str(self.path),
        ]
        return subprocess.Popen(
            [*argv, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.root,
            start_new_session=True,
        )

    def wait_running(self, proc: subprocess.Popen[str], *, after: int = 0, timeout: float = 60) -> int:
        """The number of a trial that is RUNNING with its server launched (trial number >= ``after``)."""
        from fixtures_study import running_trials

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            numbers = [n for n in running_trials(f"sqlite:///{self.storage}", with_attr="command") if n >= after]
            if numbers:
                return numbers[0]
            time.sleep(0.02)
        raise AssertionError("no trial started")

    def start(self, *extra: str, timeout: float = 180) -> Run:
        return self.tune("start", "--trials", str(self.trials), *extra, timeout=timeout)

    def trials_table(self) -> list[tuple[int, str, dict[str, str]]]:
        """(number, state, user attrs) of every trial, read straight from the SQLite file ([] when none)."""
        if not self.storage.exists():
            return []
        with contextlib.closing(sqlite3.connect(f"file:{self.storage}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT trial_id, number, state FROM trials ORDER BY number").fetchall()
            out = []
            for trial_id, number, state in rows:
                attrs = dict(
                    conn.execute(
                        "SELECT key, value_json FROM trial_user_attributes WHERE trial_id = ?", (trial_id,)
                    ).fetchall()
                )
                out.append((number, state, attrs))
        return out

    def counted(self) -> int:
        """Trials that ran to a verdict (COMPLETE or PRUNED, not a rejected sample or a repeat)."""
        return sum(
            1
            for _, state, attrs in self.trials_table()
            if state in ("COMPLETE", "PRUNED") and "rejected" not in attrs and "duplicate_of" not in attrs
        )

    def server_pids(self) -> list[int]:
        """Every server process the process manager launched for this case (its ``.LABEL.pid`` files)."""
        pids = []
        for f in self.root.rglob(".*.pid"):
            with contextlib.suppress(ValueError):
                pids.append(int(f.read_text().strip()))
        return pids

    def orphans(self) -> list[int]:
        return [pid for pid in self.server_pids() if alive(pid)]

    def cleanup(self) -> None:
        for pid in self.orphans():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def stranger(port: int, log: Path) -> subprocess.Popen[bytes]:
    """``python -m http.server PORT``: a process tune did not start, holding the study's port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 15
    import socket

    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    raise AssertionError("the stranger never listened")


UNCLEAN = ("Traceback", "never retrieved", "Exception ignored")
"""What a stop must never print: a traceback, a task that kept the stop, an exception dropped by a finaliser."""


@dataclass(frozen=True)
class Stopped:
    rc: int
    err: str
    signalled: bool
    lost: list[int]
    """Trials that had their verdict before the signal and lost it."""

    @property
    def clean(self) -> bool:
        hinted = self.rc == 130 and "Resume with: tune start" in self.err
        return (hinted or not self.signalled) and not self.lost and not any(u in self.err for u in UNCLEAN)


def stop_after_ready(case: Case, delay: float, *, signum: int = signal.SIGINT, trials: int = 60) -> Stopped:
    """``tune start``, then ``signum`` ``delay`` seconds after it first printed "ready after" (a server serves: the
    benchmark's requests, warm-up and event loop are next); what the stop left."""
    import threading

    finished = _finished(case)
    proc = case.spawn(trials=trials)
    err: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if "ready after" in line:
                ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    while not ready.wait(0.05) and proc.poll() is None:
        pass
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=delay)  # the offset itself, not a wait for an event
    signalled = proc.poll() is None
    if signalled:
        os.kill(proc.pid, signum)
    proc.wait(timeout=180)
    reader.join(timeout=30)
    lost = sorted(finished - _finished(case))
    return Stopped(rc=proc.returncode, err="".join(err), signalled=signalled, lost=lost)


def _finished(case: Case) -> set[int]:
    return {n for n, state, _ in case.trials_table() if state in ("COMPLETE", "PRUNED")}
