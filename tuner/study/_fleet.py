"""Several workers on one study: database claims, trial slots, worker names and per-worker sampler seeds.

Optuna gives workers an atomic hand-off of WAITING trials (``ask`` pops one with ``SELECT ... FOR UPDATE``)
but nothing for "only one of us does X": ``set_study_system_attr`` is an upsert, so two workers that both
"set if absent" both succeed. A claim here is a plain INSERT into Optuna's ``study_system_attributes``
table, whose ``UNIQUE (study_id, key)`` constraint makes exactly one insert win on SQLite and PostgreSQL
alike; a release is a DELETE that only matches the exact value its owner wrote (compare-and-delete).

Claims keep two promises:

* the starting points (baseline, expert seeds, branch trials) are enqueued once per study, so the baseline
  is measured exactly once however many workers start together;
* ``--trials N`` ends with exactly N counted trials: a worker holds one of N numbered *slots* before it asks
  for a trial, keeps it when the trial counts, and gives it back when the trial ends uncounted (rejected,
  a repeat, interrupted, host error). Slots of crashed workers are reaped by the others.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import optuna
from optuna.trial import FrozenTrial

from tuner.config import StudyConfig
from tuner.errors import TuneError

__all__ = [
    "Claims",
    "Fleet",
    "MixedTargets",
    "Slot",
    "Slots",
    "WorkerId",
    "check_target",
    "claim_once",
    "claim_recovery",
    "claim_starting_points",
    "describe_fingerprint",
    "target_fingerprint",
    "worker_dead",
    "worker_ordinal",
    "worker_seed",
]

SLOT_PREFIX = "tune:slot:"
TRIAL_PREFIX = "tune:trial:"
CONFIRM_PREFIX = "tune:confirm:"
RECOVERED_PREFIX = "tune:recovered:"
WORKER_PREFIX = "tune:worker:"
STARTING_POINTS = "tune:starting_points"


@dataclass(frozen=True, kw_only=True)
class WorkerId:
    """``name`` is stable across restarts (seeds the sampler, shown by ``tune status``); ``process`` is
    ``host:pid`` and tells a live worker from a dead one."""

    name: str
    process: str

    @classmethod
    def for_target(cls, config: StudyConfig, *, name: str | None = None) -> WorkerId:
        return cls(name=name or default_worker_name(config), process=f"{socket.gethostname()}:{os.getpid()}")


def default_worker_name(config: StudyConfig) -> str:
    """The server a worker drives: the SSH host (or this machine) and the server's port."""
    target = config.target
    host = target.ssh.host if target.ssh is not None else socket.gethostname()
    port = urlsplit(target.base_url).port
    return f"{host}:{port}" if port else host


def worker_dead(process: str) -> bool:
    """True only when ``process`` (``host:pid``) is on this machine and gone (or is this very process)."""
    host, _, pid = process.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return int(pid) == os.getpid()


