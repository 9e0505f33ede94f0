"""Build the target from a study config: its transport, service manager, lock, endpoint and readiness check.

This is the only place that knows which implementation of each seam a config asks for; everything else
receives a :class:`Target` (or the :class:`~tuner.target.hosts.BaseHost` /
:class:`~tuner.target.services.BaseService` in it).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from tuner.config import StudyConfig, TargetSection, base_spec
from tuner.endpoint import Endpoint
from tuner.errors import ConfigError, EnvironmentFault
from tuner.secrets import REDACTED
from tuner.target._target import Target
from tuner.target.hosts import BaseHost, LocalHost, ssh_host
from tuner.target.readiness import ReadinessCheck
from tuner.target.services import BaseService, ProcessService, SystemdService

__all__ = ["endpoint_for", "make_host", "make_service", "open_target"]

def make_host(target: TargetSection) -> BaseHost:
    if target.transport == "ssh":
        assert target.ssh is not None
        return ssh_host(target.ssh)  # paramiko is only imported for SSH targets
    return LocalHost()


def make_service(config: StudyConfig, host: BaseHost) -> BaseService:
    target = config.target
    if target.manager == "systemd":
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


def endpoint_for(config: StudyConfig) -> Endpoint:
    """The server's address, model and bearer token (``api_key``, or the variable ``api_key_env`` names)."""
    target = config.target
    api_key = target.api_key
    if target.api_key_env is not None:
        api_key = os.environ.get(target.api_key_env)
        if not api_key:
            raise EnvironmentFault(
                f"[target] api_key_env = {target.api_key_env!r}, but {target.api_key_env} is not set in tune's "
                "environment (export it, then run the command again)"
            )
    return Endpoint(base_url=target.base_url, model=target.model, api_key=api_key)


def require_secrets(config: StudyConfig) -> None:
    """Refuse a configuration whose secrets were never stored (read back from a study without its file): the
    server would be handed ``***``."""
    missing = config.secrets.placeholders(base_spec(config.target))
    if config.target.api_key == REDACTED:
        missing.append("[target] api_key")
    if not missing:
        return
    where = "run from the study file that holds them (tune start --config FILE --storage URL --study NAME)"
    if variables := [name for name in missing if name in config.target.env]:
        where += f", or export {' and '.join(variables)}"
    raise ConfigError(
        file=config.source,
        key="target",
        expected=f"the values of {', '.join(missing)}, which the study stores as {REDACTED}: {where}",
    )


def open_target(
    config: StudyConfig,
    *,
    service: BaseService | None = None,
    readiness: ReadinessCheck | None = None,
    lock: bool | None = None,
) -> Target:
    """The server a study tunes, wired from its config; close it (or use ``with``) when done.

    ``service`` and ``readiness`` replace the config's own (the in-process model brings both); ``lock`` (default:
    the config's ``target.lock``, never for a given service) takes the per-server lock when the target is
    entered.
    """
    from tuner.target._lock import TargetLock, lock_path_for

    host = None
    if service is None:
        require_secrets(config)
        host = make_host(config.target)
        service = make_service(config, host)
    take_lock = config.target.lock if lock is None else lock
    target_lock = None
    if take_lock and host is not None:  # a given service (the in-process model) has no host to lock
        # One tuner per server: a second one would restart the server under the first one's benchmark.
        target_lock = TargetLock(host=host, path=lock_path_for(config.target), study=config.study.name)
    return Target(
        host=host,
        service=service,
        endpoint=endpoint_for(config),
        base=base_spec(config.target),
        readiness_config=config.readiness,
        readiness=readiness,
        lock=target_lock,
        secrets=config.secrets,
    )
