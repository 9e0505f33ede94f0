"""The fleet's database primitives: claims that exactly one racer wins, slots, per-worker seeds."""

from __future__ import annotations

import threading
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.study import make_storage
from tuner.study._fleet import (
    Claims,
    Fleet,
    MixedTargets,
    Slots,
    WorkerId,
    check_target,
    claim_starting_points,
    target_fingerprint,
    worker_ordinal,
    worker_seed,
)
from tuner.trials import is_counted, write


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path / 'fleet.db'}"


def new_study(url: str, name: str) -> optuna.Study:
    return optuna.create_study(study_name=name, storage=make_storage(url), load_if_exists=True)


def test_exactly_one_racer_wins_each_claim(storage_url: str, tmp_path: Path) -> None:
    name = f"race-{tmp_path.name}"
    new_study(storage_url, name)
    racers = 8
    keys = [f"tune:test:{i}" for i in range(10)]
    wins: dict[str, list[int]] = {k: [] for k in keys}
    barrier = threading.Barrier(racers)
    errors: list[BaseException] = []

    def race(me: int) -> None:
        try:
            claims = Claims(optuna.load_study(study_name=name, storage=make_storage(storage_url)))
            for key in keys:
                barrier.wait(timeout=60)
                if claims.claim(key, {"me": me}) is not None:
                    wins[key].append(me)
        except BaseException as exc:  # reported below, in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert all(len(w) == 1 for w in wins.values()), wins


def test_release_only_matches_the_owners_token(storage_url: str, tmp_path: Path) -> None:
    claims = Claims(new_study(storage_url, f"release-{tmp_path.name}"))
    token = claims.claim("tune:test", {"a": 1})
    assert token is not None and claims.claim("tune:test", {"a": 2}) is None
    assert not claims.release("tune:test", '{"a": 2}')
    assert claims.release("tune:test", token)
    assert claims.claim("tune:test", {"a": 3}) is not None


def test_slots_cap_the_total_and_come_back_when_a_trial_does_not_count(storage_url: str, tmp_path: Path) -> None:
    study = new_study(storage_url, f"slots-{tmp_path.name}")
    me = WorkerId(name="w", process="nowhere:1")
    slots = Slots(Claims(study), me, stale_after_s=60)
    a = slots.claim(2, [], is_counted=is_counted)
    b = slots.claim(2, [], is_counted=is_counted)
    assert a is not None and b is not None and {a.index, b.index} == {0, 1}
    assert slots.claim(2, [], is_counted=is_counted) is None
    trial = study.ask()
    bound = slots.bind(a, trial.number)
    assert bound is not None
    assert slots.bind(a, trial.number) is None, "a stale token must not rebind"
    assert slots.reap({t.number: t for t in study.trials}, is_counted=is_counted) == []  # running: kept
    write(trial, rejected=True)
    study.tell(trial, state=TrialState.PRUNED)  # ended uncounted: its slot is free for anyone
    assert slots.reap({t.number: t for t in study.trials}, is_counted=is_counted) == [a.index]
    assert slots.claim(2, study.trials, is_counted=is_counted) is not None


