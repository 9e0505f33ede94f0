from __future__ import annotations

import abc
from dataclasses import dataclass

from tuner.spec import LaunchSpec


@dataclass(frozen=True)
class ProcessIdentity:
    """Which process is serving: a PID plus a token that changes on every start.

    The token (kernel start time, or systemd's ActiveEnterTimestampMonotonic) guards against PID reuse,
    so an answer can always be attributed to the old or the new process.
    """

    pid: int
    started: str

    def __str__(self) -> str:
        # The start token tells processes apart for tune; to a person it is a meaningless clock-tick count.
        return f"pid {self.pid}"


@dataclass(frozen=True, kw_only=True)
class ServiceState:
    """A snapshot of the managed server."""

    running: bool
    identity: ProcessIdentity | None
    exit_status: int | None = None
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Restarted:
    """What a restart did: the process that served before (if any) and the one that serves now."""

    old: ProcessIdentity | None
    new: ProcessIdentity
    log_cursor: str
    """Opaque position in the service log where the new process's output starts."""


@dataclass(frozen=True, kw_only=True)
class LogChunk:
    text: str
    cursor: str


@dataclass(frozen=True)
class Finding:
    """One line of a preflight: ``ok`` is True (fine), None (a warning) or False (a problem)."""

    ok: bool | None
    text: str


@dataclass(frozen=True, kw_only=True)
class Preflight:
    findings: tuple[Finding, ...]
    program: tuple[str, ...]
    """The command without its flags (``python -m sglang.launch_server``): ``PROGRAM --help`` lists the flags
    the server accepts."""


class BaseService(abc.ABC):
    """How a server is managed: the service-manager seam (plain process, systemd unit, in-process model).

    The objective only ever calls these methods; it never learns whether a drop-in file, a process group
    or a model object is behind them.
    """

    @abc.abstractmethod
    def apply(self, spec: LaunchSpec) -> None:
        """Stage ``spec`` so that the next :meth:`restart` runs it. Does not touch the running server."""

    @abc.abstractmethod
    def restart(self, *, label: str = "run") -> Restarted:
        """Stop whatever runs (waiting until it is gone), start the staged spec, and identify the new process.

        ``label`` names this start (``trial-12``) where the manager keeps one log per start.

        Raises :class:`~tuner.errors.StartFailed` when the manager itself sees the start fail.
        """

    @abc.abstractmethod
    def state(self) -> ServiceState:
        """Is the server process running, and which one is it."""

    @abc.abstractmethod
    def is_alive(self, identity: ProcessIdentity) -> bool:
        """Whether exactly this process (PID *and* start token) still exists."""

    def serves(self, identity: ProcessIdentity, port: int) -> bool | None:
        """Whether ``identity`` (or a process below it) holds the listening socket on ``port``.

        None when the manager cannot tell. Readiness uses it so that an answer from any other process on the
        port (a predecessor that outlived its stop, a stray server) is never taken for the new server's.
        """
        return None

    def listen_ports(self, identity: ProcessIdentity) -> set[int] | None:
        """The TCP ports ``identity`` (or a process below it) listens on; None when the manager cannot tell.

        Readiness uses it to fail at once when the server came up on a port other than ``base_url``'s.
        """
        return None

    @abc.abstractmethod
    def read_log(self, cursor: str) -> LogChunk:
        """Log text written after ``cursor`` (from :class:`Restarted` or a previous chunk)."""

    def log_location(self) -> str | None:
        """Where a person reads the current (or last) server's whole log: a path, or a command; None if nowhere."""
        return None

    @abc.abstractmethod
    def running_spec(self) -> LaunchSpec | None:
        """The argv and environment the live process really has, or None when nothing runs."""

    def running_specs(self, *, port: int | None = None) -> tuple[LaunchSpec, ...]:
        """The argv and environment of every process that may be the server; empty when nothing runs.

        The live process may be a launch wrapper whose child serves (``sudo -u svc python ...``, a script that
        does not ``exec``): managers that see the process table return the processes of its tree that listen
        on ``port`` when any does, else the whole tree, the live process first. The default is
        :meth:`running_spec` alone.
        """
        spec = self.running_spec()
        return () if spec is None else (spec,)

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the server: SIGTERM, a grace period, then SIGKILL; return once it is gone."""

    @abc.abstractmethod
    def revert(self) -> None:
        """Drop every change :meth:`apply` made, so the next restart runs the untouched base configuration."""

    @abc.abstractmethod
    def preflight(self) -> Preflight:
        """What this manager can verify about its server without changing anything (``tune check``)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources held by the manager (not the server)."""
