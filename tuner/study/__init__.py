"""The study: Optuna storage, the trial's story (its steps, its score and what it is measured against), the tuning
loop and its end-of-study confirmation."""

from tuner.study._budget import UNTIL_DEADLINE, parse_until
from tuner.study._confirm import Confirmation, confirm_top, confirmation_text
from tuner.study._console import Console
from tuner.study._dryrun import PlannedLaunch, planned_launches
from tuner.study._faults import storage_faults
from tuner.study._fleet import MixedTargets, default_worker_name
from tuner.study._loop import Interrupted, RunSummary, resume_command, run_study
from tuner.study._objective import REFINE_STEP, Evidence, TrialParts, TrialRunner
from tuner.study._recovery import recover_stale_trials
from tuner.study._scoring import (
    References,
    Score,
    last_finalist,
    objective_bound,
    references_for,
    score,
)
from tuner.study._steps import (
    BenchmarkOutcome,
    Refined,
    Refinement,
    benchmark_server,
    describe_result,
    objective_refinement,
    refine_on_objective,
)
from tuner.study._storage import (
    FingerprintMismatch,
    NoSuchStudy,
    config_from_study,
    load_existing,
    make_storage,
    open_study,
    storage_problem,
)
from tuner.study._warm import map_config, prior_scale, read_warm_start, warm_prior
from tuner.study._warmups import describe_warmups, warmup_states
from tuner.trials import best_trials, counted_trials, is_counted, is_feasible

__all__ = [
    "REFINE_STEP",
    "UNTIL_DEADLINE",
    "BenchmarkOutcome",
    "Confirmation",
    "Console",
    "Evidence",
    "FingerprintMismatch",
    "Interrupted",
    "MixedTargets",
    "NoSuchStudy",
    "PlannedLaunch",
    "References",
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
    "default_worker_name",
    "describe_result",
    "describe_warmups",
    "is_counted",
    "is_feasible",
    "last_finalist",
    "load_existing",
    "make_storage",
    "map_config",
    "objective_bound",
    "objective_refinement",
    "open_study",
    "parse_until",
    "planned_launches",
    "prior_scale",
    "read_warm_start",
    "recover_stale_trials",
    "references_for",
    "refine_on_objective",
    "resume_command",
    "run_study",
    "score",
    "storage_faults",
    "storage_problem",
    "warm_prior",
    "warmup_states",
]
