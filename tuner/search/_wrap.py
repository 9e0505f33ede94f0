"""The base of the samplers that wrap another: the trial hooks go to the inner sampler, which keeps its state."""

from __future__ import annotations

from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

__all__ = ["WrappingSampler"]


class WrappingSampler(optuna.samplers.BaseSampler):
    """A sampler around ``inner``: subclasses decide the samples; the hooks around each trial are ``inner``'s."""

    def __init__(self, inner: optuna.samplers.BaseSampler) -> None:
        self.inner = inner

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
