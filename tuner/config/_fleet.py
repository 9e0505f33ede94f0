"""``[target.ssh] hosts``: one study file for a fleet of identical servers, one worker per host."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from tuner.config._reader import Table

__all__ = ["FleetHost", "parse_hosts"]


@dataclass(frozen=True, kw_only=True)
class FleetHost:
    """One server of the fleet: an SSH host name, optionally with what differs on it."""

    host: str
    port: int | None = None
    user: str | None = None
    base_url: str | None = None
    """Default: ``[target] base_url`` with its host replaced by this host."""
    command: tuple[str, ...] | None = None
    """Default: ``[target] command``. A per-host command may differ only outside the search space."""


def parse_hosts(t: Table) -> tuple[FleetHost, ...]:
    raw = t.raw("hosts", None)
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise t.error("hosts", 'a non-empty list of host names or tables like { host = "gpu-1", port = 22 }', raw)
    hosts = tuple(_parse_host(t, i, item) for i, item in enumerate(raw))
    names = [(h.host, h.port, h.base_url) for h in hosts]
    if len(set(names)) != len(names):
        raise t.error("hosts", "distinct servers (the same host twice needs a different base_url)", raw)
    return hosts


def _parse_host(t: Table, i: int, item: Any) -> FleetHost:
    if isinstance(item, str) and item:
        return FleetHost(host=item)
    entry = Table(item, file=t.file, key=f"{t.path('hosts')}[{i}]")
    base_url = entry.str("base_url", None)
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise entry.error("base_url", "an http:// or https:// URL", base_url)
    raw_command = entry.raw("command", None)
    command: tuple[str, ...] | None = None
    if isinstance(raw_command, str):
        command = tuple(shlex.split(raw_command))
    elif isinstance(raw_command, list) and all(isinstance(a, str) for a in raw_command):
        command = tuple(raw_command)
    elif raw_command is not None:
        raise entry.error("command", "a command as a string or a list of strings", raw_command)
    host = FleetHost(
        host=entry.str("host"),
        port=entry.int("port", None, min=1, max=65535),
        user=entry.str("user", None),
        base_url=base_url.rstrip("/") if base_url else None,
        command=command,
    )
    entry.finish()
    return host
