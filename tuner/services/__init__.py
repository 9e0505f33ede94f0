"""How a server is managed: the service-manager seam (plain process, systemd unit, in-process model)."""

from tuner.services._base import (
    BaseService,
    LaunchSpec,
    LogChunk,
    ProcessIdentity,
    Restarted,
    ServiceState,
    spec_matches,
)
from tuner.services._process import ProcessService

__all__ = [
    "BaseService",
    "LaunchSpec",
    "LogChunk",
    "ProcessIdentity",
    "ProcessService",
    "Restarted",
    "ServiceState",
    "spec_matches",
]
