"""One contract, two transports: everything above the host seam relies on exactly this behaviour."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures_sshd import Sshd

from tuner.errors import HostError
from tuner.target.hosts import BaseHost, LocalHost


@pytest.fixture(params=["local", "ssh"])
def host(request: pytest.FixtureRequest) -> Iterator[BaseHost]:
    if request.param == "local":
        h: BaseHost = LocalHost()
    else:
        server: Sshd = request.getfixturevalue("sshd")
        h = server.host()  # type: ignore[assignment]
    try:
        yield h
    finally:
        h.close()


def test_run_captures_status_stdout_stderr(host: BaseHost) -> None:
    result = host.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok
    with pytest.raises(HostError, match="status 3"):
        result.check()


@pytest.mark.parametrize(
    "arg",
    ["a;rm -rf x", "$(id)", "`id`", "it's", 'say "hi"', "line1\nline2", "back\\slash", "*", "", "  spaced  ",
     "$HOME", "a|b&c>d<e", "--flag=1 2"],
)  # fmt: skip
def test_arguments_stay_literal(host: BaseHost, arg: str, tmp_path: Path) -> None:
    result = host.run(["printf", "%s", arg]).check()
    assert result.stdout == arg
    # And through run_script's positional parameters.
    assert host.run_script('printf "%s|%s" "$1" "$2"', arg, "second").check().stdout == f"{arg}|second"


def test_stdin_is_delivered(host: BaseHost) -> None:
    assert host.run(["cat"], stdin=b"hello\x00world").check().stdout == "hello\x00world"


def test_no_stdin_means_eof(host: BaseHost) -> None:
    assert host.run(["cat"], timeout=10).check().stdout == ""


def test_write_read_and_atomic_replace(host: BaseHost, tmp_path: Path) -> None:
    path = str(tmp_path / "f.txt")
    host.write_file(path, b"first version\n")
    assert host.read_file(path) == b"first version\n"
    host.write_file(path, b"v2", mode=0o600)
    assert host.read_file(path) == b"v2"
    assert (Path(path).stat().st_mode & 0o777) == 0o600
    # Atomic replace: no temporary files are left beside the target.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_replace_keeps_readers_of_the_old_inode(host: BaseHost, tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    host.write_file(str(path), b"old")
    with path.open("rb") as reader:
        host.write_file(str(path), b"new")
        assert reader.read() == b"old"  # a rename, not an in-place rewrite
    assert path.read_bytes() == b"new"


def test_offset_read(host: BaseHost, tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"0123456789")
    assert host.read_file(str(path), offset=4) == b"456789"
    assert host.read_file(str(path), offset=10) == b""


def test_missing_file(host: BaseHost, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        host.read_file(str(tmp_path / "nope"))


def test_remove_file(host: BaseHost, tmp_path: Path) -> None:
    path = tmp_path / "gone"
    path.write_text("x")
    host.remove_file(str(path))
    host.remove_file(str(path))  # idempotent
    assert not path.exists()


def test_timeout_raises_host_error(host: BaseHost) -> None:
    with pytest.raises(HostError, match="timed out"):
        host.run(["sleep", "5"], timeout=0.5)
    # The host is still usable afterwards.
    assert host.run(["true"]).ok


def test_missing_program(host: BaseHost) -> None:
    # Local: cannot exec (HostError); SSH: the remote shell reports 127. Either way, not a silent success.
    try:
        result = host.run(["/nonexistent/program"])
    except HostError:
        return
    assert result.exit_status == 127
