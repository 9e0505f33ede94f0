"""The few Optuna internals `tune` needs, in one place (tests/trials/test_optuna_internals.py guards them, and
tests/test_architecture.py that no other module touches one).

Optuna's public API has no way to set a user attr on a trial known only by number (a stale trial found on
resume, the trial whose heartbeat a thread keeps), to read a live trial's constraints before ``tell``, to take
one particular waiting trial (a baseline enqueued again must run before the seeds), or to write rows next to its
own (the fleet's claims); the dashboard's notes need the study's id; nor to give a running trial a param's value it
measured (a batch cap the client played: :func:`fix_param`);
and samplers read a study's history through ``Study._get_trials``, the one way to show them trials the study does
not hold (a warm start's prior: :func:`with_extra_trials`). Each uses a private attribute or module
(``Study._storage``, ``Study._study_id``, ``Study._thread_local``, ``Trial._trial_id``, ``Trial._fixed_params``,
``_CachedStorage._backend``, ``optuna.storages._rdb.models``); an Optuna upgrade that renames one breaks exactly
this module and its test, loudly.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial

__all__ = [
    "claims_table",
    "current_trial",
    "fix_param",
    "fixed_params",
    "pop_waiting",
    "rdb_backend",
    "set_trial_attr",
    "storage_of",
    "study_id",
    "trial_id",
    "with_extra_trials",
]


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    return study._storage


def rdb_backend(study: optuna.Study) -> optuna.storages.RDBStorage | None:
    """The study's RDB storage under Optuna's cache layer (``_CachedStorage._backend``), if it is one.

    The fleet's claims (tuner/study/_fleet.py) write Optuna's tables directly through its ``engine``.
    """
    storage = getattr(storage_of(study), "_backend", storage_of(study))
    return storage if isinstance(storage, optuna.storages.RDBStorage) else None


def study_id(study: optuna.Study) -> int:
    return study._study_id


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    return trial._trial_id


def set_trial_attr(study: optuna.Study, trial: optuna.Trial | FrozenTrial, key: str, value: Any) -> None:
    """A user attr on a trial that is still RUNNING, whichever process or thread holds it."""
    storage_of(study).set_trial_user_attr(trial_id(trial), key, value)


def fixed_params(trial: optuna.Trial) -> dict[str, Any]:
    """The params an enqueued trial was given (``Trial._fixed_params``): its suggestions return these."""
    return dict(trial._fixed_params)


def fix_param(trial: optuna.Trial, name: str, value: Any) -> None:
    """Make the trial's next suggestion of ``name`` return ``value``, as an enqueued trial's do: a param whose value
    the trial decided by measuring (a batch cap the client played) is stored with the distribution every other
    trial of the study gives it. In memory only: the trial's stored fixed params still say what was enqueued."""
    trial._fixed_params = {**trial._fixed_params, name: value}


def current_trial(trial: optuna.Trial) -> FrozenTrial:
    """The live trial as stored now (its constraints and user attrs so far)."""
    return storage_of(trial.study).get_trial(trial_id(trial))


def pop_waiting(study: optuna.Study, wanted: Callable[[FrozenTrial], bool]) -> optuna.Trial | None:
    """Take the first WAITING trial ``wanted`` accepts, as ``study.ask()`` takes the oldest: with the same
    compare-and-set (a worker sharing the study may have taken it first). None when none is left."""
    import contextlib

    from optuna.trial import TrialState

    storage = storage_of(study)
    for t in storage.get_all_trials(study_id(study), deepcopy=False, states=(TrialState.WAITING,)):
        if not wanted(t):
            continue
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            if storage.set_trial_state_values(trial_id(t), state=TrialState.RUNNING):
                study._thread_local.cached_all_trials = None  # the study's own cache must see the trial run
                return optuna.Trial(study, trial_id(t))
    return None


def claims_table(study: optuna.Study) -> tuple[Any, Any] | None:
    """``(engine, model)`` of the table that holds the study's system attributes, for rows written beside
    Optuna's own (``model`` has ``UNIQUE (study_id, key)``, which makes an insert a claim); None when the study's
    storage is not an RDB."""
    from optuna.storages._rdb import models

    storage = rdb_backend(study)
    return None if storage is None else (storage.engine, models.StudySystemAttributeModel)


class _WithExtraTrials:
    """A study as a sampler sees it: its own trials after ``extra()``'s, which are not stored anywhere.

    Samplers read a study's history through ``Study._get_trials`` (TPE, GP, CMA-ES, the search-space
    inference); everything else (``directions``, ``_storage`` for constant liar's notes, ...) is the study's own.
    The extra trials come first, as the oldest: TPE's default weights then give them less weight than the
    study's own once the history is long.
    """

    def __init__(self, study: optuna.Study, extra: Callable[[], Sequence[FrozenTrial]]) -> None:
        self._study = study
        self._extra = extra

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(
        self, deepcopy: bool = True, states: Container[Any] | None = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        own = self._study._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)
        extra = [t for t in self._extra() if states is None or t.state in states]
        return [*extra, *own]

    def get_trials(self, deepcopy: bool = True, states: Container[Any] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states, use_cache=False)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()


def with_extra_trials(study: optuna.Study, extra: Callable[[], Sequence[FrozenTrial]]) -> optuna.Study:
    """``study`` with ``extra()``'s trials before its own, for a sampler's eyes only (see :class:`_WithExtraTrials`)."""
    return _WithExtraTrials(study, extra)  # type: ignore[return-value]  # duck-typed: what samplers read