def test_a_slot_of_a_dead_worker_that_never_asked_is_reaped(storage_url: str, tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    study = new_study(storage_url, f"dead-{tmp_path.name}")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = WorkerId(name="dead", process=f"{socket.gethostname()}:{gone.stdout.strip()}")
    assert Slots(Claims(study), dead, stale_after_s=3600).claim(1, [], is_counted=is_counted) is not None
    alive = Slots(Claims(study), WorkerId(name="alive", process="elsewhere:1"), stale_after_s=3600)
    assert alive.claim(1, [], is_counted=is_counted) is None
    assert alive.reap({}, is_counted=is_counted) == [0]
    assert alive.claim(1, [], is_counted=is_counted) is not None


def test_starting_points_are_claimed_once(storage_url: str, tmp_path: Path) -> None:
    study = new_study(storage_url, f"start-{tmp_path.name}")
    claims = Claims(study)
    a = WorkerId(name="a", process="elsewhere:1")
    b = WorkerId(name="b", process="elsewhere:2")
    assert claim_starting_points(claims, a, has_baseline=False, stale_after_s=60)
    assert not claim_starting_points(claims, b, has_baseline=False, stale_after_s=60)
    assert not claim_starting_points(claims, b, has_baseline=True, stale_after_s=0)
    # The winner died before enqueuing anything: after stale_after_s another worker takes over.
    assert claim_starting_points(claims, b, has_baseline=False, stale_after_s=0)


def test_one_worker_confirms_a_given_top(storage_url: str, tmp_path: Path) -> None:
    study = new_study(storage_url, f"confirm-{tmp_path.name}")
    a, b = (Fleet(study, WorkerId(name=n, process=f"elsewhere:{n}"), stale_after_s=60, poll_s=0.1) for n in "ab")
    assert a.claim_confirmation([4, 2, 7])
    assert not b.claim_confirmation([4, 2, 7]) and not a.claim_confirmation([4, 2, 7])
    assert b.claim_confirmation([4, 2, 9])  # a later, different top is confirmed again


def test_worker_seeds_differ_per_worker_and_resume() -> None:
    seeds = {worker_seed(3, ordinal=w, offset=o) for w in (0, 1, 2) for o in (0, 5)}
    assert len(seeds) == 6
    assert worker_seed(3, ordinal=0, offset=5) == 8, "a one-worker study keeps the study seed + offset"
    assert worker_seed(3, ordinal=1, offset=0) == worker_seed(3, ordinal=1, offset=0)
    assert worker_seed(None, ordinal=1, offset=0) is None


def test_worker_ordinals_are_stable_per_name(storage_url: str, tmp_path: Path) -> None:
    claims = Claims(new_study(storage_url, f"ordinal-{tmp_path.name}"))
    a, b = WorkerId(name="gpu-1:30000", process="x:1"), WorkerId(name="gpu-2:30000", process="x:2")
    assert (worker_ordinal(claims, a), worker_ordinal(claims, b)) == (0, 1)
    again = WorkerId(name="gpu-2:30000", process="x:3")  # the same server's worker, restarted
    assert worker_ordinal(claims, again) == 1


def test_a_worker_with_a_different_target_is_refused_unless_mixing_is_allowed(storage_url: str, tmp_path: Path) -> None:
    claims = Claims(new_study(storage_url, f"target-{tmp_path.name}"))
    first = {"model-path": "/models/Kimi-K2.6", "gpus": "8x NVIDIA RTX PRO 6000", "driver": "580.65"}
    check_target(claims, first, allow_mixed=False)
    check_target(claims, dict(first), allow_mixed=False)  # an identical box joins
    other = {**first, "gpus": "8x NVIDIA H100"}
    with pytest.raises(MixedTargets, match=r"gpus 8x NVIDIA RTX PRO 6000.*gpus 8x NVIDIA H100.*--allow-mixed"):
        check_target(claims, other, allow_mixed=False)
    check_target(claims, other, allow_mixed=True)


def test_target_fingerprint_names_the_models_served(make_config) -> None:  # type: ignore[no-untyped-def]
    config = make_config(
        name="fp", edit=lambda text: text.replace('"--model-path", "/models/Kimi-K2.6"', '"--model-path", "/m/k"')
    )
    assert target_fingerprint(config, None) == {"model-path": "/m/k"}


def test_a_new_sqlite_file_locked_by_another_starter_is_waited_for(tmp_path: Path) -> None:
    """A worker starting beside another that is writing the new file: SQLite answers the journal-mode switch
    "database is locked" at once (no busy wait), so make_storage waits for it (8 workers hit this in CI)."""
    import sqlite3

    path = tmp_path / "shared.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE other_starter (x INTEGER)")
    writer.execute("BEGIN IMMEDIATE")  # the other starter is writing (Optuna's schema, say)
    finished = threading.Timer(0.5, writer.execute, ("COMMIT",))
    finished.start()
    try:
        storage = make_storage(f"sqlite:///{path}", busy_s=30)
    finally:
        finished.join()
        writer.close()
    assert isinstance(storage, optuna.storages.RDBStorage)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
