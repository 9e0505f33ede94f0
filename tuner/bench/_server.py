"""Side channels of the server a benchmark reads: prefix-cache flush and speculative-decoding counters.

Acceptance length of one scenario
---------------------------------
The server dialect names the endpoints (``metrics_path``, ``info_paths``) and reads what they say into a
:class:`~tuner.dialects.ServerSnapshot` (``read_counters``: which counters, and what they count, are the
dialect's: SGLang's ``sglang:``, vLLM's ``vllm:``, llama-server's ``llamacpp:``). :func:`acceptance_between`
differences two snapshots taken around the scenario and tries, in order:

1. ``counters``: exact. Accepted tokens over verify steps, both counted by the server when a request finishes,
   so their deltas cover exactly the scenario's requests. Counters are summed over their label sets (ranks,
   streaming or not): each series counts different requests.
2. ``server_info`` (server-wide, lagging): a cumulative average since boot (SGLang's ``avg_spec_accept_length``,
   folded in only every few decode batches) with the absolute generated-token counter: the scenario's share is
   ``(G1 - G0) / (G1 / avg1 - G0 / avg0)``; it reads whatever the last fold left behind.
3. ``gauge`` (last log interval): the acceptance gauge after the scenario. One series per rank: gauges are never
   summed; the figure is their mean.
4. ``server_info`` alone (since boot): the cumulative average itself, when nothing else is there.
5. ``None``: nothing usable. Never invented.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx

from tuner.dialects import BaseServerDialect, ServerSnapshot, default_dialect

__all__ = ["ServerProbe", "acceptance_between"]

SERVER_WIDE = "server_info: server-wide, lagging"
SINCE_BOOT = "server_info: server-wide since boot, lagging"
GAUGE = "gauge: last log interval"

class ServerProbe:
    """Reads the dialect's acceptance counters and calls its cache flush (its ``info_paths``, ``metrics_path``,
    ``flush_path``).

    Endpoints a server lacks (404/405) are remembered and not asked again, so a server without them costs one
    request each per benchmark, not one per scenario; endpoints its dialect does not have are never asked.
    """

    def __init__(
        self,
        *,
        client: httpx.AsyncClient,
        base_url: str,
        headers: dict[str, str],
        dialect: BaseServerDialect | None = None,
    ) -> None:
        self._client = client
        self._base = base_url.rstrip("/")
        self._headers = headers
        self._dialect = dialect or default_dialect()
        d = self._dialect
        self._info_paths = list(d.info_paths)
        self._metrics: str | None = d.metrics_path  # None once the server said it has none
        self._flush = d.flush_path is not None
        self.flush_supported: bool | None = None if self._flush else False

    async def flush_cache(self) -> bool:
        """Reset the prefix cache; False when the server has no cache flush (tolerated)."""
        if not self._flush or self._dialect.flush_path is None:
            return False
        try:
            r = await self._client.post(self._base + self._dialect.flush_path, headers=self._headers)
        except httpx.HTTPError:
            return False
        if r.status_code in (404, 405):
            self._flush = False
            self.flush_supported = False
            return False
        self.flush_supported = r.status_code == 200
        return r.status_code == 200

    async def snapshot(self) -> ServerSnapshot:
        """What the server's counters say now, read by its dialect."""
        info = await self._server_info()
        return self._dialect.read_counters(await self._read_metrics(), info)

    @property
    def alive_path(self) -> str:
        """What :meth:`alive` asks: the health path, or ``/v1/models`` for a server without one."""
        return self._dialect.health_path or "/v1/models"

    async def alive(self) -> bool:
        """Whether the server still answers :attr:`alive_path` (evidence for a failure report)."""
        try:
            r = await self._client.get(self._base + self.alive_path, headers=self._headers, timeout=3.0)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    async def _server_info(self) -> dict[str, Any] | None:
        for path in list(self._info_paths):
            try:
                r = await self._client.get(self._base + path, headers=self._headers)
            except httpx.HTTPError:
                return None
            if r.status_code in (404, 405):
                self._info_paths.remove(path)
                continue
            if r.status_code != 200:
                return None
            try:
                data = r.json()
            except ValueError:
                return None
            if isinstance(data, dict):
                # Found the working spelling: ask only that one from now on.
                self._info_paths = [path]
                return data
            return None
        return None

    async def _read_metrics(self) -> str:
        """The Prometheus text of the dialect's metrics path ("" when it has none or did not answer)."""
        if self._metrics is None:
            return ""
        try:
            r = await self._client.get(self._base + self._metrics, headers=self._headers)
        except httpx.HTTPError:
            return ""
        if r.status_code != 200:
            # llama-server answers 501 when started without --metrics.
            if r.status_code in (404, 405, 501):
                self._metrics = None
            return ""
        return r.text


def _counted(before: ServerSnapshot, after: ServerSnapshot) -> float | None:
    if None in (before.accepted, before.steps, after.accepted, after.steps):
        return None
    assert before.accepted is not None and after.accepted is not None
    assert before.steps is not None and after.steps is not None
    d_steps = after.steps - before.steps
    return (after.accepted - before.accepted) / d_steps if d_steps > 0 else None


def _derived(before: ServerSnapshot, after: ServerSnapshot) -> float | None:
    if None in (before.avg_accept, after.avg_accept, before.generated, after.generated):
        return None
    assert before.avg_accept is not None and after.avg_accept is not None
    assert before.generated is not None and after.generated is not None
    d_gen = after.generated - before.generated
    if before.avg_accept > 0:
        steps0: float | None = before.generated / before.avg_accept
    else:
        # A zero average is only consistent with a server that has not generated yet.
        steps0 = 0.0 if before.generated == 0 else None
    if steps0 is None or after.avg_accept <= 0 or d_gen <= 0:
        return None
    d_steps = after.generated / after.avg_accept - steps0
    return d_gen / d_steps if d_steps > 0 else None


def _mean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v > 0]
    return math.fsum(positive) / len(positive) if positive else None


def acceptance_between(before: ServerSnapshot, after: ServerSnapshot) -> tuple[float | None, str | None]:
    """Acceptance length of the work done between two snapshots, and the method used (module docstring)."""
    for value, method in (
        (_counted(before, after), "counters"),
        (_derived(before, after), SERVER_WIDE),
        (_mean(after.gauge_accept), GAUGE),
        (after.avg_accept if after.avg_accept and after.avg_accept > 0 else None, SINCE_BOOT),
    ):
        if value is not None:
            return value, method
    return None, None
