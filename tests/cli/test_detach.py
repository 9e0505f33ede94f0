"""``tune start --detach`` outlives the terminal that started it; ``tune status`` and ``tune logs`` show it, and
``tune interrupt`` stops it as Ctrl-C would. The hang-up is a real one: an interactive shell on a pseudo-terminal
whose other end is closed, as when an SSH session drops."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_faults import Case, alive
from fixtures_study import running_trials

HOOK = 'notify = ["sh", "-c", "cat > notified-$TUNE_STATE.json"]'


@pytest.fixture
def case(tmp_path: Path, port: int) -> Iterator[Case]:
    c = Case(tmp_path, port, trials=3)
    slow(c, load_s=0.02)
    try:
        yield c
    finally:
        record = _record(c)
        if record is not None and alive(record["pid"]):
            c.tune("interrupt")
        c.cleanup()


def slow(case: Case, *, load_s: float) -> None:
    """The study file with the notify hook, its servers loading for ``load_s`` seconds (at the time scale)."""
    load = f'"--sim-load-time", "{load_s * 10:g}"'
    case.edit(lambda t: t.replace('"--sim-load-time", "0.2"', load).replace("[study]\n", f"[study]\n{HOOK}\n", 1))


def _record(case: Case) -> dict | None:  # type: ignore[type-arg]
    path = case.root / "runs" / case.name / "run.json"
    return json.loads(path.read_text()) if path.exists() else None


def _wait(what: str, check, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _read_until(fd: int, pattern: str, timeout: float = 120) -> str:
    """What the terminal shows until ``pattern`` appears in it."""
    seen = b""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, seen.decode(errors="replace")):
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return seen.decode(errors="replace")


def _in_a_terminal_that_hangs_up(case: Case, *args: str, until: str, then: Callable[[], None] = lambda: None) -> str:
    """Type ``tune ARGS`` in an interactive shell on a pseudo-terminal, wait for ``until`` on the screen (and for
    ``then``), then close the terminal (the kernel hangs up the shell's session, which hangs up its jobs)."""
    shell, terminal = pty.fork()
    if shell == 0:  # the user's interactive shell, its controlling terminal the pseudo-terminal
        os.chdir(case.root)
        os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
    os.write(terminal, (shlex.join([sys.executable, "-m", "tuner", *args]) + "\n").encode())
    shown = _read_until(terminal, until)
    then()
    os.close(terminal)
    _, wait_status = os.waitpid(shell, 0)
    assert os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) == signal.SIGHUP, wait_status
    return shown


def test_the_hang_up_is_real_a_run_in_the_foreground_stops(case: Case) -> None:
    # A server that loads for 5 s: the hang-up comes while the baseline's server loads, never between trials.
    slow(case, load_s=5)
    storage = f"sqlite:///{case.storage}"

    def launched() -> None:
        _wait("the server's launch", lambda: running_trials(storage, with_attr="command"))

    start = ("start", "--config", "fault.toml", "--trials", "3")
    _in_a_terminal_that_hangs_up(case, *start, until="trial #0", then=launched)
    record = _record(case)
    assert record is not None
    _wait("the run to stop", lambda: not alive(record["pid"]))
    record = _record(case)
    # It stopped as on a Ctrl-C, though nobody could hear it any more: its trial FAIL, the server put back.
    assert record is not None and record["status"] == 130 and record["state"] == "interrupted", record["message"]
    assert case.counted() < 3
    assert [attrs for _, state, attrs in case.trials_table() if state == "FAIL" and "interrupted" in attrs]
    assert case.orphans() == []


