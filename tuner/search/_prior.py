"""A sampler that also learns from trials the study does not hold: another study's, carried over by a warm start.

Optuna's samplers have no notion of foreign trials or of a prior weight for them (TPE's ``prior_weight`` weighs
its own flat prior, not data). But a sampler only knows a study through the trials it reads, so this wrapper shows
the inner sampler the study's trials after the prior's (:func:`tuner.trials.with_extra_trials`): TPE then splits
good from bad over both and models its densities from both, GP fits both. The prior's trials are never stored in
the study: nothing carried over is counted, ranked or recommended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial

from tuner.search._wrap import WrappingSampler
from tuner.trials.adapter import with_extra_trials

__all__ = ["Prior", "PriorSampler"]

Prior = Callable[[optuna.Study], Sequence[FrozenTrial]]
"""The trials to show the sampler beside the study's own, computed from the study as it is now."""


class PriorSampler(WrappingSampler):
    """``inner`` sampling as if the study also held ``prior(study)``'s trials, which come first (the oldest)."""

    def __init__(self, inner: optuna.samplers.BaseSampler, *, prior: Prior) -> None:
        super().__init__(inner)
        self._prior = prior

    def __str__(self) -> str:
        return f"{self.inner} with a warm start's prior"

    def _seen(self, study: optuna.Study) -> optuna.Study:
        prior = self._prior(study)  # once per call: the prior's scale follows the study's own measurements
        return with_extra_trials(study, lambda: prior)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(self._seen(study), trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.inner.sample_relative(self._seen(study), trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.inner.sample_independent(self._seen(study), trial, param_name, param_distribution)
