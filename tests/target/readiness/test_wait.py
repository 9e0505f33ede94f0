"""Readiness against a real simulator process run by the real process manager."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import httpx
import pytest

from tuner.config import ReadinessSection
from tuner.endpoint import Endpoint
from tuner.errors import NotReady, StartFailed
from tuner.target.readiness import wait_ready
from tuner.target.services import Restarted

FAST = ReadinessSection(timeout_s=20, poll_interval_s=0.05, request_timeout_s=2)


def endpoint(port: int) -> Endpoint:
    return Endpoint(base_url=f"http://127.0.0.1:{port}")


def test_ready_means_generation_works_and_phases_are_timed(process_service, sim_spec, port) -> None:
    svc = process_service(sim_spec(port))
    restarted = svc.restart(label="t")
    ready = wait_ready(service=svc, restarted=restarted, endpoint=endpoint(port), config=FAST)
    assert ready.endpoint is not None and ready.endpoint.model
    assert list(ready.phase_times) == ["loading weights", "capturing cuda graphs", "warming up", "serving"]
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 3},
    )
    assert r.json()["usage"]["completion_tokens"] == 3


def test_old_process_answers_are_ignored(process_service, sim_spec, port) -> None:
    """The seed's first bug: the old server kept answering after the restart and fooled the poller."""
    old_svc = process_service(sim_spec(port, "--sim-old-answers-after-sigterm", "2"))
    old = old_svc.restart(label="old")
    wait_ready(service=old_svc, restarted=old, endpoint=endpoint(port), config=FAST)
    # What a restart looks like from outside: SIGTERM sent, the new process launched, the old still serving.
    os.kill(old.new.pid, signal.SIGTERM)
    new_svc = process_service(sim_spec(port, load_time=3.0))
    t0 = time.monotonic()
    new = new_svc.restart(label="new")
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200  # the trap is real
    ready = wait_ready(
        service=new_svc,
        restarted=Restarted(old=old.new, new=new.new, log_cursor=new.log_cursor),
        endpoint=endpoint(port),
        config=FAST,
    )
    waited = time.monotonic() - t0
    assert waited >= 2.0, "declared ready while the old process was still answering"
    assert ready.seconds >= 2.0
    assert not old_svc.is_alive(old.new) and new_svc.is_alive(new.new)
    assert "serving" in ready.phase_times
    assert "fired up and ready to roll" in new_svc.read_log("0").text


def test_health_green_before_generation_is_not_ready(process_service, sim_spec, port) -> None:
    svc = process_service(sim_spec(port, "--sim-health-before-ready", "1.5"))
    t0 = time.monotonic()
    restarted = svc.restart(label="t")
    wait_ready(service=svc, restarted=restarted, endpoint=endpoint(port), config=FAST)
    assert time.monotonic() - t0 >= 1.5


@pytest.mark.parametrize(
    ("extra", "env", "expected"),
    [
        (("--speculative-dflash-draft-window-size", "4"), {}, "must be >= --speculative-num-draft-tokens"),
        (("--no-such-flag", "1"), {}, "unrecognized arguments: --no-such-flag 1"),
        (
            (
                "--speculative-ddtree-budget",
                "32",
                "--max-running-requests",
                "128",
                "--mem-fraction-static",
                "0.92",
            ),
            {"SGLANG_DDTREE_MAX_TOPK": "10"},
            "out of memory",
        ),
    ],
)
def test_fatal_start_fails_at_once_with_the_matching_lines(
    process_service, sim_spec, port, extra, env, expected
) -> None:
    svc = process_service(sim_spec(port, *extra, env=env))
    restarted = svc.restart(label="t")
    t0 = time.monotonic()
    with pytest.raises(StartFailed) as info:
        wait_ready(service=svc, restarted=restarted, endpoint=endpoint(port), config=FAST)
    assert time.monotonic() - t0 < 10, "a fatal start must not wait for the timeout"
    assert expected.lower() in (info.value.reason + info.value.evidence).lower()
    assert "matching lines" in info.value.evidence


def test_port_taken_is_reported(process_service, sim_spec, port) -> None:
    first = process_service(sim_spec(port))
    wait_ready(service=first, restarted=first.restart(label="a"), endpoint=endpoint(port), config=FAST)
    second = process_service(sim_spec(port))
    with pytest.raises(StartFailed, match=r"(?i)address already in use"):
        wait_ready(service=second, restarted=second.restart(label="b"), endpoint=endpoint(port), config=FAST)


def test_hang_times_out_with_phase_and_last_answer(process_service, sim_spec, port) -> None:
    svc = process_service(sim_spec(port, "--sim-hang"))
    restarted = svc.restart(label="t")
    config = replace(FAST, timeout_s=3.0, request_timeout_s=0.3)  # the port opens after graph capture
    with pytest.raises(NotReady) as info:
        wait_ready(service=svc, restarted=restarted, endpoint=endpoint(port), config=config)
    assert "not ready after 3 s" in info.value.reason
    assert "ReadTimeout" in info.value.reason


def test_crash_while_loading_is_noticed(process_service, sim_spec, port) -> None:
    svc = process_service(sim_spec(port, load_time=5.0))
    restarted = svc.restart(label="t")
    time.sleep(0.5)
    os.kill(restarted.new.pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(StartFailed, match=r"exited with status -?\d+|exited"):
        wait_ready(service=svc, restarted=restarted, endpoint=endpoint(port), config=FAST)
    assert time.monotonic() - t0 < 2


def test_the_waiting_line_names_the_pid_without_kernel_clock_ticks(process_service, sim_spec, port) -> None:
    svc = process_service(sim_spec(port, load_time=2.0))  # progress lines start after a second of waiting
    restarted = svc.restart(label="t")
    lines: list[str] = []
    wait_ready(service=svc, restarted=restarted, endpoint=endpoint(port), config=FAST, progress=lines.append)
    waiting = [line for line in lines if line.startswith("waiting for ")]
    assert waiting, lines
    assert all(line.startswith(f"waiting for pid {restarted.new.pid}: ") for line in waiting), waiting


@pytest.mark.parametrize(
    ("log", "cause"),
    [
        # llama-server over its context: no traceback, the line that names the error
        (
            "slot launch_slot_: id  3 | task 12 | processing task\n"
            "srv  update_slots: decode() failed: Context size has been exceeded\n"
            "srv    operator(): operator(): cleaning up before exit...\n",
            "srv  update_slots: decode() failed: Context size has been exceeded",
        ),
        # a Python server: the traceback's exception line, not its header or the notes after it
        (
            "[TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "scheduler.py", line 9, in run\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.56 GiB.\n"
            "Received sigquit from a child process. It usually means the child failed.\n",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.56 GiB.",
        ),
        ("INFO: 127.0.0.1 - POST /v1/chat/completions 200\ntune: server exited with status 0\n", None),
    ],
    ids=["llama-server", "traceback", "nothing-said"],
)
def test_the_cause_line_of_a_death(log: str, cause: str | None) -> None:
    from tuner.target.readiness import LogWatch

    class _Log:
        def read_log(self, cursor: object) -> object:
            from types import SimpleNamespace

            return SimpleNamespace(text=log, cursor=cursor)

    watch = LogWatch(service=_Log(), cursor=0, fatal_patterns=(), phase_markers=())  # type: ignore[arg-type]
    watch.poll(elapsed=0)
    watch.flush(elapsed=0)
    assert watch.cause() == cause
