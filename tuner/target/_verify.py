"""Does the server really run the trial's configuration? Checked twice by :meth:`Target.bring_up`.

Right after the start (:func:`verify_started`), so that flags or an environment that never reach the server (a
systemd drop-in overridden by another, a wrapper script that drops ``"$@"``, a variable not passed on) fail the
trial at once instead of after minutes of model loading; and once it serves (:func:`verify_applied`), on the
process that owns the listening socket, since a wrapper may hand over to the real server later.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.errors import ConfigNotApplied
from tuner.spec import LaunchSpec, spec_matches
from tuner.target.services import BaseService, Restarted
from tuner.wait import wait_until

__all__ = ["SETTLE_POLL_S", "Applied", "verify_applied", "verify_started"]


@dataclass(frozen=True, kw_only=True)
class Applied:
    """A configuration put on the server (the apply step's result, which the checks here verify)."""

    spec: LaunchSpec
    """What the next restart runs (the base spec after a revert)."""
    reverted: bool = False

SETTLE_POLL_S = 0.2
"""Between two reads of the new process tree while it settles (a read costs a few host commands)."""


def verify_applied(service: BaseService, applied: Applied, *, port: int | None = None) -> None:
    """The process that answers on ``port`` (or, where none is known, some process of the server's tree) must
    run the configuration's flags and environment."""
    if applied.reverted:
        return  # the base command may differ from what the manager runs for it (a unit's own ExecStart)
    specs = service.running_specs(port=port)
    if not specs:
        return  # the manager cannot see the process (e.g. a remote container): nothing to compare
    problems = _mismatch(applied.spec, specs)
    if problems:
        raise ConfigNotApplied("config not applied: " + "; ".join(problems), evidence=_evidence(applied.spec, specs))


def verify_started(
    service: BaseService,
    applied: Applied,
    restarted: Restarted,
    *,
    port: int | None,
    settle_s: float,
    interval: float = SETTLE_POLL_S,
) -> int:
    """Before readiness: fail when no process of the new server's tree shows the configuration within
    ``settle_s`` of the start, while the server is still alive.

    The first read that matches ends the check, so a configuration that arrived costs one read; the window is
    only for a process caught before its ``exec`` (systemd's fork, a wrapper's shell). A server that died is
    left to readiness, which reports the exit with its log rather than call a failed start "not applied".
    Returns the number of reads taken (0 when the check does not apply).
    """
    if applied.reverted or settle_s <= 0:
        return 0
    reads = 0
    last: tuple[list[str], Sequence[LaunchSpec]] = ([], ())

    def check(_elapsed: float) -> str | None:
        nonlocal reads, last
        reads += 1
        specs = service.running_specs(port=port)
        if not specs:
            return "unseen"  # gone already, or not visible: readiness knows what to say
        problems = _mismatch(applied.spec, specs)
        if not problems:
            return "applied"
        last = (problems, specs)
        return None if service.is_alive(restarted.new) else "died"

    if wait_until(check, timeout=settle_s, interval=interval) is None and service.is_alive(restarted.new):
        problems, specs = last
        raise ConfigNotApplied(
            f"config not applied: {'; '.join(problems)} (still {settle_s:g} s after the start, so readiness was "
            "not awaited; a launch wrapper that needs longer to pass the flags on: raise [readiness] "
            "verify_settle_s)",
            evidence=_evidence(applied.spec, specs),
        )
    return reads


def _mismatch(expected: LaunchSpec, specs: Sequence[LaunchSpec]) -> list[str]:
    """Empty when one of ``specs`` runs ``expected``; else how the first (the socket owner, or the live
    process) differs."""
    differences = [spec_matches(expected, spec) for spec in specs]
    return [] if any(not d for d in differences) else differences[0]


def _evidence(expected: LaunchSpec, specs: Sequence[LaunchSpec]) -> str:
    lines = [f"applied: {expected.shell_text()}"]
    for i, spec in enumerate(specs, 1):
        lines.append(f"process {i} of {len(specs)}: {shlex.join(spec.argv)}")
        lines += [f"  {problem}" for problem in spec_matches(expected, spec)]
    return "\n".join(lines)
