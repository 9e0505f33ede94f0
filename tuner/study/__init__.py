"""The study: Optuna storage, the trial's story, and the tuning loop."""

from tuner.study._confirm import Confirmation, confirm_top, confirmation_text, last_finalist, recommended_trial
from tuner.study._console import Console
from tuner.study._dryrun import PlannedLaunch, planned_launches
from tuner.study._faults import storage_faults
from tuner.study._fleet import MixedTargets
from tuner.study._loop import Interrupted, RunSummary, run_study
from tuner.study._objective import (
    BenchmarkOutcome,
    Evidence,
    Refined,
    Refinement,
    Score,
    TrialParts,
    TrialRunner,
    benchmark_server,
    objective_refinement,
    refine_on_objective,
    score,
)
from tuner.study._recovery import recover_stale_trials
from tuner.study._storage import (
    FingerprintMismatch,
    NoSuchStudy,
    config_from_study,
    load_existing,
    make_storage,
    open_study,
)
from tuner.study._warmups import describe_warmups, warmup_states
from tuner.trials import best_trials, counted_trials, is_counted, is_feasible

__all__ = [
    "BenchmarkOutcome",
    "Confirmation",
    "Console",
    "Evidence",
    "FingerprintMismatch",
    "Interrupted",
    "MixedTargets",
    "NoSuchStudy",
    "PlannedLaunch",
    "Refined",
    "Refinement",
    "RunSummary",
    "Score",
    "TrialParts",
    "TrialRunner",
    "benchmark_server",
    "best_trials",
    "config_from_study",
    "confirm_top",
    "confirmation_text",
    "counted_trials",
    "describe_warmups",
    "is_counted",
    "is_feasible",
    "last_finalist",
    "load_existing",
    "make_storage",
    "objective_refinement",
    "open_study",
    "planned_launches",
    "recommended_trial",
    "recover_stale_trials",
    "refine_on_objective",
    "run_study",
    "score",
    "storage_faults",
    "warmup_states",
]
