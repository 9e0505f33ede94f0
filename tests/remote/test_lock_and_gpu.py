"""The target lock and the GPU-memory wait, over a real SSH connection."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fixtures_sshd import Sshd

from tuner.config import GpuWaitSection
from tuner.errors import LockHeld, Phase
from tuner.target import TargetLock
from tuner.target.hosts import LocalHost
from tuner.target.services._gpu import GpuBusy, wait_gpu_free


def test_second_tuner_gets_lock_held_with_owner_info(sshd: Sshd, tmp_path: Path) -> None:
    path = str(tmp_path / "tune-x.lock")
    a, b = sshd.host(), sshd.host()
    first = TargetLock(host=a, path=path, study="night-run", heartbeat_s=0)  # type: ignore[arg-type]
    second = TargetLock(host=b, path=path, study="other", heartbeat_s=0)  # type: ignore[arg-type]
    with first:
        with pytest.raises(LockHeld) as info:
            second.acquire()
        message = str(info.value)
        assert "night-run" in message and "pid" in message and "since" in message and "@" in message
        holder = second.holder()
        assert holder is not None and holder.study == "night-run"
    assert first.holder() is None  # released
    with second:
        assert second.held
    a.close()  # type: ignore[attr-defined]
    b.close()  # type: ignore[attr-defined]


def test_lock_of_a_dead_owner_on_the_same_host_is_taken_over(tmp_path: Path) -> None:
    path = str(tmp_path / "tune-y.lock")
    # Another tuner process takes the lock and dies without releasing it (kill -9).
    code = (
        "import os,sys; from tuner.target.hosts import LocalHost; from tuner.target import TargetLock;"
        f"TargetLock(host=LocalHost(), path={path!r}, study='crashed', heartbeat_s=0).acquire();"
        "os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    lock = TargetLock(host=LocalHost(), path=path, study="new", heartbeat_s=0)
    lock.acquire()
    assert lock.took_over is not None and lock.took_over.study == "crashed"
    lock.release()


def test_lock_without_heartbeat_goes_stale(tmp_path: Path) -> None:
    path = tmp_path / "tune-z.lock"
    now = int(time.time())
    # A lock from another machine (PID unverifiable) whose heartbeat stopped long ago.
    path.write_text(
        f"owner=alice@laptop\npid=1\npid_start=1\nmachine=elsewhere\nstudy=old\ntoken=abc\n"
        f"since={now - 7200}\nheartbeat={now - 3600}\n"
    )
    fresh = TargetLock(host=LocalHost(), path=str(path), study="new", stale_after_s=600, heartbeat_s=0)
    fresh.acquire()
    assert fresh.took_over is not None and fresh.took_over.owner == "alice@laptop"
    # A live heartbeat keeps it: a third tuner is refused.
    third = TargetLock(host=LocalHost(), path=str(path), study="third", stale_after_s=600, heartbeat_s=0)
    fresh.refresh()
    with pytest.raises(LockHeld):
        third.acquire()
    fresh.release()


def test_heartbeat_refreshes(tmp_path: Path) -> None:
    path = tmp_path / "hb.lock"
    lock = TargetLock(host=LocalHost(), path=str(path), study="s", heartbeat_s=0.2)
    with lock:
        time.sleep(1.5)
        assert "heartbeat=" in path.read_text()
        assert lock.held


def test_gpu_wait_until_released(sshd: Sshd) -> None:
    sshd.gpu_file.write_text("70000\n71000\n")
    host = sshd.host()

    def release() -> None:
        time.sleep(0.6)
        sshd.gpu_file.write_text("3 MiB\n0\n")

    threading.Thread(target=release).start()
    section = GpuWaitSection(command=("nvidia-smi",), below_mib=2048, timeout_s=10, poll_interval_s=0.1)
    messages: list[str] = []
    values = wait_gpu_free(host, section, progress=messages.append)  # type: ignore[arg-type]
    assert values == [3.0, 0.0]
    assert any("waiting" in m for m in messages)
    host.close()  # type: ignore[attr-defined]


def test_gpu_wait_times_out_with_readings(sshd: Sshd) -> None:
    sshd.gpu_file.write_text("500\n72000\n")
    host = sshd.host()
    section = GpuWaitSection(command=("nvidia-smi",), below_mib=2048, timeout_s=0.5, poll_interval_s=0.1)
    with pytest.raises(GpuBusy) as info:
        wait_gpu_free(host, section)  # type: ignore[arg-type]
    assert info.value.phase == Phase.RESTART
    assert "GPU1 72000 MiB" in info.value.reason
    assert "72000" in info.value.evidence
    sshd.gpu_file.write_text("0\n0\n")
    host.close()  # type: ignore[attr-defined]
