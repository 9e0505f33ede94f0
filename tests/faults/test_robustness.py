"""Process, signal and storage faults around a real `tune start`: no orphan server, no raw traceback, every exit
path puts the server back and releases the lock, and no finished trial is lost."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_faults import Case, alive


def assert_clean(case: Case) -> None:
    assert case.orphans() == [], "no server may outlive tune"
    assert not case.lock_path.exists(), "the lock must be released"


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def wait_for(predicate, timeout: float = 60, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_kill_9_during_the_launch_leaves_a_record_the_next_start_stops(case: Case) -> None:
    case.trials = 3
    proc = case.spawn()
    state = case.root / "runs" / case.name / "state"
    # The window the old code lost: the server is launched, tune has not written its record yet.
    wait_for(lambda: any(state.glob(".server-*.trial-*.pgid")), what="a launch")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    orphans = case.orphans()
    wait_for(lambda: bool(case.orphans()), timeout=10, what="the server to be up") if not orphans else None
    orphans = case.orphans()
    assert orphans, "the server outlived tune (that is the fault being tested)"
    assert any(state.glob("server-*.json")), "the intent record was written before the launch"
    run = case.start()
    assert run.rc == 0, run.err
    assert not any(alive(pid) for pid in orphans), "the next start stopped the orphan by its record"
    assert case.counted() == 3
    assert_clean(case)


def test_deleting_the_log_dir_mid_run_loses_no_server(case: Case) -> None:
    case.trials = 3
    proc = case.spawn()
    case.wait_running(proc, after=1)
    import shutil

    shutil.rmtree(case.root / "runs" / "logs")
    rc, err = finish(proc)
    assert rc == 0, err
    assert case.counted() == 3
    assert_clean(case)


def test_sighup_is_handled_like_sigterm(case: Case) -> None:
    case.trials = 4
    proc = case.spawn()
    number = case.wait_running(proc, after=1)
    os.kill(proc.pid, signal.SIGHUP)
    rc, err = finish(proc)
    assert rc == 130, err
    assert "Resume with: tune start --trials 4" in err
    table = dict((n, (state, attrs)) for n, state, attrs in case.trials_table())
    assert table[number][0] == "FAIL" and "interrupted" in table[number][1]
    assert_clean(case)


def test_a_running_trial_without_an_owner_is_recovered_and_the_run_reaches_n(case: Case) -> None:
    import optuna

    assert case.start().rc == 0  # 2 counted
    study = optuna.load_study(study_name=case.name, storage=f"sqlite:///{case.storage}")
    orphan = study.ask()  # RUNNING, no worker, no heartbeat: a tune killed between ask() and its first attr
    case.trials = 3
    run = case.start()
    assert run.rc == 0, run.err
    assert case.counted() == 3  # it holds no trial slot, so it never stands in the run's way
    assert_clean(case)
    # Ownerless for longer than one heartbeat interval: stale (a live worker binds its trial within milliseconds).
    # A run slower than that interval (a loaded machine) has recovered it itself; else it is recovered now.
    from tuner.study._recovery import HEARTBEAT_S, recover_stale_trials

    recovered = recover_stale_trials(study, now=time.time() + HEARTBEAT_S + 1)
    left = study.trials[orphan.number]
    assert recovered == [orphan.number] or (not recovered and left.state == optuna.trial.TrialState.FAIL)
    assert study.trials[orphan.number].user_attrs["interrupted"] == "stale: worker gone"
    states = [state for _, state, _ in case.trials_table()]
    assert "RUNNING" not in states


def test_status_on_a_missing_study_creates_nothing(case: Case) -> None:
    run = case.tune("status")
    assert run.rc == 1, run.err
    assert run.err.strip().count("\n") == 0 and "no study database" in run.err
    assert not (case.root / "runs").exists()
    assert case.start().rc == 0
    run = case.tune("status", "--study", "other")
    assert run.rc == 1 and f"no study 'other' in sqlite:///{case.storage}; studies there: {case.name}" in run.err


def test_cli_edges(case: Case) -> None:
    for bad in ("0", "-3"):
        run = case.tune("start", "--trials", bad)
        assert run.rc == 2 and "at least 1 trial" in run.err, run.err
    assert not (case.root / "runs").exists()
    case.trials = 2
    assert case.start().rc == 0
    run = case.tune("status")
    assert run.rc == 0 and "2/2 counted trials" in run.out  # the run's N, not the file's
    piped = subprocess.run(
        f"{sys.executable} -m tuner status --json --config {case.path} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=case.root,
    )
    assert piped.stdout.strip() == "[" and piped.stderr == ""


def test_a_start_refused_by_the_lock_creates_nothing(case: Case, tmp_path: Path) -> None:
    # Trials enough to outlast both refused starts on any machine: once the first run ends, its lock is gone and a
    # later start rightly runs its own study (what this test once met, at load 8-14, with 6 trials).
    case.trials = 600
    first = case.spawn()
    case.wait_running(first)
    (tmp_path / "second").mkdir()
    other = Case(tmp_path / "second", case.port, name="second")
    # With or without the preflight, the one line names the other tune (not "port held by a stranger").
    for extra in ((), ("--skip-preflight",)):
        run = other.start(*extra)
        assert first.poll() is None, "the first run ended before the second start: nothing held the lock"
        assert run.rc == 3 and "is being tuned by" in run.message and "study 'fault'" in run.message, run.err
        made = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "second").rglob("*"))
        assert not other.storage.exists() and not (tmp_path / "second" / "runs").exists(), made
    os.kill(first.pid, signal.SIGTERM)
    _, err = finish(first)
    assert "Resume with: tune start --trials 600" in err, err  # the first run was interrupted, not broken
    assert_clean(case)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def on_storage(case: Case, directory: Path) -> None:
    url = f"sqlite:///{directory / 'study.db'}"
    case.edit(lambda t: t.replace("[target]", f'storage = "{url}"\n\n[target]'))


def test_disk_full_mid_run_ends_with_one_line_and_loses_nothing(case: Case, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "3m") as disk:
        on_storage(case, disk)
        assert case.start().rc == 0
        case.trials = 4
        proc = case.spawn()
        case_storage = disk / "study.db"
        wait_for(lambda: _running_with_command(case_storage), what="a running trial")
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as f:
            while True:
                f.write(b"\0" * 65536)
        rc, err = finish(proc)
        assert rc == 3, err
        verdict = [line for line in err.splitlines() if line.startswith("tune: ")]
        assert verdict == [verdict[0]] and f"storage {case_storage}: the disk is full" in verdict[0], err
        assert "Traceback" not in err
        assert_clean(case)
        (disk / "filler").unlink()
        run = case.start()
        assert run.rc == 0, run.err
        assert _counted(case_storage) == 4  # the 2 finished before the fault are still there


def test_read_only_storage_is_refused_by_the_preflight(case: Case, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "8m") as disk:
        on_storage(case, disk)
        assert case.start().rc == 0
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        case.trials = 3
        run = case.start()
        assert run.rc == 3, run.err
        assert f"storage {disk / 'study.db'} cannot be written (read-only file system)" in run.err
        assert_clean(case)


def test_a_locked_database_is_waited_out_then_given_up_with_one_line(case: Case) -> None:
    case.edit(lambda t: t.replace("[target]", "storage_busy_s = 3\n\n[target]", 1))
    assert case.start().rc == 0
    holder = sqlite3.connect(case.storage, timeout=1, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    case.trials = 3
    try:
        run = case.start()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run.rc == 3, run.err
    assert "is locked by another process; waiting up to 3 s" in run.err
    assert f"storage {case.storage}: another process held its write lock past the wait limit" in run.message
    assert "Traceback" not in run.err
    assert_clean(case)
    assert case.start().rc == 0 and case.counted() == 3


def _running_with_command(storage: Path) -> bool:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{storage}?mode=ro", uri=True, timeout=1)) as conn:
            return bool(
                conn.execute(
                    "SELECT 1 FROM trials t JOIN trial_user_attributes a ON a.trial_id = t.trial_id "
                    "WHERE t.state = 'RUNNING' AND a.key = 'command'"
                ).fetchall()
            )
    except sqlite3.Error:
        return False


def _counted(storage: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{storage}?mode=ro", uri=True)) as conn:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM trials t WHERE t.state IN ('COMPLETE', 'PRUNED') AND NOT EXISTS "
                "(SELECT 1 FROM trial_user_attributes a WHERE a.trial_id = t.trial_id "
                "AND a.key IN ('rejected', 'duplicate_of'))"
            ).fetchone()[0]
        )


def wrapper(case: Case, body: str) -> Path:
    script = case.root / "run.sh"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def use_wrapper(case: Case, script: Path) -> None:
    case.edit(lambda t: t.replace(f'"{sys.executable}", "-u", "-m", "tuner.sim",', f'"{script}",'))


def test_a_launch_wrapper_that_execs_is_verified_by_its_flags(case: Case) -> None:
    use_wrapper(case, wrapper(case, f'exec "{sys.executable}" -u -m tuner.sim "$@"'))
    run = case.start()
    assert run.rc == 0, run.err
    assert case.counted() == 2 and "config not applied" not in run.err
    assert_clean(case)


def test_a_launch_wrapper_that_drops_the_flags_fails_before_readiness(case: Case) -> None:
    # Its server would load for ten minutes, readiness would wait an hour: only the check right after the
    # start can end this run while the test runs.
    body = f'exec "{sys.executable}" -u -m tuner.sim --host 127.0.0.1 --port {case.port} --sim-load-time 600'
    use_wrapper(case, wrapper(case, body))
    case.edit(
        lambda t: t.replace(f'"{sys.executable}", "-u", "-m", "tuner.sim",', f'"{case.root / "run.sh"}",').replace(
            "timeout_s = 30", "timeout_s = 3600"
        )
    )
    run = case.start()
    assert run.rc == 3, run.err
    assert run.message.startswith("tune: environment: the unmodified base command fails: [apply] config not applied")
    assert "readiness was not awaited" in run.message
    (_, state, attrs), *_ = case.trials_table()
    # The base command's failure is the environment's (FAIL, not counted), found at the apply step.
    assert state == "FAIL" and attrs["failure_phase"] == '"apply"' and attrs["failure_kind"] == '"environment"', attrs
    assert_clean(case)


def test_check_help_that_never_exits_is_bounded_and_leaves_nothing(case: Case) -> None:
    marker = case.root / "helper.pid"
    use_wrapper(case, wrapper(case, f'sleep 300 & echo $! > "{marker}"\nwait'))
    case.edit(
        lambda t: t.replace(f'"{sys.executable}", "-u", "-m", "tuner.sim",', f'"{case.root / "run.sh"}",').replace(
            "[target]\n", "[target]\ncheck_timeout_s = 2\n", 1
        )
    )
    run = case.tune("check")
    assert "run.sh --help` did not exit within 2 s: flags not verified" in run.out, run.out + run.err
    assert "at most 2 s" in run.err  # the progress line
    assert not alive(int(marker.read_text())), "the --help process group was killed"
    case.edit(lambda t: t.replace("[target]\n", "[target]\ncheck_flags = false\n", 1))
    run = case.tune("check")
    assert "not checked against `--help` ([target] check_flags = false)" in run.out


def test_check_cycle_leaves_the_server_as_found_and_stop_stops_it(case: Case) -> None:
    import socket

    def serving() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", case.port)) == 0

    run = case.tune("check", "--cycle")
    assert run.rc == 0, run.out + run.err
    assert run.out.strip().splitlines()[-1].startswith(" ✓ one full")
    assert not serving() and case.orphans() == [], "nothing ran before the check: nothing runs after it"
    assert case.tune("restore").rc == 0 and serving()
    run = case.tune("stop")
    assert run.rc == 0 and "stopped pid" in run.out, run.out + run.err
    assert not serving() and case.orphans() == []
    run = case.tune("stop")
    assert run.rc == 0 and "nothing tune started is running" in run.out
    assert not case.lock_path.exists()


def test_a_second_signal_during_the_restore_still_prints_the_resume_hint(case: Case) -> None:
    # on_exit = baseline restarts the server; a slow start keeps tune in the restore long enough to signal it.
    case.edit(lambda t: t.replace('on_exit = "stop"', 'on_exit = "baseline"').replace('"0.2"', '"3"'))
    case.trials = 4
    proc = case.spawn()
    case.wait_running(proc, after=1)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "restoring the baseline" in line:
            break
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    err = "".join(seen) + err
    assert proc.returncode == 130, err
    assert "interrupted again: on_exit = 'baseline' was not finished" in err
    assert "Resume with: tune start --trials 4" in err
    assert "Traceback" not in err
    assert not case.lock_path.exists()
    assert case.tune("stop").rc == 0  # whatever the restore left running is recorded, so `tune stop` ends it
    assert case.orphans() == []


def test_a_death_under_load_quotes_the_server_log_s_cause(case: Case) -> None:
    """The simulator dies as a scheduler does mid-batch (a CUDA error traceback, then the process exits): the stop
    names the log's cause, not only "requests failed"."""
    case.edit(lambda t: t.replace('"--sim-seed", "5",', '"--sim-seed", "5", "--sim-crash-above-batch-tokens", "50",'))
    run = case.start()
    assert run.rc == 3, run.err
    assert run.message.startswith("tune: environment: the unmodified base command fails: [benchmark] died under load")
    assert "the server log says: RuntimeError: CUDA error: an illegal memory access was encountered" in run.message
    stored = next(attrs for number, _, attrs in case.trials_table() if number == 0)  # the baseline
    assert "the server log says: RuntimeError: CUDA error" in stored["failure_reason"]
    assert_clean(case)
