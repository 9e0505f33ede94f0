"""The server being tuned, as one object: how to reach it, manage it, lock it, talk to it, and bring it up.

:meth:`Target.bring_up` is the one sequence that puts a configuration on the server and proves it serves:
apply -> restart -> verify -> ready -> verify (the configuration is checked on the new process as soon as it
starts, and again on the one that serves). A trial, ``on_exit``, ``tune apply``/``restore`` and ``tune check
--cycle`` all go through it, so none of them can skip a step the others take.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tuner.config import ReadinessSection
from tuner.endpoint import Endpoint
from tuner.errors import HostError, TrialFailure
from tuner.secrets import Secrets
from tuner.spec import LaunchSpec
from tuner.target._verify import Applied, verify_applied, verify_started
from tuner.target.hosts import BaseHost
from tuner.target.readiness import ReadinessCheck, Ready, wait_ready
from tuner.target.services import BaseService, Restarted

if TYPE_CHECKING:
    from tuner.target._lock import TargetLock

__all__ = ["Applied", "BroughtUp", "Target", "apply_config", "await_ready", "restart_server", "verify_applied"]

Progress = Callable[[str], None]



@dataclass(frozen=True, kw_only=True)
class BroughtUp:
    """A configuration that is running and proven to serve."""

    applied: Applied
    restarted: Restarted
    ready: Ready
    settle_reads: int = 0
    """Reads of the new process the check before readiness took (1: the configuration showed at once)."""


# -- the steps ------------------------------------------------------------------


def apply_config(service: BaseService, spec: LaunchSpec | None, *, base: LaunchSpec) -> Applied:
    """Stage ``spec`` for the next restart; None drops every change (the untouched base configuration)."""
    if spec is None:
        service.revert()
        return Applied(spec=base, reverted=True)
    service.apply(spec)
    return Applied(spec=spec)


def restart_server(service: BaseService, *, label: str) -> Restarted:
    return service.restart(label=label)


def await_ready(
    service: BaseService,
    restarted: Restarted,
    *,
    endpoint: Endpoint,
    config: ReadinessSection,
    progress: Progress | None,
    readiness: ReadinessCheck | None = None,
) -> Ready:
    check = readiness or wait_ready
    return check(service=service, restarted=restarted, endpoint=endpoint, config=config, progress=progress)


# -- the target ------------------------------------------------------------------


class Target:
    """Host, service manager, lock, endpoint and readiness check of one server (see :func:`open_target`)."""

    def __init__(
        self,
        *,
        host: BaseHost | None,
        service: BaseService,
        endpoint: Endpoint,
        base: LaunchSpec,
        readiness_config: ReadinessSection,
        readiness: ReadinessCheck | None = None,
        lock: TargetLock | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        self.host = host
        self.service = service
        self.endpoint = endpoint
        self.base = base
        self.readiness_config = readiness_config
        self.readiness: ReadinessCheck = readiness or wait_ready
        self.lock = lock
        self.secrets = secrets or Secrets()
        """The configuration's secrets: a failure quotes argv and logs, and must not quote them."""

    def bring_up(self, spec: LaunchSpec | None, *, label: str, progress: Progress | None = None) -> BroughtUp:
        """apply -> restart -> verify (early) -> ready -> verify; ``spec=None`` restores the base configuration.

        Raises :class:`~tuner.errors.TrialFailure` from the step that failed, its reason and evidence without the
        configuration's secrets; once the server was restarted, the failure's ``restarted`` says which process it
        was about (its log holds the evidence).
        """
        try:
            return self._bring_up(spec, label=label, progress=progress)
        except TrialFailure as failure:
            self.secrets.scrub(failure)  # in place: the failure goes on, without them
            raise
        except HostError as exc:  # its message may quote the launch command
            raise HostError(self.secrets.text(str(exc))) from None

    def _bring_up(self, spec: LaunchSpec | None, *, label: str, progress: Progress | None) -> BroughtUp:
        applied = apply_config(self.service, spec, base=self.base)
        restarted = restart_server(self.service, label=label)
        try:
            return self._prove(applied, restarted, progress)
        except TrialFailure as failure:
            failure.restarted = restarted
            raise

    def _prove(self, applied: Applied, restarted: Restarted, progress: Progress | None) -> BroughtUp:
        port = urlsplit(self.endpoint.base_url).port
        settle_s = self.readiness_config.verify_settle_s
        settle_reads = verify_started(self.service, applied, restarted, port=port, settle_s=settle_s)
        ready = await_ready(
            self.service,
            restarted,
            endpoint=self.endpoint,
            config=self.readiness_config,
            progress=progress,
            readiness=self.readiness,
        )
        verify_applied(self.service, applied, port=port)
        return BroughtUp(applied=applied, restarted=restarted, ready=ready, settle_reads=settle_reads)

    @contextlib.contextmanager
    def locked(self) -> Iterator[Target]:
        """Hold the per-server lock (when the target has one) for the duration of the block."""
        if self.lock is None:
            yield self
            return
        with self.lock:
            yield self

    def close(self) -> None:
        try:
            self.service.close()
        finally:
            if self.host is not None:
                self.host.close()

    def __enter__(self) -> Target:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
