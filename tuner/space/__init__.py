"""The search space: parameters, their conditions and constraints, and how a sample becomes a launch spec."""

from tuner.space._enumerate import count_configs, iter_configs, param_values
from tuner.space._model import BOOL_STYLES, OPERATORS, Condition, Constraint, Param, SearchSpace, Value
from tuner.space._render import baseline_params, bool_argv, format_value, render
from tuner.space._sample import param_distribution, suggest, suggest_param

__all__ = [
    "BOOL_STYLES",
    "OPERATORS",
    "Condition",
    "Constraint",
    "Param",
    "SearchSpace",
    "Value",
    "baseline_params",
    "bool_argv",
    "count_configs",
    "format_value",
    "iter_configs",
    "param_distribution",
    "param_values",
    "render",
    "suggest",
    "suggest_param",
]
