"""How a command ends: its exit status and the one line that says why (README, "Commands"; docs/faults.md).

One table, read by ``main`` (what the terminal shows) and by the run record and the notify hook (what a detached
run and a webhook are told), so the three never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NO_ANSWER", "STATES", "Ending", "ending", "of_status"]


@dataclass(frozen=True, kw_only=True)
class Ending:
    status: int
    """The exit status: 0 done, 1 an error, 2 a configuration error, 3 the environment, 4 no answer, 130
    interrupted."""
    state: str
    """One word for a machine (:data:`STATES`)."""
    line: str | None = None
    """What ``tune`` prints last on stderr (None for a normal end)."""
    reason: str | None = None
    """The line without its ``tune: ...:`` prefix."""


NO_ANSWER = 4
"""The command ran to its end, but there is no answer to act on: no config keeps the study's promise (no feasible
trial: ``start``, ``finish``, ``best``), or a scenario missed its SLO (``bench``)."""

STATES = {0: "finished", 1: "error", 2: "config-error", 3: "environment", NO_ANSWER: "no-answer", 130: "interrupted"}
"""The state word of each documented exit status; an unexpected exception (a bug) is ``crashed``, status 1."""


def of_status(status: int) -> Ending:
    """How a command that returned ``status`` ended (a fleet's launcher returns its workers' verdict)."""
    return Ending(status=status, state=STATES.get(status, "error"))


def ending(exc: BaseException | None) -> Ending | None:
    """How ``exc`` ends a command (None: not an error ``tune`` reports in one line; let it raise)."""
    from tuner.errors import ConfigError, EnvironmentFault, NoAnswer, TuneError
    from tuner.study import Interrupted

    if exc is None:
        return of_status(0)
    table: tuple[tuple[type[BaseException], int, str], ...] = (
        (Interrupted, 130, "tune: "),
        (ConfigError, 2, "tune: config error: "),
        (EnvironmentFault, 3, "tune: environment: "),
        (NoAnswer, NO_ANSWER, "tune: no answer: "),
        (TuneError, 1, "tune: error: "),
    )
    for kind, status, prefix in table:
        if isinstance(exc, kind):
            return Ending(status=status, state=STATES[status], line=f"{prefix}{exc}", reason=str(exc))
    if isinstance(exc, KeyboardInterrupt):
        return Ending(status=130, state=STATES[130], line="tune: interrupted", reason="interrupted")
    return None
