"""How commands and files reach a host: the transport seam (local process or SSH)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.target.hosts._base import BaseHost, CommandResult, quote_command
from tuner.target.hosts._local import LocalHost

if TYPE_CHECKING:
    from tuner.config import SSHSection

__all__ = ["BaseHost", "CommandResult", "LocalHost", "quote_command", "ssh_host"]


def ssh_host(section: SSHSection) -> BaseHost:
    """An :class:`~tuner.target.hosts._ssh.SSHHost` for ``[target.ssh]`` (paramiko is imported only here)."""
    from tuner.target.hosts._ssh import SSHHost

    return SSHHost.from_section(section)
