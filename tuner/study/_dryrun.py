"""The launches a study would make first, without making them (``tune start --dry-run N``).

The same machinery as a real start, in memory: the sampler the study would get (same seed), the starting
points it enqueues (the baseline, a warm start's top configs, the expert seeds, one trial per unexplored branch),
the same rejection of constraint violations and repeats, and the same rendering into launch specs. Nothing is
stored and no host is contacted (a warm start's study is read, not written). Without measurements the sampler
stays in its random start-up phase, which is what a study's first trials are; later trials depend on the results,
which a dry run does not have.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from tuner.config import StudyConfig, launch_spec
from tuner.objective import objective_of
from tuner.search import make_sampler
from tuner.space import Value, suggest
from tuner.spec import LaunchSpec
from tuner.study._fleet import worker_seed
from tuner.study._starts import enqueue_starting_points
from tuner.trials import WarmStart, record_of

__all__ = ["PlannedLaunch", "planned_launches"]

_TRIES_PER_LAUNCH = 50


@dataclass(frozen=True, kw_only=True)
class PlannedLaunch:
    number: int
    """The trial number the study would give it (rejected samples take numbers too)."""
    label: str
    """``baseline``, ``seed N``, ``branch algorithm=DFLASH`` or ``sampled``."""
    params: dict[str, Value]
    spec: LaunchSpec


def _label(trial: optuna.Trial) -> str:
    record = record_of(trial)
    if record.is_baseline:
        return "baseline"
    if record.warm_origin is not None:
        return f"warm start {record.warm_origin}"
    if record.seed is not None:
        return f"seed {record.seed}"
    branch = record.branch
    if branch:
        return "branch " + " ".join(f"{k}={v}" for k, v in branch.items())
    return "sampled"


def _study(config: StudyConfig, warm: WarmStart | None) -> optuna.Study:
    """An in-memory study as a fresh start would set it up: its first worker's sampler and starting points."""
    seed = worker_seed(config.study.seed, ordinal=0, offset=0)
    seeded = dataclasses.replace(config, study=dataclasses.replace(config.study, seed=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        directions = objective_of(config).directions()
        study = optuna.create_study(directions=directions, sampler=make_sampler(seeded, offset=0))
    enqueue_starting_points(study, config, warm=warm)
    return study


def planned_launches(config: StudyConfig, count: int, *, warm: WarmStart | None = None) -> list[PlannedLaunch]:
    """The baseline's launch and the next ``count`` distinct ones the study would make, in order (``warm``: what
    the study's warm start would carry over, :func:`tuner.study.read_warm_start`)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = _study(config, warm)
    out: list[PlannedLaunch] = []
    seen: list[dict[str, Value]] = []
    for _ in range(_TRIES_PER_LAUNCH * (count + 1)):
        if len(out) == count + 1:
            break
        trial = study.ask()
        params = suggest(trial, config.space)
        # Constraint violations end PRUNED without a restart, repeats are told their known result: no launch.
        if config.space.violations(params) or params in seen:
            study.tell(trial, state=TrialState.PRUNED)
            continue
        seen.append(params)
        label = _label(trial)
        out.append(PlannedLaunch(number=trial.number, label=label, params=params, spec=launch_spec(config, trial)))
        study.tell(trial, state=TrialState.FAIL)  # no result: the sampler learns nothing from it
    return out
