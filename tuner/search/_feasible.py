"""A sampler that explores at random while no trial is feasible: TPE's model then has nothing good to learn from.

TPE splits the trials into a good group and a bad one; with constraints, feasible trials come first and, when
there are none, the least-violating infeasible ones stand in. A latency promise makes that stand-in misleading: an
SLO's violation is flat over most of the space (every batch cap that admits all arrivals misses by the same
share) while the feasible region is a ridge in one parameter (one batch cap), so TPE keeps refining the
least-bad infeasible corner. On ``studies/slo-chat.toml`` (docs/measuring.md, "A latency promise") plain TPE
found no feasible config in 30 trials for 2 of 10 seeds, random search in every seed. So until a completed trial
is feasible, this sampler draws at random; from the first feasible trial on, the inner sampler (TPE) decides,
with every trial so far as its data. A study without constraints has a feasible trial as soon as one completes.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.search._wrap import WrappingSampler

__all__ = ["FeasibleFirstSampler"]


class FeasibleFirstSampler(WrappingSampler):
    """``inner`` once a completed trial is feasible; random search (seeded with ``seed``) until then."""

    def __init__(self, inner: optuna.samplers.BaseSampler, *, seed: int | None) -> None:
        super().__init__(inner)
        self._random = optuna.samplers.RandomSampler(seed=seed)

    def __str__(self) -> str:
        return f"{self.inner} (random until a trial is feasible)"

    def _exploring(self, study: optuna.Study) -> bool:
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        return bool(complete) and not any(all(v <= 0 for v in t.constraints.values()) for t in complete)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {} if self._exploring(study) else self.inner.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.inner.sample_relative(study, trial, search_space) if search_space else {}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        sampler = self._random if self._exploring(study) else self.inner
        return sampler.sample_independent(study, trial, param_name, param_distribution)

    def reseed_rng(self) -> None:
        super().reseed_rng()
        self._random.reseed_rng()