def test_a_detached_run_survives_its_terminal_hanging_up(case: Case) -> None:
    # `tune status` must find the run still going: servers that load for 2 s each keep it going for tens of
    # seconds whatever the machine's load (a `tune status` took 40 s on a machine loaded 6 times over, when the
    # 0.02 s loads had let the run end before it).
    slow(case, load_s=2)
    shown = _in_a_terminal_that_hangs_up(
        case, "start", "--config", "fault.toml", "--trials", "3", "--detach",
        until=r"stop: +tune interrupt --config fault\.toml",
    )  # fmt: skip
    pid = int(re.search(r"running in the background as pid (\d+)", shown).group(1))  # type: ignore[union-attr]
    assert alive(pid), "the detached run died with its terminal"

    status = case.tune("status")
    assert status.rc == 0, status.err
    assert f"run: pid {pid} on " in status.out and "(detached, log runs/fault/tune.log)" in status.out
    assert "stop it with: tune interrupt --config fault.toml" in status.out

    _wait("the run to end", lambda: not alive(pid))
    assert case.counted() == 3
    record = _record(case)
    assert record is not None and record["status"] == 0 and record["state"] == "finished"
    logs = case.tune("logs")
    assert logs.rc == 0, logs.err
    assert logs.out.startswith("=== ") and f"(pid {pid}) ===" in logs.out.splitlines()[0]
    assert "study fault: 3/3 trials (3 run now" in logs.out and "notify: done (sh, " in logs.out
    assert json.loads((case.root / "notified-finished.json").read_text())["trials"]["counted"] == 3
    assert "last run: pid" in case.tune("status").out
    assert case.orphans() == []  # on_exit = "stop"


def test_interrupt_stops_a_detached_run_as_ctrl_c_would(case: Case) -> None:
    # Servers that load for 10 s: `tune interrupt` (a new process) lands while a trial's server loads.
    slow(case, load_s=10)
    started = case.tune("start", "--trials", "6", "--detach")
    assert started.rc == 0, started.err
    assert started.out.startswith("tune: running in the background as pid ")
    pid = _record(case)["pid"]  # type: ignore[index]
    storage = f"sqlite:///{case.storage}"
    _wait("a trial to run", lambda: bool([n for n in running_trials(storage, with_attr="command") if n >= 1]))
    again = case.tune("start", "--trials", "6", "--detach")
    assert again.rc == 3 and again.message.startswith("tune: environment: study fault is running already: pid ")
    server = case.tune("stop")  # the server's stop is refused while the run holds it, and names the run's
    assert server.rc == 3
    assert server.message.endswith("To stop that run as Ctrl-C would: tune interrupt --config fault.toml")

    stopped = case.tune("interrupt")
    assert stopped.rc == 0, stopped.err
    assert "asked pid" in stopped.err and "to stop as Ctrl-C would" in stopped.err
    assert "the run ended: interrupted (exit 130)" in stopped.err
    resume = [line for line in stopped.err.splitlines() if line.startswith("tune: stopped at ")]
    assert resume and resume[0].endswith("Resume with: tune start --trials 6 --config fault.toml")
    assert not alive(pid)
    assert case.orphans() == []  # the server was put back per on_exit = "stop"
    failed = [attrs for _, state, attrs in case.trials_table() if state == "FAIL"]
    assert failed and all("interrupted" in attrs for attrs in failed)
    sent = json.loads((case.root / "notified-interrupted.json").read_text())
    assert sent["exit_status"] == 130 and sent["resume"] == "tune start --trials 6 --config fault.toml"
    assert "last run: pid" in case.tune("status").out and "interrupted (exit 130)" in case.tune("status").out

    twice = case.tune("interrupt")
    assert twice.rc == 1 and twice.message.startswith("tune: error: study fault is not running: its last run was pid")


def test_a_detached_run_that_fails_at_once_fails_in_the_foreground(case: Case) -> None:
    case.edit(lambda t: t.replace(f'"{sys.executable}", "-u"', '"/opt/nowhere/python3", "-u"'))
    run = case.tune("start", "--detach")
    assert run.rc == 3, run.err
    assert "tune: environment: launch program /opt/nowhere/python3 not found" in run.err
    assert "running in the background" not in run.out


def test_logs_and_interrupt_without_a_detached_run(case: Case) -> None:
    logs = case.tune("logs")
    assert logs.rc == 1 and logs.message.startswith("tune: error: no run of study fault was started from here")
    assert case.start().rc == 0
    logs = case.tune("logs")
    assert logs.rc == 1 and "printed to its terminal: only a run started with --detach writes" in logs.message
    stop = case.tune("interrupt")
    assert stop.rc == 1 and "is not running: its last run was pid" in stop.message
    assert "finished (exit 0)" in stop.message
