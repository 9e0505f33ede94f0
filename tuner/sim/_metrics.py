"""``/metrics`` of the simulated server: SGLang 0.5.23's Prometheus series, as its collectors label them.

Scheduler series (gauges and the retraction counter) carry ``model_name``, ``engine_type``, ``tp_rank``,
``pp_rank`` and ``moe_ep_rank``; only the stats-logging rank (TP rank 0) exports them, unless
``--enable-metrics-for-all-schedulers``, when every TP rank exports its own series (so a client must never sum
gauges across series). Tokenizer series (the token and verify-call counters) carry ``model_name`` and
``engine_type``, the token counters also ``is_streaming``; they grow when a request finishes. Counters are written
as ``prometheus_client`` writes them: ``# TYPE name counter`` for the sample ``name_total``.
"""

from __future__ import annotations

from tuner.sim._engine import AcceptanceStats

__all__ = ["prometheus_text"]


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


def _family(kind: str, name: str, doc: str, samples: list[tuple[dict[str, str], float]]) -> list[str]:
    base = name.removesuffix("_total") if kind == "counter" else name
    lines = [f"# HELP {base} {doc}", f"# TYPE {base} {kind}"]
    lines += [f"{name}{_labels(labels)} {float(value)}" for labels, value in samples]
    return lines


def prometheus_text(
    stats: AcceptanceStats,
    *,
    model_name: str,
    tp_ranks: int,
    running: int,
    waiting: int,
    speculative: bool,
) -> str:
    """The text exposition of every series the simulator keeps (the speculative ones only with an algorithm)."""
    base = {"model_name": model_name, "engine_type": "unified"}
    ranks = [{**base, "tp_rank": str(r), "pp_rank": "0", "moe_ep_rank": "0"} for r in range(tp_ranks)]

    def per_rank(value: float) -> list[tuple[dict[str, str], float]]:
        return [(labels, value) for labels in ranks]

    def streaming(values: dict[bool, int]) -> list[tuple[dict[str, str], float]]:
        return [({**base, "is_streaming": "true" if s else "false"}, v) for s, v in sorted(values.items())]

    families: list[tuple[str, str, str, list[tuple[dict[str, str], float]], bool]] = [
        ("gauge", "sglang:num_running_reqs", "The number of running requests.", per_rank(running), False),
        ("gauge", "sglang:num_queue_reqs", "The number of requests in the waiting queue.", per_rank(waiting), False),
        ("gauge", "sglang:num_retracted_reqs", "The number of retracted requests.", per_rank(stats.last_retracted),
         False),
        ("counter", "sglang:num_retracted_requests_total", "Total number of retracted requests.",
         per_rank(stats.retracted_requests), False),
        ("gauge", "sglang:spec_accept_length",
         "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
         per_rank(stats.gauge_accept_length), True),
        ("gauge", "sglang:spec_accept_rate",
         "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
         per_rank(stats.gauge_accept_rate), True),
        ("counter", "sglang:prompt_tokens_total", "Number of prefill tokens processed.",
         streaming(stats.prompt_tokens), False),
        ("counter", "sglang:generation_tokens_total", "Number of generation tokens processed.",
         streaming(stats.generated_tokens), False),
        ("counter", "sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.",
         [(base, stats.verify_calls)], True),
    ]  # fmt: skip
    lines = [
        line
        for kind, name, doc, samples, spec_only in families
        if speculative or not spec_only
        for line in _family(kind, name, doc, samples)
    ]
    return "\n".join(lines) + "\n"
