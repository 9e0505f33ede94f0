"""Build the target's transport and service manager from a study config.

This is the only place that knows which implementation of each seam a config asks for; everything else
receives a :class:`~tuner.hosts.BaseHost` and a :class:`~tuner.services.BaseService`.
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

from tuner.config import StudyConfig, TargetSection
from tuner.hosts import BaseHost, LocalHost
from tuner.services import BaseService, LaunchSpec, ProcessService

__all__ = ["base_spec", "make_host", "make_service", "state_dir"]

PYTHON_PLACEHOLDER = "{python}"


def base_spec(target: TargetSection) -> LaunchSpec:
    """The unmodified launch spec; ``{python}`` means the interpreter running `tune` (local targets)."""
    argv = tuple(sys.executable if a == PYTHON_PLACEHOLDER else a for a in target.command)
    return LaunchSpec(argv=argv, env=dict(target.env))


def make_host(target: TargetSection) -> BaseHost:
    if target.transport == "ssh":
        from tuner.hosts._ssh import SSHHost  # paramiko is only imported for SSH targets

        assert target.ssh is not None
        return SSHHost.from_section(target.ssh)
    return LocalHost()


def make_service(config: StudyConfig, host: BaseHost) -> BaseService:
    target = config.target
    if target.manager == "systemd":
        from tuner.services._systemd import SystemdService

        assert target.systemd is not None
        return SystemdService(host=host, section=target.systemd, base=base_spec(target), gpu_wait=target.gpu_wait)
    return ProcessService(
        host=host,
        base=base_spec(target),
        log_dir=target.log_dir,
        workdir=target.workdir,
        stop_grace_s=target.stop_grace_s,
        gpu_wait=target.gpu_wait,
        # One record per port: workers sharing a config directory each manage their own server.
        record_name=f"server-{urlsplit(target.base_url).port or 80}.json",
        state_dir=state_dir(config),
    )


def state_dir(config: StudyConfig) -> str:
    """Where the study keeps its server records on the target: beside the study, never in the log dir."""
    if config.target.state_dir:
        return config.target.state_dir
    if config.target.transport == "local":
        return str(config.base_dir / "runs" / config.study.name / "state")
    return f".tune/{config.study.name}/state"  # relative to the login directory on the target
