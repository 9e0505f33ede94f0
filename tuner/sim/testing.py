"""Helpers for tests that need a real simulated server process (like ``optuna.testing``).

Typical use in a pytest fixture::

    sim = spawn_sim(["--speculative-algorithm", "DDTREE"], log_dir=tmp_path)
    try:
        sim.wait_ready()
        ...  # talk HTTP to sim.url
    finally:
        sim.kill()

The process runs in its own session, so :meth:`SimProcess.kill` can signal its whole process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = ["READY_MARKER", "SimFleet", "SimProcess", "free_port", "run_sim", "spawn_sim", "sse_events"]

READY_MARKER = "The server is fired up and ready to roll!"


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(kw_only=True)
class SimProcess:
    """A simulator subprocess, its port and the file that collects its stdout and stderr."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float = 15.0) -> None:
        """Wait until ``text`` appears in the log; fail early (with the log) if the process exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                if text in self.log():
                    return
                raise AssertionError(f"simulator exited ({self.proc.returncode}) before {text!r}:\n{self.log()}")
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {text!r}:\n{self.log()}")

    def wait_ready(self, timeout: float = 15.0) -> None:
        self.wait_log(READY_MARKER, timeout)

    def wait_exit(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the simulator's process group (it was started in its own session) and reap it."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=5)


class SimFleet:
    """Simulators started for one test, all killed by :meth:`close` (a fixture's teardown)."""

    def __init__(self, *, log_dir: Path, base_args: Sequence[str] = ()) -> None:
        self._log_dir = log_dir
        self._base = list(base_args)
        self._started: list[SimProcess] = []

    def start(self, *args: str, env: Mapping[str, str] | None = None, ready: bool = True) -> SimProcess:
        sim = spawn_sim([*self._base, *args], log_dir=self._log_dir, env=env)
        self._started.append(sim)
        if ready:
            sim.wait_ready()
        return sim

    def close(self) -> None:
        for sim in self._started:
            sim.kill()


def _command(args: Sequence[str], port: int) -> list[str]:
    return [sys.executable, "-m", "tuner.sim", "--port", str(port), *args]


def spawn_sim(
    args: Sequence[str],
    *,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> SimProcess:
    """Start ``python -m tuner.sim ARGS --port PORT`` in its own session, logging to a file in ``log_dir``."""
    port = free_port() if port is None else port
    log_path = Path(log_dir) / f"sim-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            _command(args, port),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
        )
    return SimProcess(proc=proc, port=port, log_path=log_path)


def run_sim(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 20.0
) -> subprocess.CompletedProcess[str]:
    """Run the simulator to completion (for configurations that must fail) and capture its output."""
    return subprocess.run(
        _command(args, free_port()),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def sse_events(http: httpx.Client, path: str, payload: Mapping[str, object]) -> list[tuple[float, str]]:
    """POST a streaming request; return ``(arrival monotonic time, data)`` for every SSE ``data:`` line."""
    events: list[tuple[float, str]] = []
    with http.stream("POST", path, json={**payload, "stream": True}) as resp:
        if resp.status_code != 200:
            raise AssertionError(f"HTTP {resp.status_code}: {resp.read()!r}")
        for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append((time.monotonic(), line[6:]))
    return events
