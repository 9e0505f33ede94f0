"""How a server is managed: the service-manager seam (plain process, systemd unit, in-process model)."""

from tuner.services._base import (
    BaseService,
    Finding,
    LogChunk,
    Preflight,
    ProcessIdentity,
    Restarted,
    ServiceState,
)
from tuner.services._gpu import GpuBusy, read_gpu_memory, wait_gpu_free
from tuner.services._proc import ProcStat, parse_stat
from tuner.services._process import ProcessService
from tuner.spec import LaunchSpec, program_part, spec_matches

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
    "parse_stat",
    "program_part",
    "read_gpu_memory",
    "spec_matches",
    "wait_gpu_free",
]
