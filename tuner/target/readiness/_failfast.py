"""Answers that will never turn into readiness, recognised in seconds instead of after the whole timeout.

- ``/health`` answering 404 (or another 4xx but 429) again and again: the server has no such endpoint;
- the new process listening, and answering HTTP, on a port other than ``base_url``'s;
- a server that accepts connections but answers nothing for ``readiness.stall_s``: hung.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import httpx

from tuner.config import ReadinessSection
from tuner.errors import NotReady
from tuner.target.services import BaseService, Restarted

__all__ = ["FailFast"]

HEALTH_4XX_LIMIT = 5
"""Consecutive 4xx answers from the health path that end the wait (a loading server answers 503 or nothing)."""
PORT_CHECK_EVERY_S = 1.0

_HEALTH_4XX = re.compile(r"^(/\S*) (4\d\d)$")
_NO_CONNECTION = ("ConnectError", "ConnectTimeout", "RemoteProtocolError")


class FailFast:
    """Fed every probe's answer by :func:`~tuner.target.readiness.wait_ready`; raises :class:`NotReady` when waiting
    longer cannot help."""

    def __init__(
        self,
        *,
        service: BaseService,
        restarted: Restarted,
        base_url: str,
        config: ReadinessSection,
        clock: Callable[[], float],
    ) -> None:
        self._service = service
        self._restarted = restarted
        self._url = urlsplit(base_url)
        self._config = config
        self._clock = clock
        self._health_4xx = 0
        self._stalled_since: float | None = None
        self._next_port_check = 0.0

    def observe(self, answer: str) -> None:
        self._health(answer)
        self._stall(answer)
        if answer.removeprefix("generation ").startswith(_NO_CONNECTION):
            self._other_port()

    def _health(self, answer: str) -> None:
        m = _HEALTH_4XX.match(answer)
        if m is None or m.group(2) == "429":
            self._health_4xx = 0
            return
        self._health_4xx += 1
        if self._health_4xx >= HEALTH_4XX_LIMIT and self._service.is_alive(self._restarted.new):
            path, code = m.groups()
            self._stranger()
            raise NotReady(
                f"{path} answered {code} {self._health_4xx} times in a row: the server has no such endpoint, so "
                f'polling it was stopped; set `[readiness] health_path = ""` (or the server\'s health path)',
                kind="environment",
            )

    def _stranger(self) -> None:
        """The answers come from a process outside the new server's tree: whatever they say is not ours."""
        want = self._url.port or (443 if self._url.scheme == "https" else 80)
        if self._service.serves(self._restarted.new, want) is False:
            raise NotReady(
                f"port {want} of base_url is answered by a process other than the new server "
                f"({self._restarted.new}): another program holds it",
                kind="environment",
            )

    def _stall(self, answer: str) -> None:
        now = self._clock()
        if "ReadTimeout" not in answer:
            self._stalled_since = None
            return
        if self._stalled_since is None:
            # The request that timed out was sent request_timeout_s ago.
            self._stalled_since = now - self._config.request_timeout_s
        if now - self._stalled_since > self._config.stall_s:
            raise NotReady(
                f"hung: the server accepts connections but answered nothing for {now - self._stalled_since:.0f} s "
                f"(readiness.stall_s = {self._config.stall_s:g})"
            )

    def _other_port(self) -> None:
        now = self._clock()
        if now < self._next_port_check:
            return
        self._next_port_check = now + PORT_CHECK_EVERY_S
        want = self._url.port or (443 if self._url.scheme == "https" else 80)
        ports = self._service.listen_ports(self._restarted.new)
        if not ports or want in ports:
            return
        # Only a port that speaks HTTP: a loading server may hold other sockets (a distributed store).
        for port in sorted(ports):
            if _speaks_http(self._url._replace(netloc=f"{self._url.hostname}:{port}").geturl()):
                raise NotReady(
                    f"the new server listens on port {port}, but base_url {urlunsplit(self._url)} says port {want}: "
                    "make base_url and the command's --port agree",
                    kind="environment",
                )


def _speaks_http(url: str) -> bool:
    try:
        with httpx.Client(timeout=2.0) as client:
            client.get(url + "/")
    except httpx.HTTPError:
        return False
    return True
