"""What a server's counters say of speculative acceptance, as each dialect reads them.

The benchmark fetches the server's Prometheus text and its own JSON state (SGLang's ``/server_info``) around
each scenario; the dialect reads them (:func:`prometheus_series`: every sample, by name) into a :class:`ServerSnapshot`
(:meth:`BaseServerDialect.read_counters`), and the benchmark differences two snapshots (``tuner.bench``'s
``acceptance_between``). The counter names and what they count are the dialect's alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Series",
    "ServerSnapshot",
    "counter",
    "drafts_snapshot",
    "number",
    "parse_prometheus",
    "prometheus_series",
    "summed",
]

Series = Mapping[str, Sequence[tuple[Mapping[str, str], float]]]
"""Every sample of a Prometheus text: name -> [(labels, value)], one entry per series."""

_SAMPLE = re.compile(r"^([^\s{]+)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


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
    return summed(prometheus_series(text))


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


def summed(series: Series) -> dict[str, float]:
    """Each metric summed over its series: right for counters (each series counts other events), not gauges."""
    return {name: math.fsum(v for _, v in samples) for name, samples in series.items()}


def counter(series: Series, name: str) -> float | None:
    """A counter summed over its series, None when the server does not expose it."""
    samples = series.get(name)
    return math.fsum(v for _, v in samples) if samples else None


def number(d: Mapping[str, Any], key: str) -> float | None:
    """A finite number in a JSON object, else None."""
    v = d.get(key)
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def drafts_snapshot(metrics: str, *, prefix: str, generated: str) -> ServerSnapshot:
    """Draft counters (vLLM's ``vllm:``, llama-server's ``llamacpp:``) as SGLang-style ones: every draft verified
    is one step that also yields a bonus token, so acceptance = 1 + accepted / drafts. Both servers add a request's
    figures when it ends (llama-server's per-request log line "mean len" is the same figure)."""
    totals = parse_prometheus(metrics)
    accepted = totals.get(f"{prefix}:spec_decode_num_accepted_tokens_total")
    drafts = totals.get(f"{prefix}:spec_decode_num_drafts_total")
    if accepted is None or drafts is None:
        return ServerSnapshot(generated=totals.get(generated))
    return ServerSnapshot(accepted=accepted + drafts, steps=drafts, generated=totals.get(generated))
