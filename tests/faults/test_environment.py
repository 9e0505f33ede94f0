"""The world's faults are never a configuration's: `tune start` as a user runs it, with the environment broken.

Every case ends with exit status 3 and one line saying what is wrong, charges no trial to a configuration,
leaves no server and no lock behind, and after the fix a plain `tune start` runs the baseline and reaches N.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from fixtures_faults import Case, stranger


def assert_clean(case: Case) -> None:
    assert case.orphans() == [], "no server may outlive tune"
    assert not case.lock_path.exists(), "the lock must be released"


def assert_recovers(case: Case) -> None:
    """After the fix, a plain start runs the baseline (again) and reaches N."""
    run = case.start()
    assert run.rc == 0, run.err
    assert case.counted() == case.trials
    baselines = [(n, state) for n, state, attrs in case.trials_table() if attrs.get("baseline") == "true"]
    assert baselines[-1][1] == "COMPLETE", baselines
    assert_clean(case)


def test_port_held_by_a_stranger_is_refused_before_anything_is_created(case: Case, tmp_path: Path) -> None:
    other = stranger(case.port, tmp_path / "stranger.log")
    try:
        run = case.start()
        assert run.rc == 3, run.err
        assert f"port {case.port}" in run.err and f"held by pid {other.pid}" in run.err
        assert "http.server" in run.err  # its command line, so the user knows what to stop
        assert not case.storage.exists(), "a refused start creates no study"
        assert_clean(case)
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert_recovers(case)


def test_port_held_by_a_stranger_without_preflight_stops_at_the_baseline(case: Case, tmp_path: Path) -> None:
    other = stranger(case.port, tmp_path / "stranger.log")
    try:
        run = case.start("--skip-preflight")
        assert run.rc == 3, run.err
        assert "the unmodified base command fails" in run.message, run.err
        assert "address already in use" in run.message.lower() or "other than the new server" in run.message
        assert case.counted() == 0
        number, state, attrs = case.trials_table()[0]
        assert (number, state, attrs["failure_kind"]) == (0, "FAIL", '"environment"')
        assert_clean(case)
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    assert_recovers(case)


def test_bad_flag_in_the_base_command_stops_at_the_baseline(case: Case) -> None:
    case.edit(lambda t: t.replace('"--sim-seed", "5",', '"--sim-seed", "5", "--no-such-flag",'))
    run = case.start()
    assert run.rc == 3, run.err
    assert "the unmodified base command fails" in run.message and "--no-such-flag" in run.message
    assert case.counted() == 0
    assert_clean(case)
    case.edit(lambda t: t)  # the fix changes the base command: a study with no verdict accepts it
    assert_recovers(case)


def test_missing_program_is_named_by_the_preflight(case: Case) -> None:
    case.edit(lambda t: t.replace(f'"{sys.executable}", "-u"', '"/opt/nowhere/python3", "-u"'))
    run = case.start()
    assert run.rc == 3, run.err
    assert "launch program /opt/nowhere/python3 not found" in run.err
    assert not case.storage.exists()
    run = case.start("--skip-preflight")
    assert run.rc == 3 and "the unmodified base command fails" in run.message, run.err
    assert "127" in run.message
    assert case.counted() == 0
    assert_clean(case)
    case.edit(lambda t: t)
    assert_recovers(case)


def test_base_url_port_other_than_the_commands(case: Case, port: int) -> None:
    from tuner.sim.testing import free_port

    wrong = free_port()
    case.edit(lambda t: t.replace(f'base_url = "http://127.0.0.1:{port}"', f'base_url = "http://127.0.0.1:{wrong}"'))
    run = case.start()
    assert run.rc == 3, run.err
    assert f"says port {wrong} but target.command says --port {port}" in run.err
    run = case.start("--skip-preflight")
    assert run.rc == 3, run.err
    assert f"listens on port {port}, but base_url" in run.message
    assert case.counted() == 0
    assert_clean(case)


def test_health_path_answering_404_fails_fast_with_the_fix(case: Case) -> None:
    case.edit(lambda t: t.replace("[readiness]\n", '[readiness]\nhealth_path = "/healthz"\n'))
    run = case.start()
    assert run.rc == 3, run.err
    assert "/healthz answered 404" in run.message and 'health_path = ""' in run.message
    assert case.counted() == 0
    assert_clean(case)
    case.edit(lambda t: t)
    assert_recovers(case)


def test_hung_server_fails_after_stall_s_not_the_timeout(case: Case) -> None:
    case.edit(
        lambda t: t.replace('"--sim-seed", "5",', '"--sim-seed", "5", "--sim-hang",').replace(
            "[readiness]\n", "[readiness]\nstall_s = 2\nrequest_timeout_s = 0.5\n"
        )
    )
    run = case.start()
    assert run.rc == 3, run.err
    assert "the unmodified base command fails" in run.message and "hung" in run.message
    assert case.counted() == 0
    assert_clean(case)


def test_repeated_identical_failures_stop_the_run_and_are_not_counted(case: Case) -> None:
    # A tuned flag this server does not know: the baseline works, every sampled config fails the same way.
    ghost = '[space.ghost]\ntype = "int"\nlow = 1\nhigh = 64\nflag = "--no-such-tuned-flag"\ndefault = 1\n\n'
    case.edit(lambda t: t.replace("[[constraints]]", ghost + "[[constraints]]"))
    case.trials = 6
    run = case.start()
    assert run.rc == 3, run.err
    assert "3 trials in a row" in run.message and "unrecognized arguments" in run.message
    table = case.trials_table()
    assert case.counted() == 1  # the baseline
    failed = [attrs for _, state, attrs in table if state == "FAIL"]
    assert len(failed) == 3 and all(a["failure_kind"] == '"environment"' for a in failed)
    waiting = [n for n, state, _ in table if state == "WAITING"]
    assert len(waiting) == 3, "their params run again once the environment is fixed"
    assert_clean(case)
