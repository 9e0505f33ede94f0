"""A server configuration as data: the argv to exec and the environment it adds.

Dependency-free on purpose: the config, the search space, the services and the report all speak launch specs,
and none of them should have to import another to do so.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["LaunchSpec", "flag_value", "program_part", "spec_matches"]


@dataclass(frozen=True, kw_only=True)
class LaunchSpec:
    """One complete server configuration: the argv to exec and the environment it adds.

    DDTree's top-k cap is an environment variable upstream, so the environment is part of the
    configuration, not a detail of how it is launched.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def shell_text(self) -> str:
        """The spec as one shell line (``env K=V ... argv``), properly quoted."""
        prefix = ["env", *(f"{k}={v}" for k, v in sorted(self.env.items()))] if self.env else []
        return shlex.join([*prefix, *self.argv])


def program_part(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The command up to its first flag."""
    out: list[str] = []
    for a in argv:
        if a.startswith("--"):
            break
        out.append(a)
    return tuple(out)


def flag_value(argv: Sequence[str], flag: str | Sequence[str]) -> str | None:
    """The value a command gives ``flag`` (or any of several spellings: ``--f v`` or ``--f=v``), '' for a bare
    switch, None if absent. The last one wins, as in the servers' own parsers."""
    names = {flag} if isinstance(flag, str) else set(flag)
    found = None
    for i, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name not in names:
            continue
        following = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""
        found = inline if eq else following
    return found


def spec_matches(expected: LaunchSpec, actual: LaunchSpec) -> list[str]:
    """Differences between the spec we applied and the one a process really runs (empty when equal).

    Only the environment variables we set are compared: a real process inherits many more.
    """
    problems: list[str] = []
    if not _carries_flags(expected.argv, actual.argv):
        problems.append(f"argv is {shlex.join(actual.argv)!r}, expected {shlex.join(expected.argv)!r}")
    for key, value in expected.env.items():
        got = actual.env.get(key)
        if got != value:
            problems.append(f"environment {key}={got!r}, expected {value!r}")
    return problems


def _carries_flags(expected: tuple[str, ...], actual: tuple[str, ...]) -> bool:
    """Whether ``actual`` runs ``expected``'s flags.

    The program part is not compared: the kernel shows the resolved interpreter (a pyenv shim execs the real
    binary), and a launch wrapper (``run.sh`` -> ``exec python -m sglang.launch_server "$@"``) replaces it
    entirely. What must hold is that every flag and value we applied reaches the server, in order.
    """
    if tuple(expected) == tuple(actual):
        return True
    if not expected or not actual:
        return False
    flags = tuple(expected[len(program_part(tuple(expected))) :])
    if not flags:
        return posixpath.basename(expected[0]) == posixpath.basename(actual[0])
    n = len(flags)
    return any(tuple(actual[i : i + n]) == flags for i in range(len(actual) - n + 1))
