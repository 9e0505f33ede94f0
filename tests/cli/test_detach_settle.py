"""``--detach`` leaves a run in the background once the run says it is under way (preflight passed, study open),
not after a fixed few seconds: a run that fails in its preflight fails in the foreground however long a loaded
machine takes to bring it there, and one under way is left at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tuner.cli._run import DETACH_FD_ENV, _settle

# A run as ``detach()`` starts it: the pipe's write end in the environment; it fails (exit 3) when its standard
# input ends, or says it is under way when it reads "go".
_RUN = f"""
import os, sys
fd = int(os.environ["{DETACH_FD_ENV}"])
print("preflight...", flush=True)
line = sys.stdin.readline()
if line.strip() == "go":
    os.write(fd, b"1")
    os.close(fd)
    sys.stdin.read()
    sys.exit(0)
print("tune: environment: launch program /opt/nowhere/python3 not found", flush=True)
sys.exit(3)
"""


def _start(log: Path) -> tuple[subprocess.Popen[bytes], object]:
    ready, told = os.pipe()
    with log.open("ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", _RUN], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            pass_fds=(told,), env={**os.environ, DETACH_FD_ENV: str(told)},
        )  # fmt: skip
    os.close(told)
    return child, os.fdopen(ready, "rb", buffering=0)


def test_a_run_that_fails_after_the_old_five_seconds_still_fails_in_the_foreground(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "tune.log"
    child, pipe = _start(log)
    settled: list[int | None] = []
    waiting = threading.Thread(target=lambda: settled.append(_settle(child, log, 0, pipe)))
    waiting.start()
    time.sleep(6.0)  # a preflight slower than the fixed window --detach used to wait (5 s)
    assert waiting.is_alive() and not settled, "left in the background before the run said it was under way"
    assert child.stdin is not None
    child.stdin.close()
    waiting.join(timeout=60)
    assert settled == [3]
    err = capsys.readouterr().err
    assert "preflight..." in err and "launch program /opt/nowhere/python3 not found" in err


def test_a_run_under_way_is_left_in_the_background_at_once(tmp_path: Path) -> None:
    log = tmp_path / "tune.log"
    child, pipe = _start(log)
    assert child.stdin is not None
    child.stdin.write(b"go\n")
    child.stdin.flush()
    try:
        assert _settle(child, log, 0, pipe) is None
        assert child.poll() is None, "the run goes on"
    finally:
        child.stdin.close()
        child.wait(timeout=60)