def worker_seed(seed: int | None, *, ordinal: int, offset: int) -> int | None:
    """A sampler seed per worker: two workers started together on one study must not draw the same configs.

    The study's first worker keeps ``seed + offset``, so a one-worker study replays exactly as before.
    """
    if seed is None:
        return None
    if ordinal == 0:
        return seed + offset
    digest = hashlib.sha256(f"{seed}:{ordinal}:{offset}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def worker_ordinal(claims: Claims, worker: WorkerId) -> int:
    """This worker's number in the study (0, 1, ...): the same for the same worker name on every resume."""
    held = claims.held(WORKER_PREFIX)
    for key, token in held.items():
        if json.loads(token).get("name") == worker.name:
            return int(key.removeprefix(WORKER_PREFIX))
    ordinal = 0
    while claims.claim(f"{WORKER_PREFIX}{ordinal}", {"name": worker.name}) is None:
        ordinal += 1
    return ordinal


class Claims:
    """Insert-if-absent and compare-and-delete on one study's system attributes, in Optuna's own database.

    The table is Optuna's own (:func:`tuner.trials.claims_table`, checked by
    tests/study/test_fleet.py::test_optuna_internals_the_claims_rely_on).
    """

    def __init__(self, study: optuna.Study) -> None:
        from tuner.trials.adapter import claims_table, storage_of, study_id

        table = claims_table(study)
        if table is None:
            name = type(storage_of(study)).__name__
            raise TuneError(f"several workers need an RDB storage (SQLite or PostgreSQL), not {name}")
        self._engine, self._model = table
        self._study_id = study_id(study)

    def claim(self, key: str, value: Any) -> str | None:
        """Insert ``key`` if absent; the stored JSON (the release token) when this call won, else None."""
        import sqlalchemy.exc
        from sqlalchemy.orm import Session

        text = json.dumps(value, sort_keys=True)
        with Session(self._engine) as session:
            session.add(self._model(study_id=self._study_id, key=key, value_json=text))
            try:
                session.commit()
            except sqlalchemy.exc.IntegrityError:
                session.rollback()
                return None
        return text

    def swap(self, key: str, old: str, value: Any) -> str | None:
        """Replace ``old`` with ``value`` only if the row still holds ``old``; the new token, or None."""
        import sqlalchemy

        text = json.dumps(value, sort_keys=True)
        m = self._model
        stmt = (
            sqlalchemy.update(m)
            .where(m.study_id == self._study_id, m.key == key, m.value_json == old)
            .values(value_json=text)
        )
        return text if self._execute(stmt) == 1 else None

    def release(self, key: str, token: str) -> bool:
        """Delete ``key`` only if it still holds ``token`` (someone else may have reaped and re-claimed it)."""
        import sqlalchemy

        m = self._model
        stmt = sqlalchemy.delete(m).where(m.study_id == self._study_id, m.key == key, m.value_json == token)
        return self._execute(stmt) == 1

    def held(self, prefix: str) -> dict[str, str]:
        """Every claim whose key starts with ``prefix``: key -> token."""
        import sqlalchemy
        from sqlalchemy.orm import Session

        m = self._model
        stmt = sqlalchemy.select(m.key, m.value_json).where(m.study_id == self._study_id, m.key.startswith(prefix))
        with Session(self._engine) as session:
            return {key: value for key, value in session.execute(stmt)}

    def _execute(self, stmt: Any) -> int:
        from sqlalchemy.orm import Session

        with Session(self._engine) as session:
            result = session.execute(stmt)
            session.commit()
            return int(result.rowcount)  # type: ignore[attr-defined]


def claim_once(claims: Claims, key: str, worker: WorkerId) -> bool:
    return claims.claim(key, {"worker": worker.process, "name": worker.name}) is not None


def claim_recovery(study: optuna.Study, number: int) -> bool:
    """True for the one worker that fails and re-enqueues the stale trial ``number`` (SQLite has no row locks)."""
    try:
        claims = Claims(study)
    except TuneError:
        return True  # not an RDB storage: one process, nobody to race
    return claims.claim(f"{RECOVERED_PREFIX}{number}", {"worker": f"{socket.gethostname()}:{os.getpid()}"}) is not None


def claim_starting_points(claims: Claims, worker: WorkerId, *, has_baseline: bool, stale_after_s: float) -> bool:
    """True for the one worker that enqueues the baseline and seeds of this study.

    A claim left by a worker that died before enqueuing anything (no baseline trial exists) is taken over.
    """
    value = {"worker": worker.process, "at": time.time()}
    if claims.claim(STARTING_POINTS, value) is not None:
        return True
    if has_baseline:
        return False
    token = claims.held(STARTING_POINTS).get(STARTING_POINTS)
    if token is None:
        return claims.claim(STARTING_POINTS, value) is not None
    held = json.loads(token)
    if worker_dead(held.get("worker", "")) or time.time() - held.get("at", 0) > stale_after_s:
        return claims.release(STARTING_POINTS, token) and claims.claim(STARTING_POINTS, value) is not None
    return False


@dataclass(frozen=True)
class Slot:
    index: int
    token: str

    @property
    def key(self) -> str:
        return f"{SLOT_PREFIX}{self.index}"


class Slots:
    """The study's N trial slots: a worker claims one before each trial and keeps it only if the trial counts.

    A slot's value names its worker and, once asked, its trial. A slot is free again when its trial ended
    uncounted, or when it was never bound to a trial and its worker is dead or silent for ``stale_after_s``.
    Counted trials from before slots existed (no ``slot`` attr) take up their share of the total.
    """

    def __init__(self, claims: Claims, worker: WorkerId, *, stale_after_s: float) -> None:
        self._claims = claims
        self._worker = worker
        self._stale_after_s = stale_after_s

    def claim(self, total: int, trials: Iterable[FrozenTrial], *, is_counted: Any) -> Slot | None:
        from tuner.trials import record_of

        legacy = sum(1 for t in trials if is_counted(t) and record_of(t).slot is None)
        taken = self._claims.held(SLOT_PREFIX)
        value = {"worker": self._worker.process, "name": self._worker.name, "at": time.time(), "trial": None}
        for index in range(total - legacy):
            slot = Slot(index, "")
            if slot.key in taken:
                continue
            token = self._claims.claim(slot.key, value)
            if token is not None:
                return Slot(index, token)
        return None

    def bind(self, slot: Slot, trial_number: int) -> Slot | None:
        """Record the slot's trial; None when the slot was reaped meanwhile (the worker must not run it)."""
        value = {"worker": self._worker.process, "name": self._worker.name, "at": time.time(), "trial": trial_number}
        token = self._claims.swap(slot.key, slot.token, value)
        return None if token is None else Slot(slot.index, token)

    def release(self, slot: Slot) -> None:
        self._claims.release(slot.key, slot.token)

    def reap(self, trials_by_number: dict[int, FrozenTrial], *, is_counted: Any) -> list[int]:
        """Free the slots of trials that ended uncounted and of workers that died before asking."""
        freed = []
        now = time.time()
        for key, token in self._claims.held(SLOT_PREFIX).items():
            held = json.loads(token)
            number = held.get("trial")
            if number is None:
                dead = worker_dead(held.get("worker", "")) and held.get("worker") != self._worker.process
                free = dead or now - held.get("at", now) > self._stale_after_s
            else:
                t = trials_by_number.get(number)
                free = t is not None and t.state.is_finished() and not is_counted(t)
            if free and self._claims.release(key, token):
                freed.append(int(key.removeprefix(SLOT_PREFIX)))
        return freed


class Fleet:
    """One worker's view of the fleet: it waits for a slot, reaping what dead workers left behind."""

    def __init__(self, study: optuna.Study, worker: WorkerId, *, stale_after_s: float, poll_s: float) -> None:
        self.worker = worker
        self.claims = Claims(study)
        self.slots = Slots(self.claims, worker, stale_after_s=stale_after_s)
        self._study = study
        self._poll_s = poll_s
        self.target: dict[str, str] = {}

    def claim_trial(self, number: int) -> bool:
        """True for the one worker that runs trial ``number`` (see :func:`claim_once`)."""
        return claim_once(self.claims, f"{TRIAL_PREFIX}{number}", self.worker)

    def claim_confirmation(self, top: Sequence[int]) -> bool:
        """True for the one worker that re-measures this top at the end of the study: one confirmation is the
        answer, and two workers re-measuring the same configs would only spend the fleet's night twice.

        A claim whose worker is gone (interrupted or crashed before it recorded the confirmation, or an earlier
        run of this very process: ``tune finish`` after a Ctrl-C) is taken over, or that top would never be
        confirmed."""
        key = f"{CONFIRM_PREFIX}{','.join(map(str, top))}"
        if claim_once(self.claims, key, self.worker):
            return True
        token = self.claims.held(key).get(key)
        if token is None or not worker_dead(json.loads(token).get("worker", "")):
            return False
        return self.claims.release(key, token) and claim_once(self.claims, key, self.worker)

    def acquire(
        self, total: int, *, is_counted: Any, recover: Any, status: Any, idle: Any = None
    ) -> tuple[Slot, int] | None:
        """A slot and the number of counted trials so far; None once the study holds ``total`` counted trials.

        When every free slot is taken by trials running elsewhere, wait: one of them may end uncounted (or its
        worker die) and hand its slot back. ``idle()`` runs then (the failure policy gives its held trials their
        verdicts: they may be what the slots wait for).
        """
        from tuner.wait import wait_until

        def check(elapsed: float) -> tuple[Slot | None, int] | None:
            recover()
            trials = self._study.get_trials(deepcopy=False)
            self.slots.reap({t.number: t for t in trials}, is_counted=is_counted)
            done = sum(1 for t in trials if is_counted(t))
            if done >= total:
                return None, done
            slot = self.slots.claim(total, trials, is_counted=is_counted)
            if slot is None:
                if idle is not None:
                    idle()
                status(f"{done}/{total} counted; the remaining trials are running on other workers: waiting")
                return None
            return slot, done

        answer = wait_until(check, timeout=math.inf, interval=self._poll_s)
        assert answer is not None  # an endless wait only ends with an answer
        slot, done = answer
        return None if slot is None else (slot, done)


# -- identical hardware ------------------------------------------------------------------

TARGET_FINGERPRINT = "tune:target_fingerprint"


class MixedTargets(TuneError):
    """This worker's server differs from the one the study was started on."""


def target_fingerprint(config: StudyConfig, host: Any | None) -> dict[str, str]:
    """What makes two servers' scores comparable: GPU model and count, driver, and the model paths served.

    The GPUs are read with the ``[target.gpu_wait]`` command's program (``nvidia-smi``) where one is configured;
    an unreadable inventory is recorded as such rather than charged to the worker.
    """
    found = config.dialect.served_models(config.target.command)  # which flags name models is the dialect's
    fingerprint = dict(sorted(found.items()))
    if host is not None and config.target.gpu_wait is not None:
        fingerprint.update(_gpu_inventory(host, config.target.gpu_wait.command[0]))
    return fingerprint


def _gpu_inventory(host: Any, program: str) -> dict[str, str]:
    from tuner.errors import HostError

    query = [program, "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        result = host.run(query, timeout=60)
    except HostError as exc:
        return {"gpus": f"unreadable ({exc})"[:200]}
    rows = [[c.strip() for c in line.split(",")] for line in result.stdout.splitlines() if line.strip()]
    if not result.ok or not rows or any(len(r) != 2 for r in rows):
        return {"gpus": f"unreadable (`{' '.join(query)}` exit {result.exit_status})"}
    names = sorted({r[0] for r in rows})
    drivers = sorted({r[1] for r in rows})
    return {"gpus": f"{len(rows)}x {' + '.join(names)}", "driver": ", ".join(drivers)}


def describe_fingerprint(fingerprint: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in fingerprint.items()) or "(nothing known)"


def check_target(claims: Claims, fingerprint: dict[str, str], *, allow_mixed: bool) -> None:
    """The first worker records the study's target; any other must match it unless mixing is allowed."""
    if claims.claim(TARGET_FINGERPRINT, fingerprint) is not None:
        return
    stored = claims.held(TARGET_FINGERPRINT).get(TARGET_FINGERPRINT)
    study_fp = json.loads(stored) if stored else fingerprint
    if study_fp == fingerprint or allow_mixed:
        return
    raise MixedTargets(
        f"this worker's server differs from the study's: the study runs on [{describe_fingerprint(study_fp)}], "
        f"this worker has [{describe_fingerprint(fingerprint)}]. Scores from different hardware or models are "
        "not comparable. Use an identical server, a new study name, or pass --allow-mixed-targets (each trial "
        "then records its target and the report splits by it)."
    )
