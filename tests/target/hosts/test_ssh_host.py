"""SSH-specific behaviour against a real sshd: host keys, authentication, outages and reconnects."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from fixtures_sshd import Sshd

from tuner.config import SSHSection
from tuner.errors import HostError
from tuner.target.hosts._ssh import HostKeyRejected, SSHAuthFailed, SSHHost


def _other_key_line(tmp_path: Path, port: int) -> str:
    key = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    keytype, blob = Path(f"{key}.pub").read_text().split()[:2]
    return f"[127.0.0.1]:{port} {keytype} {blob}\n"


def _server_fingerprint(sshd: Sshd) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-f", f"{sshd.host_key}.pub"], check=True, capture_output=True, text=True
    ).stdout
    return out.split()[1]


def test_changed_host_key_is_refused_naming_host_and_fingerprints(sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    line = _other_key_line(tmp_path, sshd.port)
    known.write_text(line)
    host = sshd.host(known_hosts=str(known), accept_new_host_key=True)  # TOFU never accepts a CHANGED key
    with pytest.raises(HostKeyRejected) as info:
        host.run(["true"])  # type: ignore[attr-defined]
    message = str(info.value)
    assert "HOST KEY CHANGED" in message
    assert f"127.0.0.1:{sshd.port}" in message
    assert _server_fingerprint(sshd) in message  # the same SHA256 format as ssh-keygen -l
    assert known.read_text() == line  # untouched


def test_unknown_host_key_is_refused_by_default(sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "empty_known_hosts"
    host = sshd.host(known_hosts=str(known))
    with pytest.raises(HostKeyRejected) as info:
        host.run(["true"])  # type: ignore[attr-defined]
    assert f"127.0.0.1:{sshd.port}" in str(info.value)
    assert _server_fingerprint(sshd) in str(info.value)
    assert "accept_new_host_key" in str(info.value)
    assert not known.exists()


def test_accept_new_host_key_records_it_then_verifies_it(sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "ssh" / "known_hosts"
    host = sshd.host(known_hosts=str(known), accept_new_host_key=True)
    assert host.run(["echo", "ok"]).stdout == "ok\n"  # type: ignore[attr-defined]
    host.close()  # type: ignore[attr-defined]
    line = known.read_text()
    assert line.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    # From now on the recorded key is enforced even without the opt-in.
    strict = sshd.host(known_hosts=str(known))
    assert strict.run(["true"]).ok  # type: ignore[attr-defined]
    strict.close()  # type: ignore[attr-defined]


def test_wrong_client_key_fails_fast_without_retries(sshd: Sshd, tmp_path: Path) -> None:
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    host = sshd.host(key_file=str(key), retries=5, retry_backoff_s=2.0)
    start = time.monotonic()
    with pytest.raises(SSHAuthFailed, match="authentication"):
        host.run(["true"])  # type: ignore[attr-defined]
    assert time.monotonic() - start < 5  # no backoff rounds for a refusal that cannot change


def test_from_section_and_name(sshd: Sshd) -> None:
    section = SSHSection(
        host="127.0.0.1",
        port=sshd.port,
        user="root",
        key_file=str(sshd.client_key),
        known_hosts=str(sshd.known_hosts),
    )
    with SSHHost.from_section(section) as host:
        assert host.name == f"root@127.0.0.1:{sshd.port}"
        assert host.run(["id", "-un"]).stdout.strip() == "root"
        assert isinstance(host, SSHHost)
        assert host.host_key_fingerprint == _server_fingerprint(sshd)


def test_sshd_killed_and_restarted_mid_use(private_sshd: Sshd, tmp_path: Path) -> None:
    host: SSHHost = private_sshd.host(retries=1, retry_backoff_s=0.1)  # type: ignore[assignment]
    assert host.run(["echo", "before"]).stdout == "before\n"
    path = str(tmp_path / "f")
    host.write_file(path, b"x")

    private_sshd.stop()
    start = time.monotonic()
    with pytest.raises(HostError, match=r"cannot connect|connection"):
        host.run(["echo", "during"])
    assert time.monotonic() - start < 10  # a clean, bounded failure, not a hang
    with pytest.raises(HostError):
        host.read_file(path)

    private_sshd.start()
    assert host.run(["echo", "after"]).stdout == "after\n"  # reconnected by itself
    assert host.read_file(path) == b"x"
    host.close()


def test_command_cut_midway_is_not_rerun(private_sshd: Sshd, tmp_path: Path) -> None:
    host: SSHHost = private_sshd.host(retries=3, retry_backoff_s=0.1)  # type: ignore[assignment]
    marker = tmp_path / "runs"
    host.run(["true"])  # connected

    def outage() -> None:
        time.sleep(0.7)
        private_sshd.stop()
        private_sshd.start()

    thread = threading.Thread(target=outage)
    thread.start()
    with pytest.raises(HostError, match=r"not re-run|without an exit status"):
        host.run(["sh", "-c", f"echo run >> {marker}; sleep 5"], timeout=20)
    thread.join()
    assert marker.read_text() == "run\n"  # ran exactly once
    assert host.run(["echo", "again"]).stdout == "again\n"
    host.close()


def test_reconnect_backoff_happens_before_the_command_starts(private_sshd: Sshd) -> None:
    """A connection that is down when a command is issued is retried: nothing ran yet, so it is safe."""
    host: SSHHost = private_sshd.host(retries=4, retry_backoff_s=0.3)  # type: ignore[assignment]
    host.run(["true"])
    private_sshd.stop()
    restarter = threading.Timer(0.5, private_sshd.start)
    restarter.start()
    try:
        assert host.run(["echo", "eventually"]).stdout == "eventually\n"
    finally:
        restarter.join()
        host.close()
