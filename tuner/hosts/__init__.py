"""How commands and files reach a host: the transport seam (local process or SSH)."""

from tuner.hosts._base import BaseHost, CommandResult, quote_command
from tuner.hosts._local import LocalHost

__all__ = ["BaseHost", "CommandResult", "LocalHost", "quote_command"]
