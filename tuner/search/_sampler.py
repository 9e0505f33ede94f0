"""The sampler and pruner a study runs with, built from its ``[search]`` and ``[objective]`` sections."""

from __future__ import annotations

import warnings

import optuna

from tuner.config import StudyConfig
from tuner.search._pruner import RegressionPruner

__all__ = ["make_pruner", "make_sampler", "scenario_order"]


def make_sampler(config: StudyConfig, *, offset: int) -> optuna.samplers.BaseSampler:
    """TPE (multivariate, grouped, constant liar) or random search, seeded reproducibly across resumes.

    * ``multivariate=True, group=True``: the knobs interact (budget x top-k x block size share one memory and
      time budget) and budget/top-k only exist for DDTREE, so TPE models the joint density per sub-space.
      Set explicitly, which also keeps multivariate sampling for multi-objective studies.
    * ``constant_liar=True``: several workers may share a study; running trials repel duplicates.
    * Failed configs end PRUNED and gate failures carry a positive ``correctness`` constraint: Optuna 5's
      TPE puts both in its "bad" group (FAIL trials would be ignored and re-suggested).
    * ``n_startup_trials`` counts the baseline and the expert seeds, which are real measurements.
    """
    # A fixed seed would replay the same startup samples on every resume: offset it by what the study holds.
    seed = None if config.study.seed is None else config.study.seed + offset
    if config.search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        # group=True has been "experimental" since Optuna 2.8; it is what conditional spaces need.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            multivariate=True,
            group=True,
            constant_liar=True,
            seed=seed,
            n_startup_trials=config.search.n_startup_trials,
        )


def scenario_order(config: StudyConfig) -> tuple[str, ...]:
    """Scenario names in the order the objective benchmarks them (cheapest first; step i = entry i)."""
    return tuple(s.name for s in config.benchmark.in_run_order())


def make_pruner(config: StudyConfig) -> optuna.pruners.BasePruner:
    """The regression pruner, or none when pruning is off, multi-objective, or there is one scenario."""
    search = config.search
    order = scenario_order(config)
    # Optuna's Trial.report/should_prune are single-objective only; with one scenario nothing can be skipped.
    if not search.pruning or config.objective.kind == "multi" or len(order) < 2:
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
