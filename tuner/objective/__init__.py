"""What a study optimises: the objective seam (:class:`BaseObjective`), one kind per private module, chosen once
from the study's ``[objective] kind`` (:func:`objective_of`). The study, the search and every view ask the objective,
never which kind it is; a new kind is a subclass and :func:`register`."""

from tuner.objective import _geomean, _goodput, _max_rate, _multi  # noqa: F401  (each registers its kind)
from tuner.objective._base import BaseObjective, RateBrackets, Score, ServerRun, objective_of, register
from tuner.objective._figures import Figure, Speedup
from tuner.objective._throughput import scenario_speedup

__all__ = [
    "BaseObjective",
    "Figure",
    "RateBrackets",
    "Score",
    "ServerRun",
    "Speedup",
    "objective_of",
    "register",
    "scenario_speedup",
]
