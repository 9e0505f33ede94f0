from __future__ import annotations

import abc
from dataclasses import asdict, dataclass
from typing import Any

from tuner.config import Scenario


@dataclass(frozen=True, kw_only=True)
class ScenarioResult:
    """One scenario's measurements over its repeats.

    ``output_tok_s`` is the median over repeats of aggregate output tokens/s; ``score`` is the robust
    figure the objective uses: median - k * 1.4826 * MAD.
    """

    name: str
    concurrency: int
    repeats_tok_s: tuple[float, ...]
    output_tok_s: float
    score: float
    per_stream_tok_s: float
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    accept_length: float | None = None
    """Mean speculative acceptance length during the scenario, or None when the server does not expose it."""
    ci_low: float | None = None
    ci_high: float | None = None
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    # --- added by the HTTP benchmark; defaults keep other implementations valid ---
    repeats_per_stream_tok_s: tuple[float, ...] = ()
    """Per repeat: mean over requests of decode tok/s (tokens after the first event / first-to-last event)."""
    per_stream_score: float | None = None
    """median - k * 1.4826 * MAD of ``repeats_per_stream_tok_s`` (for ``metric = "per_stream_tok_s"``)."""
    accept_method: str | None = None
    """How ``accept_length`` was obtained: ``counters``, ``derived``, ``gauge`` (see tuner.bench._server)."""
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None
    output_tokens: int = 0
    """Output tokens of the measured requests (all repeats; warm-up excluded)."""
    tokens_from_usage: bool = True
    """False when some request's token count was estimated because the server sent no ``usage``."""
    short_requests: int = 0
    """Measured requests that returned fewer tokens than asked for (server ignored ``ignore_eos``)."""
    prompt_tokens: float | None = None
    """Mean prompt tokens the server reported (checks the prompt builder against the server's tokenizer)."""
    warmup_requests: int = 0
    cache_flushed: bool | None = None
    """Whether ``/flush_cache`` succeeded before each repeat (None: not asked; False: server lacks it)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class BaseBenchmark(abc.ABC):
    """How a server is benchmarked: the benchmark seam (HTTP load generator, or the in-process model).

    Implementations raise :class:`~tuner.errors.DiedUnderLoad` when requests fail or the server dies: a
    config that cannot survive its own benchmark is a failed config, never a low score.
    """

    @abc.abstractmethod
    def run_scenario(self, scenario: Scenario) -> ScenarioResult:
        """Warm up, run the scenario's repeats, and summarise them."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and connections."""
