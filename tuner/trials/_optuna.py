"""The few Optuna internals `tune` needs, in one place (tests/trials/test_optuna_internals.py guards them).

Optuna's public API has no way to set a user attr on a trial known only by number (a stale trial found on
resume, the trial whose heartbeat a thread keeps), nor to read a live trial's constraints before ``tell``; the
dashboard's notes need the study's id. Each is a private attribute (``Study._storage``, ``Study._study_id``,
``Trial._trial_id``); an Optuna upgrade that renames one breaks exactly this module and its test, loudly.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial

__all__ = ["current_trial", "set_trial_attr", "storage_of", "study_id", "trial_id"]


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    return study._storage


def study_id(study: optuna.Study) -> int:
    return study._study_id


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    return trial._trial_id


def set_trial_attr(study: optuna.Study, trial: optuna.Trial | FrozenTrial, key: str, value: Any) -> None:
    """A user attr on a trial that is still RUNNING, whichever process or thread holds it."""
    storage_of(study).set_trial_user_attr(trial_id(trial), key, value)


def current_trial(trial: optuna.Trial) -> FrozenTrial:
    """The live trial as stored now (its constraints and user attrs so far)."""
    return storage_of(trial.study).get_trial(trial_id(trial))
