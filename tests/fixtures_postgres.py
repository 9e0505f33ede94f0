"""A private PostgreSQL server on loopback, for studies shared through a real database.

``scripts/test.sh`` installs Debian's ``postgresql`` (as root); without its binaries the tests that need it skip
with the reason. The cluster lives in a temp dir owned by the ``postgres`` account (initdb refuses root) and is
stopped at the end of the session.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(argv: list[str]) -> list[str]:
    return argv if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--", *argv]


class NoPostgres(RuntimeError):
    """The PostgreSQL server binaries (or a way to run them unprivileged) are missing."""


@contextlib.contextmanager
def private_postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on loopback, yielding its URL (also used by scripts/bench_workers.py)."""
    bindir = _bindir()
    if bindir is None:
        raise NoPostgres("PostgreSQL server binaries not installed (scripts/test.sh installs them as root)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        raise NoPostgres("running as root without runuser: cannot start PostgreSQL as its own account")
    root = Path(tempfile.mkdtemp(prefix="tune-pg-"))
    data, sockets = root / "data", root / "run"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    subprocess.run(
        _as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
        check=True,
        capture_output=True,
    )
    port = _free_port()
    argv = [
        str(bindir / "postgres"), "-D", str(data), "-p", str(port),
        "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={sockets}",
        "-c", "fsync=off", "-c", "max_connections=200",
    ]  # fmt: skip
    server = subprocess.Popen(
        _as_postgres(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            ready = subprocess.run(
                [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)], capture_output=True
            )
            if ready.returncode == 0:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start (exit {server.poll()})")
            time.sleep(0.1)
        subprocess.run(
            [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "tune"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/tune"
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=20)
        if server.poll() is None:
            server.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    try:
        with private_postgres() as url:
            yield url
    except NoPostgres as exc:
        pytest.skip(str(exc))
