"""Trials whose worker died: recognised by a dead PID on this host or a stale heartbeat, failed and retried once."""

from __future__ import annotations

import contextlib
import time

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.study._fleet import claim_recovery, worker_dead
from tuner.trials import attrs, set_trial_attr
from tuner.wait import Every

__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "Heartbeat", "recover_stale_trials", "requeue"]

HEARTBEAT_S = 20.0
STALE_AFTER_S = 90.0


def recover_stale_trials(
    study: optuna.Study, *, now: float | None = None, stale_after_s: float = STALE_AFTER_S
) -> list[int]:
    """Mark RUNNING trials of dead workers FAIL and re-enqueue their params once.

    A trial is stale when its worker process is gone (same host), or its heartbeat stopped. Live trials of
    other workers sharing the study are left alone.
    """
    now = time.time() if now is None else now
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = t.user_attrs.get(attrs.WORKER)
        beat = t.user_attrs.get(attrs.HEARTBEAT)
        started = t.datetime_start.timestamp() if t.datetime_start else now
        stale = (
            (worker is not None and worker_dead(worker))
            or (beat is not None and now - beat > stale_after_s)
            or (beat is None and now - started > stale_after_s)
        )
        if not stale or not claim_recovery(study, t.number):
            continue
        try:
            set_trial_attr(study, t, attrs.INTERRUPTED, "stale: worker gone")
            study.tell(t.number, state=TrialState.FAIL)
        except (ValueError, optuna.exceptions.UpdateFinishedTrialError):
            continue  # another worker recovered it first (the state change is atomic): it requeues, not us
        requeue(study, t)
        failed.append(t.number)
    return failed


def requeue(study: optuna.Study, t: FrozenTrial) -> None:
    if t.user_attrs.get(attrs.RETRY_OF) is not None or not t.params:
        return  # once only: a config that kills the tuner twice is not tried a third time
    carried = {k: t.user_attrs[k] for k in (attrs.BASELINE, attrs.SEED, attrs.BRANCH) if k in t.user_attrs}
    study.enqueue_trial(t.params, user_attrs={**carried, attrs.RETRY_OF: t.number})


class Heartbeat:
    """Marks the running trial alive, so other workers (and later runs) can tell a stale trial."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial, *, interval_s: float = HEARTBEAT_S) -> None:
        self._study = study
        self._trial = trial
        self._every = Every(interval_s, self._beat_quietly, name="tune-heartbeat")

    def __enter__(self) -> Heartbeat:
        self._beat()
        self._every.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._every.stop()

    def _beat(self) -> None:
        set_trial_attr(self._study, self._trial, attrs.HEARTBEAT, time.time())

    def _beat_quietly(self) -> None:
        # A missed beat only risks a false "stale"; never kill the trial for it.
        with contextlib.suppress(Exception):
            self._beat()
