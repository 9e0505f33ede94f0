"""Command line, start-up phases and log lines, start-up failures and shutdown, through a real simulator process."""

from __future__ import annotations

import signal
import socket
import time

import httpx
import pytest

from tuner.dialects import sglang_table
from tuner.sim.testing import run_sim

DDTREE = ["--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8"]
DFLASH = ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"]
MAINLINE = ["--sim-sglang-version", "0.5.23"]
QUICK = ["--sim-load-time", "0.2"]


def test_unknown_flag_is_argparse_error() -> None:
    result = run_sim([*DDTREE, "--speculative-ddtree-topk-cap", "4"])
    assert result.returncode == 2
    assert "sglang serve: error: unrecognized arguments: --speculative-ddtree-topk-cap 4" in result.stderr


def test_each_version_refuses_the_other_versions_spellings() -> None:
    # 0.5.23 renamed --cuda-graph-max-bs (a prefix of two flags now) and dropped the old window spelling.
    ambiguous = run_sim([*MAINLINE, *DFLASH, "--cuda-graph-max-bs", "16"])
    assert ambiguous.returncode == 2
    assert (
        "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill" in ambiguous.stderr
    )
    gone = run_sim([*MAINLINE, *DFLASH, "--speculative-dflash-draft-window-size", "2048"])
    assert gone.returncode == 2 and "unrecognized arguments: --speculative-dflash-draft-window-size" in gone.stderr
    # The DDTree branch (on 0.5.15.post1) still has both, as deprecated aliases.
    branch = run_sim(
        [
            *DDTREE,
            "--cuda-graph-max-bs",
            "16",
            "--speculative-dflash-draft-window-size",
            "2048",
            *QUICK,
            "--sim-crash-after",
            "0",
        ]
    )
    assert "sglang serve: error" not in branch.stderr and "fired up and ready to roll" in branch.stderr


def test_ddtree_on_mainline_fails_after_parsing() -> None:
    result = run_sim([*MAINLINE, *DDTREE, *QUICK])
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.rstrip().endswith("ValueError: Unknown speculative algorithm name: DDTREE")
    assert "Load weight begin" not in result.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--speculative-draft-window-size", "4"],
            "ValueError: --speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). "
            "window_size=4, block_size=8.",
        ),
        (
            ["--speculative-num-draft-tokens", "16"],
            "ValueError: Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they "
            "differ. For DFLASH they must match. speculative_num_draft_tokens=16, speculative_dflash_block_size=8.",
        ),
        (["--pp-size", "2"], "ValueError: Currently DFLASH speculative decoding only supports pp_size == 1."),
    ],
)
def test_dflash_argument_errors(extra: list[str], message: str) -> None:
    for version in (MAINLINE, []):
        result = run_sim([*version, *DFLASH, *extra, *QUICK])
        assert result.returncode == 1, result.stderr
        assert result.stderr.rstrip().endswith(message)
        assert "Load weight begin" not in result.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--page-size", "16"], "DDTREE currently supports only page_size == 1. Got page_size=16."),
        (["--speculative-ddtree-budget", "0"], "--speculative-ddtree-budget must be >= 1, got 0."),
        (
            ["--speculative-ddtree-budget", "12", "--attention-backend", "flashinfer"],
            "DDTREE full-tree mode currently supports only the triton attention backend",
        ),
    ],
)
def test_ddtree_argument_errors(extra: list[str], message: str) -> None:
    result = run_sim([*DDTREE, *extra, *QUICK])
    assert result.returncode == 1, result.stderr
    assert f"ValueError: {message}" in result.stderr
    table = sglang_table("ddtree-pr29907").messages  # the branch's own words
    assert any(message.split("{")[0][:40] in text for text in table.values())


def test_resolution_defaults_are_logged() -> None:
    """DFLASH: one step, top-1, 48 running requests unless set, the drafter's block size unless set."""
    flags = ["--speculative-algorithm", "DFLASH", "--speculative-num-steps", "3", "--speculative-eagle-topk", "4"]
    result = run_sim([*MAINLINE, *flags, *QUICK, "--sim-crash-after", "0"])
    log = result.stderr
    assert "DFLASH only supports speculative_num_steps == 1; overriding speculative_num_steps=3 to 1." in log
    assert "DFLASH only supports speculative_eagle_topk == 1; overriding speculative_eagle_topk=4 to 1." in log
    assert "Max running requests is reset to 48 for speculative decoding." in log
    assert "'speculative_num_draft_tokens': 16" in log and "'max_running_requests': 48" in log
    assert "DFLASH block size mismatch" not in log  # 16 is what the drafter was trained with
    unknown = run_sim([*MAINLINE, *flags, *QUICK, "--sim-crash-after", "0", "--sim-drafter-block-size", "0"]).stderr
    assert "speculative_num_draft_tokens is not set; defaulting to 16 for DFLASH." in unknown
    ddtree = run_sim([*DDTREE, *QUICK, "--sim-crash-after", "0"]).stderr
    assert "Inferred speculative_ddtree_budget=7 from speculative_num_draft_tokens=8 for DDTREE." in ddtree
    assert "DFLASH block size mismatch: using speculative_num_draft_tokens=8 but draft config block_size=16." in ddtree
    assert "Initialized DDTree worker. block_size=8, tree_budget=7, max_tree_nodes=8" in ddtree
    assert "'disable_overlap_schedule': True" in ddtree


