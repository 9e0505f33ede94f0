"""The study's own loop against an in-process model of the simulated server: fast, seeded, noise-controlled.

``run_study(config, target=model_target(...), parts_factory=model_parts)`` runs the very same trial story as
against a real server, but each restart and benchmark is a call into the simulator's performance model
(:mod:`tuner.sim._model`), so a 30-trial study takes a second. ``scripts/bench_search.py`` compares search
strategies with it; :func:`true_objective` / :func:`true_optimum` are the ground truth they are judged by.
The tuner itself never imports this package: it only ever meets the model through the seams.
"""

from tuner.sim.inprocess._model_parts import (
    InProcessRun,
    ModelBenchmark,
    ModelGate,
    ModelService,
    VirtualClock,
    model_parts,
    model_readiness,
    model_target,
    run_inprocess,
)
from tuner.sim.inprocess._truth import (
    ModelledScenario,
    model_scenario,
    parse_server_config,
    true_objective,
    true_optimum,
)
from tuner.sim.inprocess._variant import VARIANTS, ModelVariant

__all__ = [
    "VARIANTS",
    "InProcessRun",
    "ModelBenchmark",
    "ModelGate",
    "ModelService",
    "ModelVariant",
    "ModelledScenario",
    "VirtualClock",
    "model_parts",
    "model_readiness",
    "model_scenario",
    "model_target",
    "parse_server_config",
    "run_inprocess",
    "true_objective",
    "true_optimum",
]
