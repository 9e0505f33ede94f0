"""A fleet's member: the study config of the worker that drives one host of ``[target.ssh] hosts``."""

from __future__ import annotations

import dataclasses
import shlex
from urllib.parse import urlsplit, urlunsplit

from tuner.config._load import StudyConfig
from tuner.errors import ConfigError
from tuner.space import baseline_params
from tuner.spec import LaunchSpec

__all__ = ["fleet_member"]


def fleet_member(config: StudyConfig, index: int) -> StudyConfig:
    """The study config of the worker that drives host ``index`` of ``[target.ssh] hosts``."""
    ssh = config.target.ssh
    assert ssh is not None and ssh.hosts, "fleet_member needs [target.ssh] hosts"
    member = ssh.hosts[index]
    key = f"target.ssh.hosts[{index}]"
    base_url = member.base_url
    if base_url is None:
        url = urlsplit(config.target.base_url)
        netloc = member.host + (f":{url.port}" if url.port else "")
        base_url = urlunsplit((url.scheme, netloc, url.path, url.query, url.fragment))
    command = member.command or config.target.command
    if baseline_params(config.space, LaunchSpec(argv=command, env=dict(config.target.env))) != config.baseline:
        raise ConfigError(
            file=config.source,
            key=f"{key}.command",
            expected="the same values as [target] command for every parameter of the search space",
            got=shlex.join(command),
        )
    new_ssh = dataclasses.replace(
        ssh, host=member.host, port=member.port or ssh.port, user=member.user or ssh.user, hosts=()
    )
    target = dataclasses.replace(config.target, ssh=new_ssh, base_url=base_url, command=command)
    return dataclasses.replace(config, target=target)
