"""How the study searches: the sampler and the regression pruner, built from the study config.

``tuner.study`` builds its sampler and pruner with :func:`make_sampler` and :func:`make_pruner`. The search
strategies are measured against the simulator's ground truth by ``scripts/bench_search.py`` through
:mod:`tuner.sim.inprocess` (the same loop against an in-process model of the server).
"""

from tuner.search._feasible import FeasibleFirstSampler
from tuner.search._prior import Prior, PriorSampler
from tuner.search._pruner import RegressionPruner, pruning_savings
from tuner.search._sampler import (
    SAMPLERS,
    TPE_SETTINGS,
    SamplerFactory,
    make_pruner,
    make_sampler,
    scenario_order,
    tpe_sampler,
)

__all__ = [
    "SAMPLERS",
    "TPE_SETTINGS",
    "FeasibleFirstSampler",
    "Prior",
    "PriorSampler",
    "RegressionPruner",
    "SamplerFactory",
    "make_pruner",
    "make_sampler",
    "pruning_savings",
    "scenario_order",
    "tpe_sampler",
]
