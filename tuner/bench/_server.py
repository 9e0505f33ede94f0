"""Side channels of the server a benchmark reads: prefix-cache flush and speculative-decoding counters.

Acceptance length of one scenario
---------------------------------
:func:`acceptance_between` differences two snapshots taken around the scenario and tries, in order:

1. ``counters``: exact. SGLang (with ``--enable-metrics``): the Prometheus counters
   ``sglang:generation_tokens_total`` and ``sglang:spec_verify_calls_total``, both incremented when a request
   finishes, so delta tokens / delta verify calls is SGLang's own per-request ``completion_tokens /
   spec_verify_ct`` over exactly the scenario's requests. vLLM: ``vllm:spec_decode_num_accepted_tokens_total``
   and ``vllm:spec_decode_num_drafts_total``, read as accepted = accepted + drafts (the bonus token of every
   draft) and steps = drafts, so acceptance = 1 + accepted / drafts. Counters are summed over their label sets
   (ranks, streaming or not): each series counts different requests.
2. ``server_info`` (server-wide, lagging): SGLang's ``/server_info`` ``internal_states[0].avg_spec_accept_length``
   is accepted / verify steps since boot, folded in only every ``--decode-log-interval`` (40) decode batches.
   With the absolute ``sglang:generation_tokens_total`` the scenario's share is ``(G1 - G0) / (G1 / avg1 -
   G0 / avg0)``; it reads whatever the last fold left behind.
3. ``gauge`` (last log interval): ``sglang:spec_accept_length`` after the scenario. One series per rank: gauges
   are never summed; the figure is their mean.
4. ``server_info`` alone (since boot): the cumulative average itself, when nothing else is there.
5. ``None``: nothing usable. Never invented.

Which endpoints are asked at all is the server dialect's (:mod:`tuner.dialects`); nothing for llama-cpp-python.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.dialects import BaseServerDialect, SGLangDialect

__all__ = ["ServerProbe", "ServerSnapshot", "acceptance_between", "parse_prometheus", "prometheus_series"]

SERVER_WIDE = "server_info: server-wide, lagging"
SINCE_BOOT = "server_info: server-wide since boot, lagging"
GAUGE = "gauge: last log interval"

_SAMPLE = re.compile(r"^([^\s{]+)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, kw_only=True)
class ServerSnapshot:
    """What the server's counters said at one instant (every field None / empty when not exposed)."""

    accepted: float | None = None
    """Tokens the verify steps delivered (SGLang: ``sglang:generation_tokens_total``), summed over series."""
    steps: float | None = None
    """Verify steps (SGLang: ``sglang:spec_verify_calls_total``), summed over series."""
    avg_accept: float | None = None
    """``/server_info`` ``avg_spec_accept_length``: server-wide since boot, lagging."""
    generated: float | None = None
    """Absolute generated-token counter (``sglang:generation_tokens_total``)."""
    gauge_accept: tuple[float, ...] = ()
    """``sglang:spec_accept_length``, one value per series (rank)."""


def prometheus_series(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of Prometheus text exposition: name -> [(labels, value)], one entry per series."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip()) if line and not line.startswith("#") else None
        if match is None:
            continue
        name, labels, raw = match.groups()
        try:
            value = float(raw)
        except ValueError:
            continue
        out.setdefault(name, []).append((dict(_LABEL.findall(labels or "")), value))
    return out


def parse_prometheus(text: str) -> dict[str, float]:
    """Each metric summed over its series: right for counters (each series counts other events), not gauges."""
    return _summed(prometheus_series(text))


def _summed(series: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, float]:
    return {name: math.fsum(v for _, v in samples) for name, samples in series.items()}


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _counter(series: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float | None:
    """A counter summed over its series, None when the server does not expose it."""
    return _summed({name: series[name]})[name] if series.get(name) else None


class ServerProbe:
    """Reads the dialect's acceptance source and calls its cache flush (SGLang: ``/server_info`` or
    ``/get_server_info``, ``/metrics``, ``/flush_cache``).

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
        self._dialect = dialect or SGLangDialect()
        d = self._dialect
        self._info_paths = ["/server_info", "/get_server_info"] if d.acceptance == "server_info" else []
        self._metrics = d.metrics_path is not None
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
        info = await self._server_info()
        state: dict[str, Any] = {}
        if info is not None:
            states = info.get("internal_states")
            if isinstance(states, list) and states and isinstance(states[0], dict):
                state = states[0]
            elif isinstance(states, dict):
                state = states
        series = await self._read_metrics()
        if self._dialect.acceptance == "prometheus":
            return _vllm_snapshot(_summed(series))
        generated = _counter(series, "sglang:generation_tokens_total")
        return ServerSnapshot(
            accepted=generated,
            steps=_counter(series, "sglang:spec_verify_calls_total"),
            avg_accept=_num(state, "avg_spec_accept_length"),
            generated=generated,
            gauge_accept=tuple(v for _, v in series.get("sglang:spec_accept_length", ()) if math.isfinite(v)),
        )

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

    async def _read_metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        if not self._metrics:
            return {}
        try:
            r = await self._client.get(self._base + (self._dialect.metrics_path or "/metrics"), headers=self._headers)
        except httpx.HTTPError:
            return {}
        if r.status_code != 200:
            if r.status_code in (404, 405):
                self._metrics = False
            return {}
        return prometheus_series(r.text)


def _vllm_snapshot(metrics: dict[str, float]) -> ServerSnapshot:
    """vLLM's counters as SGLang-style ones: every draft verified is one step that also yields a bonus token."""
    accepted = metrics.get("vllm:spec_decode_num_accepted_tokens_total")
    drafts = metrics.get("vllm:spec_decode_num_drafts_total")
    generated = metrics.get("vllm:generation_tokens_total")
    if accepted is None or drafts is None:
        return ServerSnapshot(generated=generated)
    return ServerSnapshot(accepted=accepted + drafts, steps=drafts, generated=generated)


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
