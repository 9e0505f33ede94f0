"""Command line, startup phases, startup failures and shutdown, through a real simulator process."""

from __future__ import annotations

import signal
import socket
import time

import httpx

from tuner.sim.testing import run_sim

DDTREE = ["--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8"]


def test_unknown_flag_is_argparse_error() -> None:
    result = run_sim([*DDTREE, "--speculative-ddtree-topk-cap", "4"])
    assert result.returncode == 2
    assert "error: unrecognized arguments: --speculative-ddtree-topk-cap 4" in result.stderr


def test_window_below_block_size_asserts() -> None:
    result = run_sim([*DDTREE, "--speculative-dflash-draft-window-size", "4", "--sim-load-time", "0.1"])
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "AssertionError: speculative_dflash_draft_window_size (4) must be >=" in result.stderr
    assert "Load weight begin" not in result.stderr


def test_startup_oom() -> None:
    result = run_sim(
        [
            "--speculative-algorithm",
            "DDTREE",
            "--speculative-ddtree-budget",
            "32",
            "--max-running-requests",
            "128",
            "--mem-fraction-static",
            "0.92",
            "--sim-load-time",
            "0.2",
        ],
        env={"SGLANG_DDTREE_MAX_TOPK": "10"},
    )
    assert result.returncode == 1
    assert "Load weight end. elapsed=" in result.stderr
    assert "Traceback (most recent call last)" in result.stderr
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in result.stderr
    assert "fired up" not in result.stderr


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_phases_in_order(start_sim) -> None:
    # The capture lasts ~a fifth of the load time: long enough that the 503s below are asked during it, however
    # loaded the machine (at 1.5 s it lasted ~0.3 s, and a loaded machine answered after it).
    sim = start_sim(*DDTREE, "--sim-load-time", "6", ready=False)
    time.sleep(0.3)
    assert sim.proc.poll() is None
    assert not _port_open(sim.port), "port must stay closed while weights load"
    sim.wait_log("Capture cuda graph begin")
    with httpx.Client(base_url=sim.url, timeout=5) as http:
        assert http.get("/v1/models").status_code == 200  # the trap: not a readiness signal
        answers = [
            http.get("/health").status_code,
            http.get("/health_generate").status_code,
            http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code,
        ]
        # 503 while capturing. A machine loaded enough to outlast the capture sees its end: from then on every
        # answer is 200 and the server must really have come up (its log says so at once).
        assert answers in ([503] * 3, [503] * 2 + [200], [503] + [200] * 2, [200] * 3), answers
        if 200 in answers:
            sim.wait_log("The server is fired up and ready to roll!", timeout=2)
        sim.wait_ready()
        assert http.get("/health").status_code == 200
        assert http.get("/health_generate").status_code == 200
    log = sim.log()
    markers = [
        "Load weight end. elapsed=",
        "Capture cuda graph end. Time elapsed:",
        "The server is fired up and ready to roll!",
    ]
    positions = [log.index(m) for m in markers]
    assert positions == sorted(positions)
    assert "TP0] Load weight end" in log


def test_sigterm_clean_exit(start_sim) -> None:
    sim = start_sim(*DDTREE)
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit() == 0


def test_sigterm_while_loading(start_sim) -> None:
    sim = start_sim(*DDTREE, "--sim-load-time", "30", ready=False)
    sim.wait_log("Load weight begin")
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit(5) == 0


def test_old_answers_after_sigterm(start_sim) -> None:
    sim = start_sim(*DDTREE, "--sim-old-answers-after-sigterm", "1.0")
    sim.proc.send_signal(signal.SIGTERM)
    sim.wait_log("Received sigterm")
    with httpx.Client(base_url=sim.url, timeout=5) as http:
        assert http.get("/v1/models").status_code == 200
        assert http.get("/health").status_code == 200
    assert sim.proc.poll() is None
    assert sim.wait_exit(5) == 0
    assert not _port_open(sim.port)
