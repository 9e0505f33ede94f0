"""What a study launches: the unmodified base command, and a trial's launch spec. One definition each, beside the
config they are read from, for the loop, the confirmation, ``tune apply`` / ``export`` and the simulator."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

import optuna
from optuna.trial import FrozenTrial

from tuner.space import Value, render
from tuner.spec import LaunchSpec
from tuner.trials import record_of

if TYPE_CHECKING:
    from tuner.config._load import StudyConfig
    from tuner.config._sections import TargetSection

__all__ = ["base_spec", "launch_spec", "spec_for"]

PYTHON_PLACEHOLDER = "{python}"


def base_spec(target: TargetSection) -> LaunchSpec:
    """The unmodified launch spec; ``{python}`` means the interpreter running `tune` (local targets)."""
    argv = tuple(sys.executable if a == PYTHON_PLACEHOLDER else a for a in target.command)
    return LaunchSpec(argv=argv, env=dict(target.env))


def spec_for(config: StudyConfig, params: Mapping[str, Value]) -> LaunchSpec:
    """The base command with ``params`` applied (a config that no trial ran yet)."""
    return render(config.space, base_spec(config.target), params)


def launch_spec(config: StudyConfig, trial: FrozenTrial | optuna.Trial) -> LaunchSpec:
    """What the trial runs: the base command itself for the baseline, else the base with its params applied."""
    if record_of(trial).is_baseline:
        return base_spec(config.target)
    return spec_for(config, trial.params)
