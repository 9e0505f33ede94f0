"""What a user reads agrees with what happened: `tune finish`'s count, a dry run's skipped numbers, the study
note's words for `[gate] when`, an interrupted run's `run_now`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_faults import Case

from tuner.cli import main
from tuner.config import load_config
from tuner.report import study_note_text

STUDIES = Path(__file__).resolve().parents[2] / "studies"


@pytest.fixture
def case(tmp_path: Path, port: int) -> Iterator[Case]:
    c = Case(tmp_path, port, trials=2)
    try:
        yield c
    finally:
        c.cleanup()


def test_finish_counts_against_the_study_s_target(case: Case) -> None:
    assert case.start().rc == 0
    finished = case.tune("finish")
    assert finished.rc == 0, finished.err
    assert finished.out.startswith("study fault: 2/2 trials (0 run now"), finished.out


def test_an_interrupted_run_tells_notify_the_trials_it_ran(case: Case) -> None:
    case.edit(lambda t: t.replace("[study]\n", '[study]\nnotify = ["sh", "-c", "cat > notified.json"]\n', 1))
    proc = case.spawn(trials=4)
    case.wait_running(proc, after=1)  # the baseline has its verdict: this run ran at least one trial
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    sent = json.loads((case.root / "notified.json").read_text())
    assert isinstance(sent["run_now"], int) and sent["run_now"] >= 1, sent


def test_a_dry_run_says_why_numbers_are_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["start", "--dry-run", "12", "--config", str(STUDIES / "llama-server.toml")]) == 0
    out = capsys.readouterr().out
    numbers = [int(n) for n in re.findall(r"^# trial #(\d+) ", out, flags=re.MULTILINE)]
    gaps = [n for n in range(max(numbers)) if n not in numbers]
    assert gaps, "this study's space repeats itself: its dry run must skip numbers"
    said = ", ".join(f"#{n}" for n in gaps)
    assert f"# numbers skipped ({said}): samples a real start rejects without a launch" in out


@pytest.mark.parametrize(
    ("when", "words"),
    [
        ("before", "run before the benchmark"),
        ("after", "run after the benchmark"),
        ("contenders", "run on the configs that could become the best"),
        ("final", "run on the finalists, at the end of the study"),
    ],
)
def test_the_study_note_says_when_the_gate_runs(when: str, words: str) -> None:
    config = load_config(STUDIES / "demo.toml")
    assert config.gate is not None
    config = dataclasses.replace(config, gate=dataclasses.replace(config.gate, when=when))
    note = study_note_text(config)
    assert f"coding problems ({words})." in note, note
