"""A server that cannot start says why: `tune check` fails when the server's `--help` cannot even run, and a
start that fails names the log's telling line and where the whole log is. Real `tune` processes, as a user runs
them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_study import study_toml

from tuner.sim.testing import free_port

MISSING = "no_such_server_xyz"
MODULE = f"{MISSING}.launch_server"  # as `python -m sglang.launch_server` without sglang installed


def tune(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args], capture_output=True, text=True, timeout=180, cwd=cwd
    )


def _study(tmp_path: Path, change: tuple[str, str]) -> Path:
    text = study_toml(name="s", port=free_port(), gate=False).replace(*change)
    assert text.count(change[1]) == 1
    path = tmp_path / "s.toml"
    path.write_text(text.replace("[target]", '[target]\nserver = "sglang"', 1))
    return path


def test_check_fails_when_the_servers_help_cannot_run(tmp_path: Path) -> None:
    _study(tmp_path, ('"-m", "tuner.sim"', f'"-m", "{MODULE}"'))
    run = tune(tmp_path, "check", "--config", "s.toml")
    assert run.returncode == 1, run.stdout + run.stderr
    failed = [line for line in run.stdout.splitlines() if line.startswith(" ✗")]
    assert len(failed) == 1, run.stdout
    assert "--help` failed (exit status 1)" in failed[0]
    assert f"No module named '{MISSING}'" in failed[0]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ('"-m", "tuner.sim"', f'"-m", "{MODULE}"'),
            f"exited with status 1 while starting: .*No module named '{MISSING}'",
        ),
        (('"--sim-seed", "5",', '"--sim-seed", "5", "--no-such-flag",'), "fatal error while .*unrecognized arguments"),
    ],
    ids=["exits", "logs-a-fatal-line"],
)
def test_a_failed_start_names_the_cause_and_the_log(tmp_path: Path, change: tuple[str, str], said: str) -> None:
    _study(tmp_path, change)
    run = tune(tmp_path, "start", "--config", "s.toml", "--trials", "2")
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr
    verdict = run.stderr.splitlines()[-1]
    assert re.search(said, verdict), verdict
    found = re.search(r"\(server log: (\S+)\)", verdict)
    assert found, verdict
    log = Path(found.group(1))
    assert log.is_file() and log.name == "trial-0000.log"
    console = [line for line in run.stderr.splitlines() if line.startswith("  failed: ")]
    assert console and f"(server log: {log})" in console[0], run.stderr
