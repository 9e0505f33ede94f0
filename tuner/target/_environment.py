"""The environment around the server, checked without changing anything (part of the preflight).

Each problem is one line naming what is wrong and where, so a broken environment is reported in seconds
instead of being charged to thirty configurations: the port (free, or held by the server `tune` itself
recorded, never by a stranger), the port in ``base_url`` against the command's ``--port``, and the
directories the study writes to.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from tuner.config import StudyConfig
from tuner.target.hosts import BaseHost
from tuner.target.services import BaseService, descendants, port_listeners, process_table

__all__ = ["base_port", "command_port", "target_problems"]

_LOCAL_NAMES = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")

# The nearest existing ancestor of $1 must be a writable directory (nothing is created to find out).
_WRITABLE = r"""
p=$1
while [ ! -e "$p" ]; do p=$(dirname "$p"); done
if [ -d "$p" ]; then [ -w "$p" ] && [ -x "$p" ] && exit 0; else [ -w "$p" ] && exit 0; fi
echo "$p"; exit 1
"""


def base_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def command_port(argv: tuple[str, ...]) -> int | None:
    """The value of ``--port`` in a launch command, where it has one."""
    for i, arg in enumerate(argv):
        value = arg.removeprefix("--port=") if arg.startswith("--port=") else None
        if arg == "--port" and i + 1 < len(argv):
            value = argv[i + 1]
        if value is not None and value.isdigit():
            return int(value)
    return None


def _program(service: BaseService) -> list[str]:
    return [f.text for f in service.preflight().findings if f.ok is False]


def _port_is_local(config: StudyConfig) -> bool:
    host = (urlsplit(config.target.base_url).hostname or "").lower()
    ssh = config.target.ssh
    return host in _LOCAL_NAMES or (ssh is not None and host == ssh.host.lower())


def _cmdline(host: BaseHost, pid: int) -> str:
    result = host.run(["cat", f"/proc/{pid}/cmdline"])
    text = " ".join(a for a in result.stdout.split("\0") if a) if result.ok else ""
    return text[:200] or "?"


def _port(config: StudyConfig, host: BaseHost, service: BaseService) -> list[str]:
    if not _port_is_local(config):
        return []
    port = base_port(config.target.base_url)
    held, pids = port_listeners(host, port)
    if not held:
        return []
    state = service.state()
    if state.running and state.identity is not None:
        ours = descendants(process_table(host), state.identity.pid)
        pids -= ours
        if not pids:
            return []  # the server tune recorded: the first trial's restart stops it, as always
    where = f"port {port} of base_url {config.target.base_url} on {host.name}"
    if not pids:
        return [f"{where} is held by a process this study did not start and cannot see (another user's?): free it"]
    return [
        f"{where} is held by pid {pid} ({_cmdline(host, pid)}), which this study did not start: stop it (`tune "
        "stop --config OTHER.toml` if another study's tune started it) or change base_url and --port"
        for pid in sorted(pids)
    ]


def _port_flag(config: StudyConfig) -> list[str]:
    flag = command_port(config.target.command)
    port = base_port(config.target.base_url)
    if flag is None or flag == port:
        return []
    return [f"base_url {config.target.base_url} says port {port} but target.command says --port {flag}"]


def _local_dir(path: Path, what: str) -> list[str]:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    if os.access(p, os.W_OK | os.X_OK) and p.is_dir():
        made = _makes_directories(p)
        return [] if made is None else [f"{what} {path} cannot be written ({p}: {made})"]
    why = "is on a read-only file system" if os.statvfs(p).f_flag & os.ST_RDONLY else "is not a writable directory"
    return [f"{what} {path} cannot be written ({p} {why})"]


def _makes_directories(p: Path) -> str | None:
    """Why no directory can be made in ``p`` (None: one can), tried with one that is removed at once: write
    permission says nothing of a pseudo file system (``/proc``, ``/sys``) that refuses even root."""
    try:
        tempfile.TemporaryDirectory(prefix=".tune-check-", dir=p).cleanup()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _storage(url: str) -> list[str]:
    if not url.startswith("sqlite:///"):
        return []  # a database server: reaching it is open_study's business
    path = Path(url.removeprefix("sqlite:///"))
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        readonly = os.statvfs(path).f_flag & os.ST_RDONLY
        return [f"storage {path} cannot be written ({'read-only file system' if readonly else 'permission denied'})"]
    return _local_dir(path.parent, "storage directory")


def _remote_dir(host: BaseHost, path: str, what: str) -> list[str]:
    result = host.run_script(_WRITABLE, path, timeout=30)
    if result.ok:
        return []
    return [f"{what} {path} on {host.name} cannot be written ({result.stdout.strip()} is not writable)"]


def target_problems(config: StudyConfig, *, host: BaseHost, service: BaseService, storage: str) -> list[str]:
    """The port, the command's --port and the writable directories (``tune check`` lists the program itself)."""
    problems = _port(config, host, service) + _port_flag(config) + _storage(storage)
    if config.study.artifacts_dir is not None:
        problems += _local_dir(config.study.artifacts_dir, "artifacts_dir")
    if config.target.manager == "process":
        problems += _remote_dir(host, config.target.log_dir, "target.log_dir")
    return problems
