"""Real components for remote tests: a private OpenSSH server on 127.0.0.1 and a systemd stand-in.

- ``sshd``: ``/usr/sbin/sshd -D`` with an empty config (``-f /dev/null``), a fresh host key and an
  ``authorized_keys`` holding a fresh client key; ``known_hosts`` pins the host key, so paramiko's
  RejectPolicy really verifies it. ``SetEnv PATH=...`` puts shims first, so remote commands see:
- ``systemctl`` -> ``systemctl3 --root=ROOT -c MinimumYield=0.1 -c _notify_socket_folder=ROOT/run/systemd``
  and ``journalctl`` -> ``journalctl3 --root ROOT`` (docker-systemctl-replacement: an independent
  implementation of systemctl semantics; units in ``ROOT/etc/systemd/system``, drop-ins work);
- ``nvidia-smi`` -> prints the lines of ``GPU_FILE`` (MiB used per GPU): the GPU we do not have.

Registered as a pytest plugin by the folder conftests (``pytest_plugins = ["tests.fixtures_sshd"]``).
CI needs ``apt-get install -y openssh-server``; without ``/usr/sbin/sshd`` these tests skip with a reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
VENV_BIN = Path(sys.executable).parent
SYSTEMCTL3 = VENV_BIN / "systemctl3"
JOURNALCTL3 = VENV_BIN / "journalctl3"


# The search space and benchmark of the short remote studies (SSH + systemd, and the fleet launcher).
SMALL_SPACE_AND_BENCHMARK = """
[space.budget]
type = "int"
low = 4
high = 24
step = 4
flag = "--speculative-ddtree-budget"

[space.topk]
type = "int"
low = 2
high = 8
env = "SGLANG_DDTREE_MAX_TOPK"

[benchmark]
warmup_requests = 1
repeats = 2

[[benchmark.scenarios]]
name = "c2"
concurrency = 2
prompt_tokens = 64
output_tokens = 32
requests = 4
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tune-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return Path(f"{path}.pub").read_text().strip()


