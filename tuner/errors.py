"""Typed failures.

Every way a trial can go wrong is a :class:`TrialFailure` carrying the *phase* it happened in, a one-line
*reason* a person can act on, and the *evidence* (log lines, response bodies) that proves it. The study loop
turns these into PRUNED trials with user attrs, so the sampler learns from them and a user reading the
dashboard in the morning sees why, instead of the seed's bare ``SKIP (failed to start)``.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigError",
    "ConfigNotApplied",
    "DiedUnderLoad",
    "EnvironmentFault",
    "GateFailed",
    "HostError",
    "LockHeld",
    "NoAnswer",
    "NotReady",
    "Phase",
    "RegressionPruned",
    "StartFailed",
    "TrialFailure",
    "TuneError",
]


class TuneError(Exception):
    """Base class of every error `tune` raises on purpose."""


class ConfigError(TuneError):
    """A study config (or a value derived from one) is invalid.

    The message always names the file, the key and what was expected, so the user can fix it without
    reading our source.
    """

    def __init__(self, *, file: Path | str | None, key: str, expected: str, got: object = None) -> None:
        self.file = str(file) if file is not None else None
        self.key = key
        self.expected = expected
        self.got = got
        where = f"{self.file}: " if self.file else ""
        tail = "" if got is None else f", got {got!r}"
        super().__init__(f"{where}{key}: expected {expected}{tail}")


class EnvironmentFault(TuneError):
    """The world, not a configuration, is wrong: a port held by a stranger, a missing program, a full disk...

    The message is one line naming what and where; `tune` exits with status 3 and nothing is charged to a
    configuration.
    """


class NoAnswer(TuneError):
    """The study holds no answer to act on: no config keeps its promise, or the one it recommends is not shown to
    keep it. ``tune`` exits with status 4 (docs/faults.md)."""


class HostError(TuneError):
    """A command or file operation on a host could not be carried out (connection, permission, timeout)."""


class LockHeld(EnvironmentFault):
    """Another tuner holds the server's lock."""


class Phase(enum.StrEnum):
    """Where in the trial's story a failure happened."""

    SAMPLE = "sample"
    APPLY = "apply"
    RESTART = "restart"
    READY = "ready"
    GATE = "gate"
    BENCHMARK = "benchmark"
    SCORE = "score"


class TrialFailure(TuneError):
    """A trial failed; the trial ends with these fields as user attrs.

    ``kind`` is ``"environment"`` when the failure site already knows the world is at fault (a 404 health
    path, a server listening on another port), None to let :mod:`tuner.study._policy` classify it.
    """

    phase: Phase = Phase.APPLY
    kind: str | None = None
    restarted: Any = None
    """The restart this failure is about, when the server had been restarted (a
    :class:`tuner.target.services.Restarted`, set by :meth:`tuner.target.Target.bring_up`): the new process's
    log holds the evidence."""

    def __init__(
        self,
        reason: str,
        *,
        evidence: str = "",
        phase: Phase | None = None,
        kind: str | None = None,
        log: str | None = None,
    ) -> None:
        if phase is not None:
            self.phase = phase
        if kind is not None:
            self.kind = kind
        self.reason = reason
        self.evidence = evidence
        self.log = log
        """Where the server's whole log is (a path, or the journalctl command), when the failure site knows."""
        super().__init__(reason)

    def __str__(self) -> str:
        # From the fields, not the constructor's arguments: a reason redacted since still prints redacted.
        where = f" (server log: {self.log})" if self.log else ""
        return f"[{self.phase}] {self.reason}{where}"


class ConfigNotApplied(TrialFailure):
    """The process that came up does not carry the trial's flags or environment."""

    phase = Phase.APPLY


class StartFailed(TrialFailure):
    """The server process exited, or logged a fatal pattern, before it became ready."""

    phase = Phase.READY


class NotReady(TrialFailure):
    """The server did not become ready within the readiness timeout."""

    phase = Phase.READY


class DiedUnderLoad(TrialFailure):
    """The server died, or cut streams, while being benchmarked: a failed config, never a low score."""

    phase = Phase.BENCHMARK


class GateFailed(TrialFailure):
    """The configuration broke the model's answers (correctness gate below its threshold)."""

    phase = Phase.GATE


class RegressionPruned(TrialFailure):
    """The configuration is confidently slower than the reference; the rest of its benchmark was skipped."""

    phase = Phase.BENCHMARK
    skipped: tuple[str, ...] = ()
    """Scenarios not run because of the pruning (filled in by the benchmark step)."""
