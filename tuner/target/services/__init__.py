"""How a server is managed: the service-manager seam (plain process, systemd unit, in-process model)."""

from tuner.target.services._base import (
    BaseService,
    Finding,
    LogChunk,
    Preflight,
    ProcessIdentity,
    Restarted,
    ServiceState,
)
from tuner.target.services._gpu import read_gpu_memory
from tuner.target.services._proc import descendants, parse_stat, port_listeners, process_table
from tuner.target.services._process import ProcessService
from tuner.target.services._systemd import SystemdService, dropin_text

__all__ = [
    "BaseService",
    "Finding",
    "LogChunk",
    "Preflight",
    "ProcessIdentity",
    "ProcessService",
    "Restarted",
    "ServiceState",
    "SystemdService",
    "descendants",
    "dropin_text",
    "parse_stat",
    "port_listeners",
    "process_table",
    "read_gpu_memory",
]
