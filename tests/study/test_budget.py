"""The time budget: the cost model per branch, --until parsing, and a study that stops before its deadline."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.config import base_spec, load_config
from tuner.sim.inprocess import ModelService, model_parts, model_target
from tuner.study import Console, run_study, study_eta
from tuner.study._budget import UNTIL_DEADLINE, TimeBudget, confirmation_visits, parse_until
from tuner.study._confirm import ROUNDS
from tuner.trials import record_of
from tuner.trials._record import as_user_attrs

ROOT = Path(__file__).resolve().parents[2]
DEMO = load_config(ROOT / "studies" / "demo.toml")


def test_cost_model_is_the_mean_per_branch() -> None:
    unconfirmed = dataclasses.replace(DEMO, search=dataclasses.replace(DEMO.search, confirm_top=0))
    b = TimeBudget(deadline=1000.0, config=unconfirmed)
    assert b.expected() is None and b.fits({"algorithm": "DDTREE"}, now=999.0)  # no model: the first trial starts
    b.record({"algorithm": "DDTREE", "budget": 8}, 10.0)
    b.record({"algorithm": "DDTREE", "budget": 16}, 20.0)
    b.record({"algorithm": "DFLASH"}, 60.0)
    assert b.expected({"algorithm": "DDTREE"}) == 15.0 and b.expected({"algorithm": "DFLASH"}) == 60.0
    assert b.expected() == pytest.approx(30.0)
    assert b.fits({"algorithm": "DDTREE"}, now=980.0) and not b.fits({"algorithm": "DFLASH"}, now=980.0)
    assert b.expected_trials(now=880.0) == 4  # 120 s left at ~30 s a trial
    assert TimeBudget(deadline=None, config=DEMO).expected_trials() is None
    b.deadline = time.time() + 125.0
    assert b.describe().startswith(", ~4 more fit before ")  # the progress line's expected trial count


def test_the_confirmation_s_two_rounds_are_kept_free_before_the_deadline() -> None:
    assert DEMO.search.confirm_top == 2 and DEMO.search.confirm_baseline
    b = TimeBudget(deadline=1000.0, config=DEMO)
    assert b.reserved_s() == 0 and b.fits({"algorithm": "DDTREE"}, now=999.0)  # no model yet
    b.record({"algorithm": "DDTREE"}, 10.0)
    assert b.reserved_s() == 3 * ROUNDS * 10.0  # the top two and the baseline in every round, ~a trial a visit
    assert b.fits({"algorithm": "DDTREE"}, now=1000.0 - 10.0 - b.reserved_s())
    assert not b.fits({"algorithm": "DDTREE"}, now=1000.0 - 10.0 - b.reserved_s() + 1.0)
    assert b.expected_trials(now=1000.0 - b.reserved_s() - 35.0) == 3
    multi = dataclasses.replace(DEMO, objective=dataclasses.replace(DEMO.objective, kind="multi"))
    assert confirmation_visits(multi) == 0  # a Pareto front is not confirmed


def test_until_is_the_next_such_local_time() -> None:
    evening = dt.datetime(2026, 12, 1, 23, 0)
    assert dt.datetime.fromtimestamp(parse_until("07:30", now=evening)) == dt.datetime(2026, 12, 2, 7, 30)
    assert dt.datetime.fromtimestamp(parse_until("23:30", now=evening)) == dt.datetime(2026, 12, 1, 23, 30)
    for bad in ("7h30", "25:00", "07:60", ""):
        with pytest.raises(ValueError, match="HH:MM"):
            parse_until(bad)


def test_study_stops_before_a_trial_that_would_end_after_the_deadline(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/budget.db"
    config = dataclasses.replace(
        DEMO,
        study=dataclasses.replace(DEMO.study, on_exit="stop", artifacts_dir=tmp_path / "artifacts"),
        search=dataclasses.replace(DEMO.search, confirm_top=0),
    )
    service = ModelService(base=base_spec(config.target), load_time_s=1.0)
    deadline = time.time() + 3.0
    summary = run_study(
        config,
        storage=storage,
        target=model_target(config, service),
        parts_factory=functools.partial(model_parts, seed=0),
        console=Console(stream=open(tmp_path / "log.txt", "w"), live=False),  # noqa: SIM115 - closed with the test
        deadline=deadline,
    )
    assert summary.target == UNTIL_DEADLINE and 1 <= summary.counted < 1000
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    stopped = [t for t in study.trials if (record_of(t).interrupted or "").startswith("deadline")]
    assert len(stopped) == 1 and stopped[0].state == TrialState.FAIL
    # Its config is not lost: the next run starts with it.
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert any(t.params == stopped[0].params or record_of(t).retry_of == stopped[0].number for t in waiting)
    log = (tmp_path / "log.txt").read_text()
    assert "stopping: a trial takes" in log and "remain before the deadline" in log


def _ran(ready_s: float | None, wall_s: float) -> optuna.trial.FrozenTrial:
    """A finished trial that took ``wall_s`` from ask to tell, ``ready_s`` of it to restart the server."""
    facts = as_user_attrs(ready_s=ready_s) if ready_s is not None else {}
    t = optuna.trial.create_trial(value=1.0, user_attrs=facts)
    t.datetime_start = dt.datetime(2026, 12, 1, 23, 0)
    t.datetime_complete = t.datetime_start + dt.timedelta(seconds=wall_s)
    return t


def test_the_time_left_is_restarts_apart_from_measuring() -> None:
    # Two restarts of 360 s and 400 s, each followed by 120 s and 60 s of the rest; a duplicate never restarted.
    trials = [_ran(360.0, 480.0), _ran(400.0, 460.0), _ran(None, 0.5)]
    eta = study_eta(trials, DEMO, trials_left=10)
    assert (eta.restarts, eta.restart_s, eta.measure_s) == (2, 380.0, 90.0)
    assert eta.visits_left == confirmation_visits(DEMO) == 3 * ROUNDS  # every confirmation visit restarts too
    assert eta.seconds == pytest.approx((10 + 3 * ROUNDS) * 470.0)
    text = eta.text()
    assert text.startswith(f"~{(10 + 3 * ROUNDS) * 470 // 60}m") and "6m20s, mean of 2" in text, text
    assert "1m30s measuring" in text and f"10 trials and {3 * ROUNDS} confirmation visits" in text
    done = study_eta(trials, DEMO, trials_left=0, confirmed=True)
    assert done.seconds is None and done.text() == ""  # nothing left to run
    assert study_eta([_ran(None, 1.0)], DEMO, trials_left=5).seconds is None  # no restart measured yet


def test_the_progress_line_s_eta_is_the_time_left(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/eta.db"
    config = dataclasses.replace(
        DEMO,
        study=dataclasses.replace(DEMO.study, on_exit="stop", artifacts_dir=tmp_path / "artifacts"),
        search=dataclasses.replace(DEMO.search, confirm_top=0),
    )
    service = ModelService(base=base_spec(config.target), load_time_s=600.0)  # modelled: a restart of 10+ min
    with open(tmp_path / "log.txt", "w") as log:
        run_study(
            config,
            trials=3,
            storage=storage,
            target=model_target(config, service),
            parts_factory=functools.partial(model_parts, seed=0),
            console=Console(stream=log, live=False),
        )
    lines = [line for line in (tmp_path / "log.txt").read_text().splitlines() if line.startswith("[")]
    assert lines[0].startswith("[1/3]")  # nothing measured yet
    # Before the last trial: one left, at the modelled restart (the ready time the trials recorded) and the wall
    # time beside it (next to nothing in the model), so the ETA is one restart: over 10 minutes.
    eta = re.match(r"\[3/3, ETA (\d+)m(\d\d)s\]", lines[2])
    assert eta is not None and int(eta[1]) * 60 + int(eta[2]) >= 600, lines[2]
