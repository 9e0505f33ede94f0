"""What `tune start` does when the world is broken: exit status, verdict, orphans, trials burned, time to exit.

Runs each fault case of tests/faults once (real `tune` subprocesses, the simulator, a stranger process; or
only the cases whose label contains the first argument) and prints the Markdown table docs/faults.md shows. Root
is needed for the disk-full and read-only cases (a small tmpfs); without it they are reported as skipped.

    .venv/bin/python scripts/bench_faults.py
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fixtures_faults import Case, Run, stranger

from tuner.sim.testing import free_port

Row = tuple[str, Run, Case, int]
SIM = f'"{sys.executable}", "-u", "-m", "tuner.sim",'


def _stranger(case: Case, *extra: str) -> Run:
    other = stranger(case.port, case.root / "stranger.log")
    try:
        return case.start(*extra)
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()


def bad_flag(case: Case) -> Run:
    case.edit(lambda t: t.replace('"--sim-seed", "5",', '"--sim-seed", "5", "--no-such-flag",'))
    return case.start()


def missing_program(case: Case, *extra: str) -> Run:
    case.edit(lambda t: t.replace(SIM, '"/opt/nowhere/python3", "-u", "-m", "tuner.sim",'))
    return case.start(*extra)


def wrong_port(case: Case, *extra: str) -> Run:
    wrong = free_port()
    case.edit(lambda t: t.replace(f"127.0.0.1:{case.port}", f"127.0.0.1:{wrong}"))
    return case.start(*extra)


def no_health(case: Case) -> Run:
    case.edit(lambda t: t.replace("[readiness]\n", '[readiness]\nhealth_path = "/healthz"\n'))
    return case.start()


def hung(case: Case) -> Run:
    case.edit(
        lambda t: t.replace('"--sim-seed", "5",', '"--sim-seed", "5", "--sim-hang",').replace(
            "[readiness]\n", "[readiness]\nstall_s = 5\nrequest_timeout_s = 1\n"
        )
    )
    return case.start()


def same_failure(case: Case) -> Run:
    ghost = '[space.ghost]\ntype = "int"\nlow = 1\nhigh = 64\nflag = "--no-such-tuned-flag"\ndefault = 1\n\n'
    case.edit(lambda t: t.replace("[[constraints]]", ghost + "[[constraints]]"))
    case.trials = 6
    return case.start()


def kill_9_in_launch(case: Case) -> Run:
    proc = case.spawn(trials=3)
    state = case.root / "runs" / case.name / "state"
    deadline = time.monotonic() + 60
    while not any(state.glob(".trial-*.pgid")) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(1)  # let the orphan come up: it is the fault
    case.trials = 3
    return case.start()


def sighup(case: Case) -> Run:
    proc = case.spawn(trials=4)
    case.wait_running(proc, after=1)
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGHUP)
    out, err = proc.communicate(timeout=120)
    return Run(rc=proc.returncode, out=out, err=err, seconds=time.monotonic() - t0)


@contextlib.contextmanager
def _tmpfs(path: Path, size: str):  # type: ignore[no-untyped-def]
    path.mkdir(parents=True)
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode
    ):
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _on(case: Case, disk: Path) -> None:
    case.edit(lambda t: t.replace("[target]", f'storage = "sqlite:///{disk / "study.db"}"\n\n[target]'))


def disk_full(case: Case) -> Run | None:
    with _tmpfs(case.root / "small", "3m") as disk:
        if disk is None:
            return None
        _on(case, disk)
        case.start()
        proc = case.spawn(trials=4)
        time.sleep(3)  # a trial is running by now on an idle machine; the fill happens mid-run either way
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as f:
            while True:
                f.write(b"\0" * 65536)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=120)
        return Run(rc=proc.returncode, out=out, err=err, seconds=time.monotonic() - t0)


def read_only(case: Case) -> Run | None:
    with _tmpfs(case.root / "ro", "8m") as disk:
        if disk is None:
            return None
        _on(case, disk)
        case.start()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        case.trials = 3
        return case.start()


def db_locked(case: Case) -> Run:
    case.edit(lambda t: t.replace("[target]", "storage_busy_s = 3\n\n[target]", 1))
    case.start()
    holder = sqlite3.connect(case.storage, timeout=1, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    case.trials = 3
    try:
        return case.start()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def lock_held(case: Case) -> Run:
    case.trials = 6
    first = case.spawn()
    case.wait_running(first)
    (case.root / "second").mkdir()
    second = Case(case.root / "second", case.port, name="second")
    try:
        return second.start()
    finally:
        os.kill(first.pid, signal.SIGTERM)
        first.communicate(timeout=120)


def dropping_wrapper(case: Case) -> Run:
    script = case.root / "run.sh"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -u -m tuner.sim --port {case.port} --sim-load-time 600\n')
    script.chmod(0o755)
    case.edit(lambda t: t.replace(SIM, f'"{script}",').replace("timeout_s = 30", "timeout_s = 3600"))
    return case.start()


CASES: list[tuple[str, Callable[[Case], Run | None]]] = [
    ("(reference: `tune status` of a missing study, i.e. start-up cost)", lambda c: c.tune("status")),
    ("port held by a stranger (`python -m http.server`)", lambda c: _stranger(c)),
    ("... same, `--skip-preflight`", lambda c: _stranger(c, "--skip-preflight")),
    ("bad flag in the base command", bad_flag),
    ("launch program missing", lambda c: missing_program(c)),
    ("... same, `--skip-preflight` (exit 127)", lambda c: missing_program(c, "--skip-preflight")),
    ("`base_url` port != the command's `--port`", lambda c: wrong_port(c)),
    ("... same, `--skip-preflight`", lambda c: wrong_port(c, "--skip-preflight")),
    ("`/health` answers 404 (server without it)", no_health),
    ("hung server (`stall_s = 5`)", hung),
    ("every sampled config fails the same way", same_failure),
    ("`kill -9` of tune mid-launch, then `tune start` (to N = 3)", kill_9_in_launch),
    ("SIGHUP (the SSH session dropped; time from the signal)", sighup),
    ("disk full mid-run (3 MB tmpfs; time from the fill)", disk_full),
    ("storage on a read-only file system", read_only),
    ("database locked past `storage_busy_s = 3`", db_locked),
    ("another tune holds the server's lock", lock_held),
    ("launch wrapper drops the flags (its server loads for 600 s)", dropping_wrapper),
]


def main() -> int:
    only = sys.argv[1] if len(sys.argv) > 1 else ""  # a substring of the case labels to run
    print("| fault | exit | message | orphans | counted trials burned | time to exit | tune CPU |")
    print("|---|---|---|---|---|---|---|")
    for label, fn in CASES:
        if only not in label:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            case = Case(Path(tmp), free_port())
            counted_before = 0
            run = fn(case)
            if run is None:
                print(f"| {label} | skipped (needs root and tmpfs) | | | | |")
                continue
            orphans = case.orphans()
            burned = max(0, _burned(case, label) - counted_before)
            message = run.message.replace("|", "\\|")[:150]
            cpu = f"{run.cpu_s:.1f} s" if run.cpu_s == run.cpu_s else "-"
            print(f"| {label} | {run.rc} | {message} | {len(orphans)} | {burned} | {run.seconds:.1f} s | {cpu} |")
            case.cleanup()
    return 0


def _burned(case: Case, label: str) -> int:
    """Counted trials that are failures (a config charged with the environment's fault)."""
    if not case.storage.exists():
        return 0
    return sum(1 for _, state, attrs in case.trials_table() if state == "PRUNED" and "failure_reason" in attrs)


if __name__ == "__main__":
    raise SystemExit(main())
