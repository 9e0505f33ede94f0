"""How the study searches: sampler and regression pruner, result helpers, and the in-process fast path.

``tuner.study`` builds its sampler and pruner with :func:`make_sampler` and :func:`make_pruner`.
The in-process path (:class:`ModelService` + :func:`model_parts`, or :func:`run_inprocess`) runs the study's
own objective code against the simulator's noise-free model plus seeded noise, and :func:`true_objective` /
:func:`true_optimum` give the ground truth a search result is measured against.
"""

from tuner.search._inprocess import (
    InProcessRun,
    ModelBenchmark,
    ModelGate,
    ModelService,
    VirtualClock,
    model_parts,
    model_readiness,
    run_inprocess,
)
from tuner.search._pruner import RegressionPruner, pruning_savings
from tuner.search._results import per_scenario_best
from tuner.search._sampler import make_pruner, make_sampler, scenario_order
from tuner.search._truth import ModelledScenario, model_scenario, parse_server_config, true_objective, true_optimum

__all__ = [
    "InProcessRun",
    "ModelBenchmark",
    "ModelGate",
    "ModelService",
    "ModelledScenario",
    "RegressionPruner",
    "VirtualClock",
    "make_pruner",
    "make_sampler",
    "model_parts",
    "model_readiness",
    "model_scenario",
    "parse_server_config",
    "per_scenario_best",
    "pruning_savings",
    "run_inprocess",
    "scenario_order",
    "true_objective",
    "true_optimum",
]
