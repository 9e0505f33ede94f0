"""The sampler and pruner a study runs with, built from its ``[search]`` and ``[objective]`` sections."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import optuna

from tuner.config import StudyConfig
from tuner.objective import objective_of
from tuner.search._feasible import FeasibleFirstSampler
from tuner.search._prior import Prior, PriorSampler
from tuner.search._pruner import RegressionPruner

__all__ = [
    "SAMPLERS",
    "TPE_SETTINGS",
    "SamplerFactory",
    "make_pruner",
    "make_sampler",
    "scenario_order",
    "tpe_sampler",
]


SamplerFactory = Callable[[StudyConfig, "int | None"], optuna.samplers.BaseSampler]
"""Builds a study's sampler from its config and seed (:func:`tpe_sampler` by default)."""

#: The TPE settings every study runs with (docs/measuring.md has the comparison that chose them).
TPE_SETTINGS: dict[str, Any] = {"multivariate": True, "group": True, "constant_liar": True}


def make_sampler(config: StudyConfig, *, offset: int, prior: Prior | None = None) -> optuna.samplers.BaseSampler:
    """The ``[search] sampler`` of :data:`SAMPLERS` (TPE with :data:`TPE_SETTINGS`, or random search), seeded
    reproducibly across resumes.

    ``prior``: a warm start's trials, shown to the sampler beside the study's own (:class:`PriorSampler`; random
    search has no use for them).
    """
    # A fixed seed would replay the same startup samples on every resume: offset it by what the study holds.
    seed = None if config.study.seed is None else config.study.seed + offset
    sampler = SAMPLERS[config.search.sampler](config, seed)
    if prior is None or isinstance(sampler, optuna.samplers.RandomSampler):
        return sampler
    return PriorSampler(sampler, prior=prior)


def tpe_sampler(config: StudyConfig, seed: int | None, **settings: Any) -> optuna.samplers.TPESampler:
    """Optuna's TPE with :data:`TPE_SETTINGS` (``settings`` override them).

    * ``multivariate=True, group=True``: the knobs interact (budget x top-k x block size share one memory and
      time budget) and budget/top-k only exist for DDTREE, so TPE models the joint density per sub-space.
      Set explicitly, which also keeps multivariate sampling for multi-objective studies.
    * ``constant_liar=True``: several workers may share a study; running trials repel duplicates.
    * Failed configs end PRUNED and gate failures carry a positive ``correctness`` constraint: Optuna 5's
      TPE puts both in its "bad" group (FAIL trials would be ignored and re-suggested).
    * ``n_startup_trials`` counts the baseline and the expert seeds, which are real measurements (and a warm
      start's prior: with one, TPE models from its first sample).
    """
    with warnings.catch_warnings():
        # group=True has been "experimental" since Optuna 2.8; it is what conditional spaces need.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            **{**TPE_SETTINGS, "seed": seed, "n_startup_trials": config.search.n_startup_trials, **settings}
        )


def _tpe_feasible_first(config: StudyConfig, seed: int | None) -> optuna.samplers.BaseSampler:
    """``[search] sampler = "tpe"``: :func:`tpe_sampler`, drawing at random while no trial is feasible
    (:class:`~tuner.search._feasible.FeasibleFirstSampler` says why)."""
    return FeasibleFirstSampler(tpe_sampler(config, seed), seed=seed)


def _random_sampler(config: StudyConfig, seed: int | None) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


SAMPLERS: dict[str, SamplerFactory] = {"tpe": _tpe_feasible_first, "random": _random_sampler}
"""The samplers ``[search] sampler`` names (scripts/bench_search.py adds the variants it compares)."""


def scenario_order(config: StudyConfig) -> tuple[str, ...]:
    """Scenario names in the order the objective benchmarks them (cheapest first; step i = entry i)."""
    return tuple(s.name for s in config.benchmark.in_run_order())


def make_pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    """The regression pruner, or none when pruning is off, multi-objective, or there is one scenario."""
    search = config.search
    order = scenario_order(config)
    # With one scenario nothing can be skipped; an objective that is not the scenarios' throughput (several
    # objectives, a max rate) says the throughput of its first scenarios tells nothing about it.
    if not search.pruning or not objective_of(config).throughput_pruning or len(order) < 2:
        return optuna.pruners.NopPruner()
    return RegressionPruner(
        scenarios=order,
        reference=search.prune_against,
        margin=search.prune_margin,
        confidence=search.prune_confidence,
        min_repeats=search.prune_min_repeats,
        objective_margin=search.prune_objective_margin,
        weights={s.name: s.weight for s in config.benchmark.scenarios},
    )
