"""The server being tuned: built from the config once, brought up the one way (apply -> restart -> ready -> verify)."""

from tuner.target._build import endpoint_for, make_host, make_service, open_target
from tuner.target._lock import TargetLock, lock_path_for
from tuner.target._preflight import preflight, require_preflight
from tuner.target._target import (
    Applied,
    BroughtUp,
    Target,
    apply_config,
    await_ready,
    restart_server,
    verify_applied,
)

__all__ = [
    "Applied",
    "BroughtUp",
    "Target",
    "TargetLock",
    "apply_config",
    "await_ready",
    "endpoint_for",
    "lock_path_for",
    "make_host",
    "make_service",
    "open_target",
    "preflight",
    "require_preflight",
    "restart_server",
    "verify_applied",
]
