"""The study: Optuna storage, the trial's story, and the tuning loop."""

from tuner.study._fleet import MixedTargets
from tuner.study._loop import (
    Console,
    Interrupted,
    RunSummary,
    best_trials,
    counted_trials,
    is_counted,
    is_feasible,
    recover_stale_trials,
    run_study,
)
from tuner.study._objective import (
    Applied,
    BenchmarkOutcome,
    Evidence,
    Score,
    TrialParts,
    TrialRunner,
    apply_config,
    await_ready,
    benchmark_server,
    restart_server,
    score,
    verify_applied,
)
from tuner.study._storage import FingerprintMismatch, config_from_study, make_storage, open_study

__all__ = [
    "Applied",
    "BenchmarkOutcome",
    "Console",
    "Evidence",
    "FingerprintMismatch",
    "Interrupted",
    "MixedTargets",
    "RunSummary",
    "Score",
    "TrialParts",
    "TrialRunner",
    "apply_config",
    "await_ready",
    "benchmark_server",
    "best_trials",
    "config_from_study",
    "counted_trials",
    "is_counted",
    "is_feasible",
    "make_storage",
    "open_study",
    "recover_stale_trials",
    "restart_server",
    "run_study",
    "score",
    "verify_applied",
]
