"""The run record belongs to the run that holds the lock: a start refused by a live run's lock touches nothing of
that run's (record, notify hook, log), and ``tune status`` / ``interrupt`` still find it. A study in another
storage has a record of its own, and no file tune writes keeps a storage password. Real `tune start` processes
against the time-scaled simulator, and a real PostgreSQL."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_faults import Case, alive
from fixtures_postgres import postgres_url
from fixtures_study import running_trials

__all__ = ["postgres_url"]

HOOK = 'notify = ["sh", "-c", "cat > notified-$TUNE_STATE-$$.json"]'
PASSWORD = "Pw-9f3c1e77ab"


@pytest.fixture
def case(tmp_path: Path, port: int) -> Iterator[Case]:
    c = Case(tmp_path, port, trials=2)
    c.edit(lambda t: t.replace("[study]\n", f"[study]\n{HOOK}\n", 1))
    try:
        yield c
    finally:
        for record in c.root.glob("runs/*/run*.json"):
            if alive(json.loads(record.read_text())["pid"]):
                c.tune("interrupt")
        c.cleanup()


def _notified(case: Case) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(p.read_text()) for p in sorted(case.root.glob("notified-*.json"))]


def _wait(what: str, check, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_refused_second_start_leaves_the_running_study_alone(case: Case) -> None:
    # Servers that load for 10 s (at the time scale): the first run is busy with a trial when the second comes.
    case.edit(lambda t: t.replace('"--sim-load-time", "0.2"', '"--sim-load-time", "100"').replace(
        "[study]\n", f"[study]\n{HOOK}\n", 1))  # fmt: skip
    started = case.tune("start", "--trials", "6", "--detach")
    assert started.rc == 0, started.err
    record_file = case.root / "runs" / "fault" / "run.json"
    log = case.root / "runs" / "fault" / "tune.log"
    pid = json.loads(record_file.read_text())["pid"]
    _wait("a trial to run", lambda: bool(running_trials(f"sqlite:///{case.storage}", with_attr="command")))
    before, log_before = record_file.read_text(), log.read_bytes()

    again = case.tune("start", "--trials", "6")
    assert again.rc == 3 and "is being tuned by" in again.message and f"pid {pid}" in again.message, again.err
    assert record_file.read_text() == before  # the live run's record, not the refused start's
    assert log.read_bytes()[: len(log_before)] == log_before
    assert _notified(case) == []  # no false alarm in the night

    status = case.tune("status")
    assert status.rc == 0 and f"run: pid {pid} on " in status.out, status.out
    stopped = case.tune("interrupt")
    assert stopped.rc == 0 and "the run ended: interrupted (exit 130)" in stopped.err, stopped.err
    assert not alive(pid)
    assert [s["state"] for s in _notified(case)] == ["interrupted"]  # the run's own end, once


def test_another_storage_has_its_own_record_and_no_file_keeps_its_password(case: Case, postgres_url: str) -> None:
    assert case.start().rc == 0
    finished = (case.root / "runs" / "fault" / "run.json").read_text()
    user, _, rest = postgres_url.removeprefix("postgresql://").partition("@")
    url = f"postgresql://{user}:{PASSWORD}@{rest}"  # trust authentication: the password is carried, not checked
    study = f"pw-{case.port}"
    run = case.tune("start", "--trials", "2", "--storage", url, "--study", study, "--detach")
    assert run.rc == 0, run.err
    records = [p for p in (case.root / "runs").rglob("run-*.json")]
    assert len(records) == 1, records
    _wait("the run to end", lambda: json.loads(records[0].read_text())["ended"] is not None)
    ended = json.loads(records[0].read_text())
    assert ended["state"] == "finished", ended
    assert "--storage 'postgresql://postgres:***@" in ended["command"]  # not vacuous: the URL is kept, masked
    assert (case.root / "runs" / "fault" / "run.json").read_text() == finished  # the file's study untouched
    assert "last run: pid" in case.tune("status").out and "finished (exit 0)" in case.tune("status").out
    shown = [case.tune(*verb, "--storage", url, "--study", study) for verb in (("status",), ("best",), ("logs",))]
    assert all(r.rc == 0 for r in shown), [r.err for r in shown]
    assert "study pw-" in shown[2].out  # the run's own log, found by its storage
    assert "deploy: tune apply --best --storage 'postgresql://postgres:***@" in shown[1].out  # masked: supply it
    holding = [str(p) for p in case.root.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert holding == []
    assert not [r for r in shown if PASSWORD in r.out + r.err]
    assert any(re.search(r"postgres:\*\*\*@", p.read_text(errors="replace")) for p in case.root.glob("notified-*"))
