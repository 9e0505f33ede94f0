"""Regression pruning: stop benchmarking a config once it is confidently slower than a reference trial.

The objective runs a trial's scenarios cheapest first and, after each one, reports and asks
``trial.should_prune()``. Optuna's stock pruners compare intermediate *values*; a benchmark has something better:
the per-repeat samples (user attr ``<scenario>.repeats``), so the comparison can be a statistical test that
knows the noise (:func:`tuner.stats.is_slower`) instead of a rank among noisy point estimates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.stats import EMPTY_POOL, Noise, Reference, ReferenceLookup, is_slower, objective_slower, pooled_noise
from tuner.trials import best_trials, record_of, study_trials

__all__ = ["RegressionPruner", "pruning_savings"]

REFERENCES = ("best", "baseline")


class RegressionPruner(optuna.pruners.BasePruner):
    """Prune a trial when the scenario it just finished is confidently slower than the reference's.

    The same test also runs after every repeat, inside the benchmark (:meth:`reference_lookup` gives the
    benchmark's :class:`tuner.stats.SequentialPolicy` the reference's repeats): a scenario it stopped as
    ``worse`` is pruned here without a second test.

    Args:
        scenarios: Scenario names in the order the objective runs them (step ``i`` is ``scenarios[i]``).
        reference: ``"best"``: the best feasible COMPLETE trial so far; ``"baseline"``: trial 0 (the
            unmodified command). "best" prunes more (it rises as the study improves); "baseline" only stops
            configs that make the server worse than it was.
        margin: Prune only when slower by more than this fraction (0.05 = 5%).
        confidence: One-sided confidence the test needs (0.9: wrongly pruning an equal config happens at most
            ~10% of the time per comparison, less the further it is from the margin).
        min_repeats: Samples each side needs before the test is trusted.
        objective_margin: Also prune when the objective so far (the weighted geomean of the scenarios measured
            up to now, :func:`tuner.stats.objective_slower`) is confidently slower than the reference's on the
            same scenarios by more than this fraction (None: only the per-scenario test). A geomean objective
            is what ranks configs, so a config a little slower on every scenario so far is as surely out as one
            far slower on one; this needs the study's pooled noise for each scenario.
        weights: The objective's weight per scenario (missing: 1), for ``objective_margin``.

    The last scenario is never pruned: nothing remains to be skipped, so pruning would only throw away a
    finished measurement. Multi-objective studies cannot use pruners (``Trial.report`` is single-objective in
    Optuna); :func:`tuner.search.make_pruner` gives them a NopPruner.
    """

    def __init__(
        self,
        *,
        scenarios: Sequence[str],
        reference: str = "best",
        margin: float = 0.05,
        confidence: float = 0.9,
        min_repeats: int = 2,
        objective_margin: float | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        if reference not in REFERENCES:
            raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be within [0, 1), got {margin}")
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be within (0, 1), got {confidence}")
        if min_repeats < 2:
            raise ValueError(f"min_repeats must be >= 2 (one repeat has no noise estimate), got {min_repeats}")
        self._scenarios = tuple(scenarios)
        self._reference = reference
        self._margin = margin
        self._confidence = confidence
        self._min_repeats = min_repeats
        if objective_margin is not None and not 0.0 <= objective_margin < 1.0:
            raise ValueError(f"objective_margin must be within [0, 1), got {objective_margin}")
        self._objective_margin = objective_margin
        self._weights = {name: 1.0 for name in self._scenarios} | dict(weights or {})

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None or not 0 <= step < len(self._scenarios) - 1:
            return False
        scenario = self._scenarios[step]
        if record_of(trial).figure(scenario, "stopped") == "worse":
            return True  # the benchmark already ran this test after each repeat (see reference_lookup)
        lookup = self.reference_lookup(study, exclude=trial.number)
        reference = lookup(scenario)
        candidate = record_of(trial).repeats(scenario)
        if reference is None or len(candidate) < (1 if reference.noise is not None else self._min_repeats):
            return False
        if is_slower(
            candidate, reference.samples, margin=self._margin, confidence=self._confidence, noise=reference.noise
        ):
            return True
        return self._objective_so_far_slower(trial, lookup, self._scenarios[: step + 1])

    def _objective_so_far_slower(self, trial: FrozenTrial, lookup: ReferenceLookup, names: Sequence[str]) -> bool:
        if self._objective_margin is None:
            return False
        references = {name: lookup(name) for name in names}
        samples = {name: record_of(trial).repeats(name) for name in names}
        if not all(samples.values()):
            return False
        known = {name: ref for name, ref in references.items() if ref is not None}
        if len(known) < len(names):
            return False
        return objective_slower(samples, references=known, weights=self._weights, margin=self._objective_margin)

    def reference_lookup(
        self, study: optuna.Study, *, exclude: int | None = None, against: FrozenTrial | None = None
    ) -> ReferenceLookup:
        """The reference's repeats per scenario, for the benchmark's sequential policy (repeat-level pruning).

        The reference trial (the pruner's, or ``against``) is chosen once, when the trial's benchmark starts:
        it only changes when a trial ends. Each :class:`~tuner.stats.Reference` carries the study's repeat
        noise for its scenario, pooled over every measured config but the candidate and the reference
        (:func:`tuner.stats.pooled_noise`). When none of them repeated the scenario, a reference with
        ``min_repeats`` repeats of it brings the only noise estimate the study has: its pool is then
        :data:`~tuner.stats.EMPTY_POOL` (the baseline's repeats decide the next trials' repeats, which need not
        be repeated just to learn the noise again). A reference with fewer repeats is no reference for it.
        """
        ref = against or self.reference_trial(study, exclude=exclude)
        if ref is None:
            return lambda scenario: None
        others = [
            t
            for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
            if t.number not in (exclude, ref.number)
        ]
        pools: dict[str, Noise | None] = {}

        def lookup(scenario: str) -> Reference | None:
            if scenario not in pools:
                pools[scenario] = pooled_noise(record_of(t).repeats(scenario) for t in others)
            samples = record_of(ref).repeats(scenario)
            noise = pools[scenario]
            if noise is None and len(samples) >= self._min_repeats:
                noise = EMPTY_POOL
            if noise is None:
                return None
            return Reference(
                samples=tuple(samples),
                margin=self._margin,
                confidence=self._confidence,
                trial=ref.number,
                noise=noise,
            )

        return lookup

    def reference_trial(self, study: optuna.Study, *, exclude: int | None = None) -> FrozenTrial | None:
        """The trial a candidate is compared with (None: nothing to compare with yet)."""
        if self._reference == "baseline":
            for t in study_trials(study, states=(TrialState.COMPLETE,)):
                if record_of(t).is_baseline and t.number != exclude and record_of(t).feasible:
                    return t
            return None
        best = [t for t in best_trials(study) if t.number != exclude]
        return best[0] if best else None


def pruning_savings(study: optuna.Study) -> float:
    """Benchmark seconds the regression pruner saved over the whole study (sum of ``pruning_saved_s``).

    Each pruned trial's saving is estimated by the objective from the baseline's timings of the scenarios it
    skipped, so it is in the same seconds as the benchmark (modelled seconds for the in-process model).
    """
    return round(sum(record_of(t).pruning_saved_s or 0.0 for t in study.get_trials(deepcopy=False)), 3)
