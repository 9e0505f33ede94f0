"""Side channels of the server a benchmark reads: prefix-cache flush and speculative-decoding counters.

Acceptance length of one scenario
---------------------------------
SGLang reports ``internal_states[0].avg_spec_accept_length`` in ``/server_info`` (older ``/get_server_info``):
accepted tokens (bonus included) per verify step, *cumulative since boot*. A scenario's own figure needs the
counters behind that average, so :func:`acceptance_between` tries, in order:

1. ``counters``: explicit accepted-token and verify-step counters in ``internal_states[0]`` (several
   spellings, see ``_ACCEPTED_KEYS`` / ``_STEPS_KEYS``): acceptance = delta(accepted) / delta(steps). Exact.
2. ``derived``: the cumulative average before and after, plus an absolute generated-token counter ``G`` (the
   Prometheus counter ``sglang:generation_tokens_total``). Steps since boot are ``S = G / avg``, so the
   scenario's acceptance is ``(G1 - G0) / (G1 / avg1 - G0 / avg0)``. It counts *delivered* tokens per verify
   step: a request's last step may accept more tokens than ``max_tokens`` leaves room for, and those are not
   delivered, so this reads slightly low (by about ``accept / 2`` tokens per request; under 1% for 512-token
   outputs, a few % for 64-token ones). Without the absolute counter the averages alone cannot be
   disentangled, so this method needs ``--enable-metrics``.
3. ``gauge``: the ``sglang:spec_accept_length`` gauge read after the scenario. On a real SGLang it covers the
   last logging interval (close to the scenario); on a server that reports it cumulatively it lags.
4. ``None``: nothing usable. Never invented.

Which endpoints are asked at all is the server dialect's (:mod:`tuner.dialects`): SGLang's ``/server_info``
and ``sglang:*`` metrics; vLLM's Prometheus counters ``vllm:spec_decode_num_accepted_tokens_total`` and
``vllm:spec_decode_num_drafts_total``, read as ``counters`` with accepted = accepted + drafts (the bonus token of
every draft) and steps = drafts, so acceptance = 1 + accepted / drafts; llama-server's ``llamacpp:`` counters of
the same names (with ``--metrics``) the same way; nothing for llama-cpp-python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.dialects import BaseServerDialect, SGLangDialect

__all__ = ["ServerProbe", "ServerSnapshot", "acceptance_between", "parse_prometheus"]

_ACCEPTED_KEYS = (
    "spec_num_total_accepted_tokens",
    "spec_accepted_tokens",
    "total_accepted_tokens",
    "spec_accept_tokens_total",
    "num_accepted_tokens",
)
_STEPS_KEYS = (
    "spec_num_total_forward_ct",
    "spec_verify_steps",
    "total_verify_steps",
    "spec_verify_ct",
    "num_verify_steps",
)


@dataclass(frozen=True, kw_only=True)
class ServerSnapshot:
    """What the server's counters said at one instant (every field None when not exposed)."""

    avg_accept: float | None = None
    accepted: float | None = None
    steps: float | None = None
    generated: float | None = None
    """Absolute generated-token counter (``sglang:generation_tokens_total``)."""
    gauge_accept: float | None = None


def parse_prometheus(text: str) -> dict[str, float]:
    """Sum every sample of each metric name (labels dropped) from Prometheus text exposition."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, rest = line.partition(" ")
        if "{" in name_part or "}" in line:
            # Labels may contain spaces: split on the closing brace instead.
            brace = line.rfind("}")
            if brace < 0:
                continue
            name = line[: line.index("{")]
            rest = line[brace + 1 :]
        else:
            name = name_part
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        out[name] = out.get(name, 0.0) + value
    return out


def _num(d: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


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
        metrics = await self._read_metrics()
        if self._dialect.acceptance == "prometheus":
            if _LLAMACPP_DRAFTS in metrics:
                return _llamacpp_snapshot(metrics)
            return _vllm_snapshot(metrics)
        avg = _num(state, ("avg_spec_accept_length",))
        return ServerSnapshot(
            avg_accept=avg,
            accepted=_num(state, _ACCEPTED_KEYS),
            steps=_num(state, _STEPS_KEYS),
            generated=metrics.get("sglang:generation_tokens_total"),
            gauge_accept=metrics.get("sglang:spec_accept_length"),
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

    async def _read_metrics(self) -> dict[str, float]:
        if not self._metrics:
            return {}
        try:
            r = await self._client.get(self._base + (self._dialect.metrics_path or "/metrics"), headers=self._headers)
        except httpx.HTTPError:
            return {}
        if r.status_code != 200:
            # llama-server answers 501 when started without --metrics.
            if r.status_code in (404, 405, 501):
                self._metrics = False
            return {}
        return parse_prometheus(r.text)


def _vllm_snapshot(metrics: dict[str, float]) -> ServerSnapshot:
    """vLLM's counters as SGLang-style ones: every draft verified is one step that also yields a bonus token."""
    accepted = metrics.get("vllm:spec_decode_num_accepted_tokens_total")
    drafts = metrics.get("vllm:spec_decode_num_drafts_total")
    generated = metrics.get("vllm:generation_tokens_total")
    if accepted is None or drafts is None:
        return ServerSnapshot(generated=generated)
    return ServerSnapshot(accepted=accepted + drafts, steps=drafts, generated=generated)


_LLAMACPP_DRAFTS = "llamacpp:spec_decode_num_drafts_total"


def _llamacpp_snapshot(metrics: dict[str, float]) -> ServerSnapshot:
    """llama-server's counters (``--metrics``) as SGLang-style ones, as for vLLM: a draft is one verification step.

    The server adds a request's figures to these counters when the request ends, so a snapshot after a pass
    holds all of it; its own per-request log line ("mean len") is the same 1 + accepted / drafts.
    """
    accepted = metrics.get("llamacpp:spec_decode_num_accepted_tokens_total")
    drafts = metrics.get(_LLAMACPP_DRAFTS)
    generated = metrics.get("llamacpp:tokens_predicted_total")
    if accepted is None or drafts is None:
        return ServerSnapshot(generated=generated)
    return ServerSnapshot(accepted=accepted + drafts, steps=drafts, generated=generated)


def acceptance_between(before: ServerSnapshot, after: ServerSnapshot) -> tuple[float | None, str | None]:
    """Acceptance length of the work done between two snapshots, and the method used (module docstring)."""
    if None not in (before.accepted, before.steps, after.accepted, after.steps):
        assert before.accepted is not None and after.accepted is not None
        assert before.steps is not None and after.steps is not None
        d_steps = after.steps - before.steps
        if d_steps > 0:
            return (after.accepted - before.accepted) / d_steps, "counters"
    if None not in (before.avg_accept, after.avg_accept, before.generated, after.generated):
        assert before.avg_accept is not None and after.avg_accept is not None
        assert before.generated is not None and after.generated is not None
        d_gen = after.generated - before.generated
        if before.avg_accept > 0:
            steps0: float | None = before.generated / before.avg_accept
        else:
            # A zero average is only consistent with a server that has not generated yet.
            steps0 = 0.0 if before.generated == 0 else None
        if steps0 is not None and after.avg_accept > 0 and d_gen > 0:
            d_steps = after.generated / after.avg_accept - steps0
            if d_steps > 0:
                return d_gen / d_steps, "derived"
    if after.gauge_accept is not None and after.gauge_accept > 0:
        return after.gauge_accept, "gauge"
    return None, None