@dataclass
class Sshd:
    """One private sshd. ``stop()``/``start()`` simulate an outage on the same port."""

    dir: Path
    port: int
    host_key: Path
    client_key: Path
    known_hosts: Path
    shim_dir: Path
    systemd_root: Path
    gpu_file: Path
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.dir / "sshd.log"

    def start(self) -> None:
        path = f"{self.shim_dir}:{VENV_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        argv = [
            SSHD, "-D", "-e", "-f", "/dev/null", "-p", str(self.port), "-h", str(self.host_key),
            "-o", "ListenAddress=127.0.0.1",
            "-o", f"AuthorizedKeysFile={self.dir / 'authorized_keys'}",
            "-o", "StrictModes=no", "-o", "UsePAM=no", "-o", "PidFile=none",
            "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no",
            "-o", "PermitRootLogin=prohibit-password",
            "-o", "Subsystem=sftp internal-sftp",
            "-o", "MaxStartups=100", "-o", "MaxSessions=100",
            # A private HOME: the remote login shell would otherwise source the account's ~/.bashrc (this
            # machine's runs `pyenv init`, whose rehash lock stalls concurrent commands for up to a minute).
            "-o", f"SetEnv=PATH={path} HOME={self.dir / 'home'}",
        ]  # fmt: skip
        (self.dir / "home").mkdir(exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation dir (tmpfs)
        log = self.log.open("ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return
            time.sleep(0.02)
        raise RuntimeError("sshd did not start listening within 10 s")

    def stop(self) -> None:
        """Kill sshd and every connection it serves (its whole process group), like a crash or a reboot."""
        if self.proc is None:
            return
        # Per-connection sshd processes call setsid(), leaving the listener's group: find them by ancestry
        # (PIDs we started, never by name) before the listener dies and they are re-parented.
        victims = _descendants(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def host(self, **overrides: object) -> object:
        from tuner.target.hosts._ssh import SSHHost

        kwargs: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.port,
            "key_file": str(self.client_key),
            "known_hosts": str(self.known_hosts),
            "connect_timeout_s": 5.0,
            "command_timeout_s": 30.0,
            "keepalive_s": 5.0,
            "retries": 2,
            "retry_backoff_s": 0.1,
        }
        kwargs.update(overrides)
        return SSHHost(**kwargs)  # type: ignore[arg-type]

    def ssh_table(self) -> str:
        """A ``[target.ssh]`` TOML table for study configs that use this server."""
        return textwrap.dedent(
            f"""
            [target.ssh]
            host = "127.0.0.1"
            port = {self.port}
            key_file = "{self.client_key}"
            known_hosts = "{self.known_hosts}"
            connect_timeout_s = 5
            retries = 2
            retry_backoff_s = 0.1
            """
        )


def _descendants(root: int) -> list[int]:
    """PIDs whose parent chain leads to ``root`` (from /proc/PID/stat)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        found.extend(children)
        frontier.extend(children)
    return found


def _write_shims(shim_dir: Path, root: Path, gpu_file: Path) -> None:
    shim_dir.mkdir(parents=True)
    shims = {
        "systemctl": f'exec "{SYSTEMCTL3}" --root="{root}" -c MinimumYield=0.1 '
        f'-c _notify_socket_folder="{root}/run/systemd" "$@"',
        # Real journalctl accepts `--root DIR`; journalctl3 reads ROOT/var/log/journal/UNIT.log.
        "journalctl": f'exec "{JOURNALCTL3}" --root "{root}" "$@"',
        "nvidia-smi": f'[ -r "{gpu_file}" ] || {{ echo "NVIDIA-SMI has failed" >&2; exit 9; }}\n'
        f'cat "{gpu_file}"',
    }
    for name, body in shims.items():
        path = shim_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)


def make_sshd(base: Path) -> Sshd:
    if not Path(SSHD).exists():
        pytest.skip(f"{SSHD} not installed (apt-get install -y openssh-server): remote tests need a real sshd")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen not installed (openssh-client)")
    base.mkdir(parents=True, exist_ok=True)
    host_key = base / "ssh_host_ed25519_key"
    client_key = base / "id_ed25519"
    host_pub = _keygen(host_key)
    client_pub = _keygen(client_key)
    (base / "authorized_keys").write_text(client_pub + "\n")
    port = free_port()
    known_hosts = base / "known_hosts"
    keytype, blob = host_pub.split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{port} {keytype} {blob}\n")
    root = base / "systemd-root"
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "run/systemd").mkdir(parents=True)
    gpu_file = base / "gpu-memory.txt"
    gpu_file.write_text("0\n0\n")
    shim_dir = base / "bin"
    _write_shims(shim_dir, root, gpu_file)
    server = Sshd(
        dir=base,
        port=port,
        host_key=host_key,
        client_key=client_key,
        known_hosts=known_hosts,
        shim_dir=shim_dir,
        systemd_root=root,
        gpu_file=gpu_file,
    )
    server.start()
    return server


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """The session's shared sshd (do not stop it; use ``private_sshd`` for outage tests)."""
    server = make_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        _stop_all_units(server)
        server.stop()


@pytest.fixture
def private_sshd(tmp_path: Path) -> Iterator[Sshd]:
    server = make_sshd(tmp_path / "sshd")
    try:
        yield server
    finally:
        server.stop()


def _stop_all_units(server: Sshd) -> None:
    units = server.systemd_root / "etc/systemd/system"
    for unit in units.glob("*.service"):
        subprocess.run(
            [str(server.shim_dir / "systemctl"), "stop", unit.name], capture_output=True, timeout=60, check=False
        )


@dataclass
class SimUnit:
    """A systemd unit (in the sshd's systemd root) whose ExecStart runs the simulated SGLang server."""

    name: str
    port: int
    path: Path
    argv: tuple[str, ...]
    env: dict[str, str]
    server: Sshd

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def sim_argv(port: int, *extra: str) -> tuple[str, ...]:
    return (
        sys.executable, "-u", "-m", "tuner.sim",
        "--model-path", "/models/Kimi-K2.6", "--host", "127.0.0.1", "--port", str(port),
        "--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8",
        "--speculative-ddtree-budget", "12", "--speculative-dflash-draft-window-size", "2048",
        "--sim-load-time", "0.3", "--sim-time-scale", "20", *extra,
    )  # fmt: skip


def write_sim_unit(server: Sshd, *, env: dict[str, str] | None = None) -> SimUnit:
    from tuner.target.services._systemd import systemd_quote

    name = f"sim-{uuid.uuid4().hex[:8]}.service"
    port = free_port()
    argv = sim_argv(port)
    env = {"SGLANG_DDTREE_MAX_TOPK": "6"} if env is None else env
    lines = [
        "[Unit]",
        "Description=simulated SGLang server for tune's tests",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(systemd_quote(a) for a in argv),
        *(f"Environment={k}={v}" for k, v in env.items()),
        "TimeoutStopSec=10",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    path = server.systemd_root / "etc/systemd/system" / name
    path.write_text("\n".join(lines))
    return SimUnit(name=name, port=port, path=path, argv=argv, env=env, server=server)


@pytest.fixture
def sim_unit(sshd: Sshd) -> Iterator[SimUnit]:
    unit = write_sim_unit(sshd)
    try:
        yield unit
    finally:
        subprocess.run(
            [str(sshd.shim_dir / "systemctl"), "stop", unit.name], capture_output=True, timeout=60, check=False
        )
