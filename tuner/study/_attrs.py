"""Names of the user attrs every trial carries: the contract between the loop, `tune status`, the report and
the dashboard. Per-scenario figures are flat keys (``c1-short.tok_s``) so the dashboard shows them as columns.
"""

from __future__ import annotations

from typing import Any

BASELINE = "baseline"
COMMAND = "command"
ENV = "env"
FAILURE_PHASE = "failure_phase"
FAILURE_REASON = "failure_reason"
FAILURE_KIND = "failure_kind"
LOG_TAIL = "log_tail"
EVIDENCE = "evidence"
READY_S = "ready_s"
PHASE_TIMES = "phase_times"
BENCHMARK_S = "benchmark_s"
GATE_S = "gate_s"
CORRECT = "correct"
GATE = "gate"
REJECTED = "rejected"
DUPLICATE_OF = "duplicate_of"
RETRY_OF = "retry_of"
INTERRUPTED = "interrupted"
WORKER = "worker"
HEARTBEAT = "heartbeat"
SCORE = "score"
SEED = "seed_trial"
BRANCH = "branch"
PRUNED_SKIPPED = "pruned_skipped_scenarios"
PRUNING_SAVED_S = "pruning_saved_s"
TARGET_TRIALS = "target_trials"

SCENARIO_FIELDS = (
    "tok_s",
    "per_stream_tok_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p99_s",
    "accept_length",
    "errors",
    "ci_low",
    "ci_high",
    "repeats",
    "seconds",
)


def scenario_key(scenario: str, field: str) -> str:
    return f"{scenario}.{field}"


def scenario_attrs(result: Any) -> dict[str, Any]:
    """Flat user attrs for one :class:`~tuner.bench.ScenarioResult`."""
    values = {
        "tok_s": result.output_tok_s,
        "per_stream_tok_s": result.per_stream_tok_s,
        "ttft_p50_s": result.ttft_p50_s,
        "ttft_p99_s": result.ttft_p99_s,
        "itl_p50_s": result.itl_p50_s,
        "itl_p99_s": result.itl_p99_s,
        "accept_length": result.accept_length,
        "errors": result.errors,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "repeats": list(result.repeats_tok_s),
        "seconds": result.seconds,
    }
    return {scenario_key(result.name, k): _round(v) for k, v in values.items()}


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 4)
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v
