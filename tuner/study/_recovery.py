"""Trials whose worker died: recognised by a dead PID on this host or a stale heartbeat, failed and retried once."""

from __future__ import annotations

import contextlib
import os
import socket
import time

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.trials import attrs, set_trial_attr
from tuner.wait import Every

__all__ = ["HEARTBEAT_S", "STALE_AFTER_S", "Heartbeat", "recover_stale_trials", "requeue", "worker_id"]

HEARTBEAT_S = 20.0
STALE_AFTER_S = 90.0


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _worker_dead(worker: str) -> bool:
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return int(pid) == os.getpid()


def recover_stale_trials(study: optuna.Study, *, now: float | None = None) -> list[int]:
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
            (worker is not None and _worker_dead(worker))
            or (beat is not None and now - beat > STALE_AFTER_S)
            # No owner at all: killed between becoming RUNNING and writing its worker (one heartbeat is plenty).
            or (beat is None and now - started > (HEARTBEAT_S if worker is None else STALE_AFTER_S))
        )
        if not stale:
            continue
        set_trial_attr(study, t, attrs.INTERRUPTED, "stale: worker gone")
        study.tell(t.number, state=TrialState.FAIL)
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

    def __init__(self, study: optuna.Study, trial: optuna.Trial) -> None:
        self._study = study
        self._trial = trial
        self._every = Every(HEARTBEAT_S, self._beat_quietly, name="tune-heartbeat")

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
