"""Reading the kernel's process table through any host, with nothing but POSIX ``sh`` on the far side.

Shared by the managers that identify processes by PID + start time and need to know who owns a port.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from tuner.spec import LaunchSpec
from tuner.target.hosts import BaseHost

# Every process's stat line, for finding group members and start times without procps.
PROC_STATS = r"""for d in /proc/[0-9]*; do read -r line < "$d/stat" 2>/dev/null && printf '%s\n' "$line"; done"""

# Inodes of LISTEN sockets on port $1 (IPv4 or IPv6), a separator, then every process's fd links in one
# `ls` (a fork per fd would cost half a second on a busy host). Fds we may not read are simply not listed.
_LISTENERS = r"""
hex=$(printf ':%04X' "$1")
awk -v p="$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
  /proc/net/tcp /proc/net/tcp6 2>/dev/null
echo --
ls -l /proc/[0-9]*/fd 2>/dev/null | grep -e '^/proc/' -e 'socket:'
"""


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    ppid: int
    pgid: int
    start: str

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def parse_stat(line: str) -> ProcStat | None:
    # The command name sits in parentheses and may itself contain spaces and parentheses.
    head, sep, rest = line.rpartition(")")
    if not sep:
        return None
    fields = rest.split()
    try:
        return ProcStat(
            pid=int(head.split(" (", 1)[0]),
            state=fields[0],
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            start=fields[19],
        )
    except (ValueError, IndexError):
        return None


def process_table(host: BaseHost) -> dict[int, ProcStat]:
    stats = {}
    for line in host.run_script(PROC_STATS).stdout.splitlines():
        st = parse_stat(line)
        if st is not None:
            stats[st.pid] = st
    return stats


def stat_of(host: BaseHost, pid: int) -> ProcStat | None:
    result = host.run(["cat", f"/proc/{pid}/stat"])
    return parse_stat(result.stdout.strip()) if result.ok else None


def descendants(stats: dict[int, ProcStat], root: int) -> set[int]:
    """``root`` and every process below it (a server's workers and HTTP front end)."""
    children: dict[int, list[int]] = {}
    for st in stats.values():
        children.setdefault(st.ppid, []).append(st.pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def listener_pids(host: BaseHost, port: int) -> set[int]:
    return port_listeners(host, port)[1]


def port_listeners(host: BaseHost, port: int) -> tuple[bool, set[int]]:
    """Whether anything listens on ``port``, and the pids of the listeners we are allowed to see."""
    out = host.run_script(_LISTENERS, str(port)).stdout
    head, _, fds = out.partition("--\n")
    inodes = {f"socket:[{x}]" for x in head.split() if x.isdigit()}
    if not inodes:
        return False, set()
    pids: set[int] = set()
    pid = None
    for line in fds.splitlines():
        if line.startswith("/proc/"):  # "/proc/123/fd:" heads each directory's listing
            part = line.split("/")[2]
            pid = int(part) if part.isdigit() else None
        elif pid is not None and line.rsplit(" ", 1)[-1] in inodes:
            pids.add(pid)
    return True, pids


def serves_port(host: BaseHost, pid: int, port: int) -> bool | None:
    """Whether ``pid`` or one of its descendants listens on ``port``; None when nobody visible listens.

    None (rather than False) covers listeners we are not allowed to see and servers behind a proxy.
    """
    owners = listener_pids(host, port)
    if not owners:
        return None
    return bool(owners & descendants(process_table(host), pid))


# Every LISTEN socket as "inode hexaddr", a separator, then the socket fds of the pids given as $@.
_PORTS_OF = r"""
awk 'FNR > 1 && $4 == "0A" { print $10, $2 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
echo --
for p in "$@"; do ls -l "/proc/$p/fd" 2>/dev/null | grep 'socket:'; done
"""


def listen_ports(host: BaseHost, pids: set[int]) -> set[int]:
    """The TCP ports on which any of ``pids`` holds a listening socket."""
    if not pids:
        return set()
    out = host.run_script(_PORTS_OF, *(str(p) for p in sorted(pids))).stdout
    head, _, fds = out.partition("--\n")
    by_inode: dict[str, int] = {}
    for line in head.splitlines():
        inode, _, addr = line.partition(" ")
        with contextlib.suppress(ValueError):
            by_inode[f"socket:[{inode}]"] = int(addr.rsplit(":", 1)[-1], 16)
    return {by_inode[link] for link in (line.rsplit(" ", 1)[-1] for line in fds.splitlines()) if link in by_inode}


def serving_pids(host: BaseHost, root: int, port: int | None) -> list[int]:
    """The processes of ``root``'s tree that may be the server: those listening on ``port`` when any does,
    else the whole tree, ``root`` first.

    A wrapper that does not ``exec`` (``sudo -u svc python ...``, ``bash run.sh`` running the server as a
    child) keeps the recorded pid while a child serves: once the child holds the port, it alone is the server;
    before that, any process of the tree may still become it.
    """
    tree = descendants(process_table(host), root)
    if port is not None:
        owners = listener_pids(host, port) & tree
        if owners:
            return sorted(owners)
    return [root, *sorted(tree - {root})]


# For each pid given as $@: "@PID", its argv as hex bytes, "=", its environment as hex ("!" when unreadable).
# Hex because both are NUL-separated and may hold any byte, including newlines.
_SPECS = r"""
for p in "$@"; do
  printf '@%s\n' "$p"
  od -An -v -tx1 "/proc/$p/cmdline" 2>/dev/null
  echo =
  od -An -v -tx1 "/proc/$p/environ" 2>/dev/null || echo '!'
done
"""


def read_specs(host: BaseHost, pids: list[int], *, sudo: tuple[str, ...] = ()) -> list[LaunchSpec]:
    """The argv and environment of each of ``pids`` (in that order), in one command; gone processes are left
    out. ``sudo`` prefixes the command: another user's environment is readable only with privileges."""
    if not pids:
        return []
    result = host.run([*sudo, "sh", "-c", _SPECS, "sh", *(str(p) for p in pids)])
    specs = []
    for record in result.stdout.split("@")[1:]:
        lines = record.splitlines()[1:]
        cut = lines.index("=") if "=" in lines else len(lines)
        argv = tuple(a for a in _nul_fields(lines[:cut]) if a)
        if argv:
            specs.append(LaunchSpec(argv=argv, env=parse_environ(_nul_fields(lines[cut + 1 :]))))
    return specs


def _nul_fields(hex_lines: list[str]) -> list[str]:
    try:
        data = bytes.fromhex("".join(hex_lines))
    except ValueError:  # "!": not readable
        return []
    return data.decode("utf-8", "surrogateescape").split("\0")


def parse_environ(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if eq:
            env[key] = value
    return env
