"""A server with versions on the host (the dialect's :class:`~tuner.dialects.VersionedFlags`, SGLang's): which
version runs there, and what its flag table and ``--help`` say of the study.

The dialect says how a version is found and judged; this module runs its commands on the host. ``tune check``
runs all of them; ``tune start`` asks the quick one only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from tuner.config import StudyConfig
from tuner.dialects import Run, Verdict, VersionedFlags
from tuner.errors import ConfigError, HostError
from tuner.spec import program_part
from tuner.target.hosts import BaseHost
from tuner.target.services import Finding

__all__ = ["help_findings", "judged_flags", "require_flags", "table_findings", "version_findings"]

_PROBE_TIMEOUT_S = 60.0


def _runner(host: BaseHost) -> Run:
    """Runs a probe on the host with a time limit (`timeout` signals its whole process group)."""

    def run(argv: Sequence[str]) -> str | None:
        try:
            result = host.run(["timeout", "-k", "5", f"{_PROBE_TIMEOUT_S:g}", *argv], timeout=_PROBE_TIMEOUT_S + 30)
        except HostError:
            return None
        return result.stdout if result.ok else None

    return run


def _to_finding(v: Verdict) -> Finding:
    return Finding(ok=v.ok, text=v.text)


def version_findings(
    versions: VersionedFlags, host: BaseHost, program: Sequence[str], *, listed: frozenset[str] | None = None
) -> tuple[list[Finding], object | None]:
    """The version line (configured, or found on the host) and the version it names."""
    if versions.version is not None:
        return [], versions.version  # said with the dialect, at the top
    version, how = versions.detect(_runner(host), program, listed=listed)
    if version is None:
        return [Finding(ok=None, text=versions.not_found(how))], None
    return [Finding(ok=True, text=versions.version_line(version, how))], version


def table_findings(
    config: StudyConfig, versions: VersionedFlags, version: object, *, spellings: bool = True
) -> Iterator[Finding]:
    """What the version's flag table says of the base command, the space and the environment."""
    verdicts = versions.table_verdicts(
        version, config.target.command, config.space, config.target.env, spellings=spellings
    )
    yield from map(_to_finding, verdicts)


def judged_flags(config: StudyConfig, versions: VersionedFlags, version: object | None) -> set[str]:
    """The spellings the version's flag table had something to say about (``--help`` need not repeat it)."""
    return versions.judged_flags(version, config.target.command, config.space)


def help_findings(
    config: StudyConfig,
    versions: VersionedFlags,
    listed: frozenset[str],
    *,
    judged: set[str],
    version: object | None,
) -> Iterator[Finding]:
    """Flags of the base command and the space that the live ``--help`` does not list."""
    verdicts = versions.help_verdicts(listed, config.target.command, config.space, judged=judged, version=version)
    yield from map(_to_finding, verdicts)


def require_flags(config: StudyConfig, versions: VersionedFlags) -> None:
    """``tune start``: the version (configured, or reported by the host: no ``--help``, that takes long) and
    its table's verdicts; raise ConfigError when the server would refuse the command or the space, nothing
    changed."""
    from tuner.target._build import make_host

    version = versions.version
    if version is None:
        try:
            host = make_host(config.target)
        except HostError:
            return  # the preflight that follows says why the host cannot be reached
        try:
            version, how = versions.detect(_runner(host), program_part(config.target.command), quick=True)
        finally:
            host.close()
        if version is None:
            return
        print(versions.version_line(version, how), file=sys.stderr)
    refused = [f.text for f in table_findings(config, versions, version) if f.ok is False]
    if refused:
        raise ConfigError(
            file=config.source, key="target.command", expected=versions.refusal(version) + ": " + "; ".join(refused)
        )
