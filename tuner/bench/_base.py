from __future__ import annotations

import abc
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tuner.bench._stats import bootstrap_ci, robust_score
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
    """False when some request's token count was estimated: no ``usage`` and no tokenizer endpoint to count it."""
    short_requests: int = 0
    """Measured requests that returned fewer tokens than asked for (server ignored ``ignore_eos``)."""
    prompt_tokens: float | None = None
    """Mean prompt tokens the server reported (checks the prompt builder against the server's tokenizer)."""
    warmup_requests: int = 0
    cache_flushed: bool | None = None
    """Whether ``/flush_cache`` succeeded before each repeat (None: not asked; False: server lacks it)."""

    @classmethod
    def from_repeats(
        cls,
        *,
        scenario: Scenario,
        repeats_tok_s: Sequence[float],
        repeats_per_stream_tok_s: Sequence[float],
        mad_k: float,
        ci: float = 0.95,
        **measured: Any,
    ) -> ScenarioResult:
        """Summarise per-repeat figures the one way every benchmark must (medians, robust scores, CI)."""
        interval = bootstrap_ci(repeats_tok_s, ci)
        per_stream = tuple(repeats_per_stream_tok_s)
        return cls(
            name=scenario.name,
            concurrency=scenario.concurrency,
            repeats_tok_s=tuple(repeats_tok_s),
            output_tok_s=statistics.median(repeats_tok_s),
            score=robust_score(repeats_tok_s, mad_k),
            per_stream_tok_s=statistics.median(per_stream) if per_stream else 0.0,
            ci_low=interval[0] if interval else None,
            ci_high=interval[1] if interval else None,
            repeats_per_stream_tok_s=per_stream,
            per_stream_score=robust_score(per_stream, mad_k) if per_stream else None,
            **measured,
        )

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
