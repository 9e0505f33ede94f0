"""The statistics bench, search and study share: estimates from a few repeats, the study's pooled noise, the
"confidently slower" tests the regression pruner and the confirmation race run, and the sequential rule that
decides how many repeats a scenario (or a whole objective) needs.

Changing how `tune` decides that a config is slower, or when it has measured enough, is a change here.
"""

from tuner.stats._batches import batch_quantile_interval, batch_share_interval
from tuner.stats._binomial import clopper_pearson, percentile_interval
from tuner.stats._combine import weighted_log_mean
from tuner.stats._estimate import (
    EMPTY_POOL,
    MAD_TO_SIGMA,
    Estimate,
    Noise,
    bootstrap_ci,
    estimate,
    import_statistics,
    is_slower,
    mad,
    percentile,
    pooled_noise,
    robust_score,
    student_t,
)
from tuner.stats._sequential import (
    VERDICTS,
    ObjectiveDecision,
    Reference,
    ReferenceLookup,
    RepeatDecision,
    SequentialPolicy,
    decide_objective,
    objective_slower,
)

__all__ = [
    "EMPTY_POOL",
    "MAD_TO_SIGMA",
    "VERDICTS",
    "Estimate",
    "Noise",
    "ObjectiveDecision",
    "Reference",
    "ReferenceLookup",
    "RepeatDecision",
    "SequentialPolicy",
    "batch_quantile_interval",
    "batch_share_interval",
    "bootstrap_ci",
    "clopper_pearson",
    "decide_objective",
    "estimate",
    "import_statistics",
    "is_slower",
    "mad",
    "objective_slower",
    "percentile",
    "percentile_interval",
    "pooled_noise",
    "robust_score",
    "student_t",
    "weighted_log_mean",
]
