"""The commands `tune` prints to continue a study work as printed, and a resume keeps the study's own target."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_faults import Case, Run


@pytest.fixture
def case(tmp_path: Path, port: int) -> Iterator[Case]:
    c = Case(tmp_path, port, trials=4)  # the study file asks for 4; the runs below ask for 2
    try:
        yield c
    finally:
        c.cleanup()


def run_printed(case: Case, command: str, **replace: str) -> Run:
    """Run a ``tune ...`` line exactly as tune printed it (``replace`` swaps one argument's value)."""
    argv = shlex.split(command)
    assert argv[0] == "tune", command
    for flag, value in replace.items():
        argv[argv.index(flag) + 1] = value
    return case.tune(*argv[1:])


def counted_line(run: Run) -> str:
    return run.out.splitlines()[0]


def test_the_interrupt_hint_resumes_a_study_addressed_by_its_storage(case: Case) -> None:
    # A study name other than the file's: the hint must address the study through its storage.
    proc = case.spawn("--study", "other", trials=2)
    case.wait_running(proc, after=1)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = err.splitlines()[-1]
    prefix = "tune: stopped at 1/2 trials. Resume with: "
    assert last.startswith(prefix), last
    hint = last.removeprefix(prefix)
    assert hint == f"tune resume --storage sqlite:///{case.storage} --study other --trials 2"
    resumed = run_printed(case, hint)
    assert resumed.rc == 0, resumed.err
    assert counted_line(resumed).startswith("study other: 2/2 trials (1 run now")


def test_resume_keeps_the_trials_the_study_was_started_with(case: Case) -> None:
    started = case.tune("start", "--trials", "2", "--study", "kept")
    assert started.rc == 0, started.err
    resumed = case.tune("resume", "--storage", f"sqlite:///{case.storage}", "--study", "kept")
    assert resumed.rc == 0, resumed.err
    assert counted_line(resumed).startswith("study kept: 2/2 trials (0 run now"), resumed.out  # not 4, the file's
    # A study complete already says so, and how to run more: that command works as printed.
    more = resumed.out.splitlines()[1]
    url = f"sqlite:///{case.storage}"
    assert more == (
        f"the study was complete already (it holds its 2 trials); more trials: tune resume --storage {url} "
        "--study kept --trials 12"
    )
    extended = run_printed(case, more.rpartition("more trials: ")[2], **{"--trials": "3"})
    assert extended.rc == 0, extended.err
    assert counted_line(extended).startswith("study kept: 3/3 trials (1 run now")


def test_a_complete_study_started_again_from_its_file_says_how_to_go_on(case: Case) -> None:
    assert case.tune("start", "--trials", "2").rc == 0
    again = case.tune("start", "--trials", "2")
    assert again.rc == 0, again.err
    assert counted_line(again).startswith("study fault: 2/2 trials (0 run now")
    assert again.out.splitlines()[1] == (
        "the study was complete already (it holds its 2 trials); more trials: tune start --trials 12 --config "
        f"{case.path.name}; a new study: tune start --config {case.path.name} --study fault-2"
    )
    fresh = run_printed(case, again.out.splitlines()[1].rpartition("a new study: ")[2])
    assert fresh.rc == 0, fresh.err
    assert counted_line(fresh).startswith("study fault-2: 4/4 trials (4 run now")
