"""A user's mistake, or a broken world, ends `tune` in one line with the exit status the README lists: never a
Python traceback. Each case runs the real CLI in a subprocess, as a user would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_study import study_toml

from tuner.config import load_config
from tuner.sim.testing import free_port
from tuner.study import open_study

CONFIG_ERROR, ENVIRONMENT = 2, 3


def tune(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def one_line(run: subprocess.CompletedProcess[str], status: int) -> str:
    """The run's only stderr line, after checking its exit status and that nothing else (a traceback) came."""
    assert "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert run.returncode == status, (run.returncode, run.stderr)
    return lines[0]


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    """A study file and its (empty) study: what `tune report` and `tune dashboard` need to get to their output."""
    path = tmp_path / "s.toml"
    path.write_text(study_toml(name="s", port=free_port(), gate=False))
    open_study(load_config(path))
    return path


def test_report_out_on_a_file(study_file: Path) -> None:
    (study_file.parent / "afile").write_text("x")
    line = one_line(tune(study_file.parent, "report", "--config", "s.toml", "--out", "afile"), CONFIG_ERROR)
    assert line == "tune: config error: --out: expected a directory, not the file afile"


def test_report_out_under_a_file(study_file: Path) -> None:
    (study_file.parent / "afile").write_text("x")
    line = one_line(tune(study_file.parent, "report", "--config", "s.toml", "--out", "afile/sub"), CONFIG_ERROR)
    assert line == (
        "tune: config error: --out: expected a directory path (afile is a file, not a directory), got 'afile/sub'"
    )


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on a read-only file system (a small tmpfs mounted read-only; needs root)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)]).returncode:
        pytest.skip("mounting a read-only tmpfs needs root")
    try:
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_report_out_on_a_read_only_file_system(study_file: Path, read_only_dir: Path) -> None:
    run = tune(study_file.parent, "report", "--config", "s.toml", "--out", "ro/report")
    assert one_line(run, ENVIRONMENT) == "tune: environment: cannot create --out ro/report: read-only file system"


def test_init_out_in_a_missing_directory(tmp_path: Path) -> None:
    run = tune(
        tmp_path, "init", "--out", "nodir/x.toml", "--",
        "python", "-m", "sglang.launch_server", "--port", "30000", "--speculative-algorithm", "DDTREE",
    )  # fmt: skip
    line = one_line(run, CONFIG_ERROR)
    assert line == "tune: config error: --out: expected a file in an existing directory (nodir does not exist)"
    assert not (tmp_path / "nodir").exists()


def test_dashboard_on_a_port_in_use(study_file: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        run = tune(study_file.parent, "dashboard", "--config", "s.toml", "--port", str(port))
    line = one_line(run, ENVIRONMENT)
    assert line == (
        f"tune: environment: the dashboard cannot listen on 127.0.0.1:{port}: address already in use "
        "(choose another --port or --host)"
    )


def test_dashboard_port_out_of_range(study_file: Path) -> None:
    run = tune(study_file.parent, "dashboard", "--config", "s.toml", "--port", "99999")
    assert "Traceback" not in run.stderr and run.returncode == CONFIG_ERROR
    assert run.stderr.splitlines()[-1] == (
        "tune dashboard: error: argument --port: expected a port number from 1 to 65535, got 99999"
    )


@pytest.mark.parametrize("with_config", [False, True], ids=["stored-config", "study-file"])
def test_status_of_an_unreachable_database(study_file: Path, with_config: bool) -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://tune:hunter2@127.0.0.1:{port}/tune"
    args = ["status", "--storage", url, *(["--config", "s.toml"] if with_config else ["--study", "s"])]
    line = one_line(tune(study_file.parent, *args), ENVIRONMENT)
    assert line == (
        f"tune: environment: storage postgresql://tune:***@127.0.0.1:{port}/tune: the database server refused the "
        "connection (is it running, on that host and port?); fix it, then run the command again"
    )


@pytest.mark.parametrize("preflight", [True, False], ids=["preflight", "skip-preflight"])
@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("sqlite:////proc/tune-nowhere/study.db", ENVIRONMENT, "/proc/tune-nowhere"),  # root may not, either
        ("sqlite:///afile/study.db", ENVIRONMENT, "afile"),
        ("nosuch://db/tune", CONFIG_ERROR, "storage: expected a database URL"),
        ("mysql://tune:hunter2@127.0.0.1/tune", ENVIRONMENT, "its database driver is not installed (MySQLdb)"),
    ],
    ids=["pseudo-fs", "under-a-file", "unknown-scheme", "no-driver"],
)
def test_start_on_a_storage_that_cannot_be_made(
    study_file: Path, url: str, status: int, says: str, preflight: bool
) -> None:
    (study_file.parent / "afile").write_text("x")
    url = url.replace("sqlite:///afile", f"sqlite:///{study_file.parent}/afile")
    args = ["start", "--config", "s.toml", "--storage", url, "--study", "elsewhere", "--trials", "1"]
    run = tune(study_file.parent, *args, *([] if preflight else ["--skip-preflight"]))
    assert "Traceback" not in run.stderr and run.returncode == status, run.stderr
    # What it says first is which dialect the server speaks; then the verdict, in one line.
    verdict = [line for line in run.stderr.splitlines() if line.startswith("tune: ")]
    assert len(verdict) == 1 and run.stderr.rstrip().endswith(verdict[0]), run.stderr
    assert says in verdict[0] and "hunter2" not in run.stderr, verdict


def test_check_checks_the_storage_it_is_given(study_file: Path, read_only_dir: Path) -> None:
    run = tune(study_file.parent, "check", "--config", "s.toml", "--storage", f"sqlite:///{read_only_dir}/s/s.db")
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"✗ storage directory {read_only_dir}/s cannot be written ({read_only_dir} is on a read-only" in run.stdout
    port = free_port()
    run = tune(study_file.parent, "check", "--config", "s.toml", "--storage", f"postgresql://t:pw@127.0.0.1:{port}/t")
    assert run.returncode == 1 and "✓ port" in run.stdout, run.stdout
    assert f"✗ storage postgresql://t:***@127.0.0.1:{port}/t: the database server refused the connection" in run.stdout
    run = tune(study_file.parent, "check", "--config", "s.toml", "--storage", f"sqlite:///{study_file.parent}/ok.db")
    assert run.returncode == 0 and "storage, log and artifact dirs writable" in run.stdout, run.stdout
    assert not (study_file.parent / "ok.db").exists()  # a check creates nothing
