"""How a server is managed: the service-manager seam (plain process, systemd unit, in-process model)."""

from tuner.spec import LaunchSpec, program_part, spec_matches
from tuner.target.services._base import (
    BaseService,
    Finding,
    LogChunk,
    Preflight,
    ProcessIdentity,
    Restarted,
    ServiceState,
)
from tuner.target.services._gpu import GpuBusy, read_gpu_memory, wait_gpu_free
from tuner.target.services._proc import ProcStat, descendants, parse_stat, port_listeners, process_table
from tuner.target.services._process import ProcessService
from tuner.target.services._systemd import SystemdService, dropin_text, parse_unit_text, systemd_quote, systemd_split

__all__ = [
    "BaseService",
    "Finding",
    "GpuBusy",
    "LaunchSpec",
    "LogChunk",
    "Preflight",
    "ProcStat",
    "ProcessIdentity",
    "ProcessService",
    "Restarted",
    "ServiceState",
    "SystemdService",
    "descendants",
    "dropin_text",
    "parse_stat",
    "parse_unit_text",
    "port_listeners",
    "process_table",
    "program_part",
    "read_gpu_memory",
    "spec_matches",
    "systemd_quote",
    "systemd_split",
    "wait_gpu_free",
]