def test_version_answers_like_the_probe_expects() -> None:
    assert run_sim(["--version"]).stdout.strip() == "sglang 0.5.15.post1 ddtree"
    assert run_sim([*MAINLINE, "--version"]).stdout.strip() == "sglang 0.5.23 mainline"


def test_capture_that_does_not_fit_fails_at_start() -> None:
    big = [*DDTREE, "--speculative-ddtree-budget", "32", "--max-running-requests", "128",
           "--mem-fraction-static", "0.92", "--attention-backend", "triton", "--sim-load-time", "2"]  # fmt: skip
    for version in ([], MAINLINE):
        flags = big if not version else [*version, *DFLASH[:2], "--speculative-dflash-block-size", "16",
                                         "--max-running-requests", "256", "--mem-fraction-static", "0.92",
                                         "--sim-load-time", "2"]  # fmt: skip
        result = run_sim([*flags, "--sim-time-scale", "10"])
        assert result.returncode == 1  # it exits at the capture (run_sim's timeout stops a server that serves)
        log = result.stderr
        assert "Load weight end. elapsed=" in log and "Capture target verify CUDA graph begin" in log
        assert "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate" in log
        assert "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" in log
        assert "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)" in log
        assert "fired up" not in log
    # Fewer captured batch sizes fit: the same server starts.
    fits = run_sim([*big, "--cuda-graph-max-bs-decode", "32", "--sim-time-scale", "10", "--sim-crash-after", "0"])
    assert "fired up and ready to roll" in fits.stderr


def test_empty_kv_pool_fails_after_the_weights() -> None:
    result = run_sim([*DFLASH, "--mem-fraction-static", "0.68", *QUICK])
    assert result.returncode == 1
    assert "Load weight end" in result.stderr
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in result.stderr


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize(
    ("version", "capture_end", "first_line"),
    [
        ([], "Capture target verify CUDA graph end. elapsed=", "Init torch distributed begin."),
        (MAINLINE, "Capture target verify CUDA graph end. bs=[", "Load weight begin."),
    ],
)
def test_phases_in_order(start_sim, version: list[str], capture_end: str, first_line: str) -> None:
    # The warm-up lasts a twentieth of the load time: long enough that the 503s below are asked during it.
    flags = [*version, *(DFLASH if version else DDTREE), "--sim-load-time", "20", "--sim-time-scale", "2"]
    sim = start_sim(*flags, ready=False)
    time.sleep(0.3)
    assert sim.proc.poll() is None
    assert not _port_open(sim.port), "port must stay closed while weights load"
    sim.wait_log("Capture target verify CUDA graph begin")
    assert not _port_open(sim.port), "port must stay closed while CUDA graphs are captured"
    sim.wait_log("Uvicorn running on")
    with httpx.Client(base_url=sim.url, timeout=5) as http:
        assert http.get("/v1/models").status_code == 200  # the trap: not a readiness signal
        answers = [
            http.get("/health").status_code,
            http.get("/health_generate").status_code,
            http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code,
        ]
        # 503 while warming up. A machine loaded enough to outlast the warm-up sees its end: from then on every
        # answer is 200 and the server must really have come up (its log says so at once).
        assert answers in ([503] * 3, [503] * 2 + [200], [503] + [200] * 2, [200] * 3), answers
        if 200 in answers:
            sim.wait_log("The server is fired up and ready to roll!", timeout=2)
        sim.wait_ready()
        assert http.get("/health").status_code == 200
        assert http.get("/health_generate").status_code == 200
    log = sim.log()
    markers = [first_line, "Loading safetensors checkpoint shards", "Load weight end. elapsed=", capture_end,
               "The server is fired up and ready to roll!"]  # fmt: skip
    positions = [log.index(m) for m in markers]
    assert positions == sorted(positions)
    assert ("Init torch distributed" in log) == (not version)


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
