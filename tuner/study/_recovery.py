"""Trials whose worker died: recognised by a dead PID on this host or a stale heartbeat, failed and retried once."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterable

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.study._fleet import claim_recovery, worker_dead
from tuner.trials import enqueue, record_of, write_stored
from tuner.wait import Every

__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "Heartbeat", "recover_stale_trials", "requeue"]

HEARTBEAT_S = 20.0
STALE_AFTER_S = 90.0


def recover_stale_trials(
    study: optuna.Study,
    *,
    now: float | None = None,
    stale_after_s: float = STALE_AFTER_S,
    keep: Collection[int] = (),
) -> list[int]:
    """Mark RUNNING trials of dead workers FAIL and re-enqueue their params once.

    A trial is stale when its worker process is gone (same host), or its heartbeat stopped. Live trials of
    other workers sharing the study are left alone, and so are ``keep`` (this worker's own, still alive).
    """
    now = time.time() if now is None else now
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.number in keep:
            continue
        record = record_of(t)
        worker, beat = record.worker, record.heartbeat
        started = t.datetime_start.timestamp() if t.datetime_start else now
        stale = (
            (worker is not None and worker_dead(worker))
            or (beat is not None and now - beat > stale_after_s)
            # No owner at all: killed between becoming RUNNING and writing its worker (one heartbeat is plenty).
            or (beat is None and now - started > (min(HEARTBEAT_S, stale_after_s) if worker is None else stale_after_s))
        )
        if not stale or not claim_recovery(study, t.number):
            continue
        try:
            write_stored(study, t, interrupted="stale: worker gone")
            study.tell(t.number, state=TrialState.FAIL)
        except (ValueError, optuna.exceptions.UpdateFinishedTrialError):
            continue  # another worker recovered it first (the state change is atomic): it requeues, not us
        requeue(study, t)
        failed.append(t.number)
    return failed


def requeue(study: optuna.Study, t: FrozenTrial) -> None:
    record = record_of(t)
    if record.retry_of is not None or not t.params:
        return  # once only: a config that kills the tuner twice is not tried a third time
    enqueue(study, t.params, **record.retry())


class Heartbeat:
    """Marks the running trial alive, so other workers (and later runs) can tell a stale trial."""

    def __init__(
        self,
        study: optuna.Study,
        trial: optuna.Trial,
        *,
        interval_s: float = HEARTBEAT_S,
        also: Callable[[], Iterable[int]] | None = None,
    ) -> None:
        self._study = study
        self._trial = trial
        self._also = also
        """Trial ids (not numbers) kept alive beside the running trial."""
        self._every = Every(interval_s, self._beat_quietly, name="tune-heartbeat")

    def __enter__(self) -> Heartbeat:
        self._beat()
        self._every.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._every.stop()

    def _beat(self) -> None:
        now = time.time()
        write_stored(self._study, self._trial, heartbeat=now)
        for trial_id in self._also() if self._also else ():
            write_stored(self._study, trial_id, heartbeat=now)

    def _beat_quietly(self) -> None:
        # A missed beat only risks a false "stale"; never kill the trial for it.
        with contextlib.suppress(Exception):
            self._beat()
