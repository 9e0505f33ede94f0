"""What a trial is measured against (how it is scored is its objective's: :mod:`tuner.objective`).

What a trial is compared with is read from the study's history once, before the trial runs
(:func:`references_for`): the study only changes when a trial ends, so nothing read here goes stale while this one
runs, and no step of the trial looks into the study's history on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial

from tuner.bench import WarmupLookup
from tuner.config import StudyConfig
from tuner.search import RegressionPruner
from tuner.stats import ReferenceLookup
from tuner.study._warmups import first_passes_lookup
from tuner.trials import best_trials, candidates

__all__ = ["References", "last_finalist", "reference_lookup", "references_for"]


# -- what a trial is measured against -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class References:
    """What one trial is compared with, read from the study before it runs (None: nothing to compare with)."""

    pruner: ReferenceLookup | None = None
    """The regression pruner's reference repeats per scenario (the benchmark's sequential stops)."""
    finalist: ReferenceLookup | None = None
    """The repeats of the last config the end-of-study confirmation would re-measure, the study's noise pooled
    without it: the objective's extra repeats only decide whether this config joins the finalists."""
    first_passes: WarmupLookup | None = None
    """The study's evidence on first passes (``[benchmark] warmup = "auto"``)."""
    best: FrozenTrial | None = None
    """The best feasible trial so far: the scale the partial objective is reported on, where a measurement on the
    server starts (:meth:`tuner.objective.BaseObjective.measure`), and what ``[gate] when = "contenders"`` measures
    "behind the best" against."""


def references_for(study: optuna.Study, config: StudyConfig, *, trial_number: int) -> References:
    """Everything trial ``trial_number`` is measured against, from the study as it is now."""
    finalist = last_finalist(study, config, exclude=trial_number)
    best = [t for t in best_trials(study) if t.number != trial_number] if len(study.directions) == 1 else []
    return References(
        pruner=reference_lookup(study, exclude=trial_number),
        finalist=reference_lookup(study, exclude=trial_number, against=finalist) if finalist else None,
        first_passes=first_passes_lookup(study, config, trial_number=trial_number),
        best=best[0] if best else None,
    )


def last_finalist(study: optuna.Study, config: StudyConfig, *, exclude: int) -> FrozenTrial | None:
    """The last config the end-of-study confirmation would re-measure if the study ended now (the
    ``confirm_top``-th best, ``exclude`` left out); None without a confirmation or with fewer candidates."""
    k = config.search.confirm_top
    if k < 2:
        return None
    ranked = [t for t in candidates(study) if t.number != exclude]
    return ranked[k - 1] if len(ranked) >= k else None


def reference_lookup(
    study: optuna.Study, *, exclude: int, against: FrozenTrial | None = None
) -> ReferenceLookup | None:
    """The regression pruner's reference repeats (None: no pruner), or ``against``'s, with the study's noise
    pooled without the candidate and the reference."""
    pruner = study.pruner
    if not isinstance(pruner, RegressionPruner) or len(study.directions) > 1:
        return None
    return pruner.reference_lookup(study, exclude=exclude, against=against)
