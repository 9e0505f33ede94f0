"""The Optuna internals `tune` relies on (tuner/trials/adapter.py): if an upgrade renames one, this fails first."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.study import make_storage
from tuner.trials.adapter import (
    claims_table,
    current_trial,
    fix_param,
    fixed_params,
    pop_waiting,
    set_trial_attr,
    storage_of,
    study_id,
    trial_id,
)


def test_a_running_trial_can_be_annotated_by_number_and_read_back(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    trial = study.ask()
    frozen = study.trials[trial.number]
    assert trial_id(trial) == trial_id(frozen)
    set_trial_attr(study, frozen, "heartbeat", 1.5)
    trial.set_constraint("correctness", 2.0)  # Optuna 5: read back before `tell` by the feasibility mark
    live = current_trial(trial)
    assert live.state == TrialState.RUNNING
    assert live.user_attrs["heartbeat"] == 1.5
    assert live.constraints == {"correctness": 2.0}
    assert isinstance(storage_of(study), optuna.storages.BaseStorage)
    assert storage_of(study).get_study_name_from_id(study_id(study)) == "s"


def test_optuna_internals_the_claims_rely_on(tmp_path: Path) -> None:
    """Fails loudly when an Optuna upgrade moves what the fleet's claims (tuner/study/_fleet.py) build on."""
    url = f"sqlite:///{tmp_path / 'internals.db'}"
    study = optuna.create_study(study_name="internals", storage=make_storage(url))
    found = claims_table(study)
    assert found is not None
    engine, model = found
    assert engine.dialect.name == "sqlite"
    assert isinstance(study_id(study), int)
    table = model.__table__
    assert table.name == "study_system_attributes"
    uniques = [
        {c.name for c in constraint.columns}
        for constraint in table.constraints
        if constraint.__class__.__name__ == "UniqueConstraint"
    ]
    assert {"study_id", "key"} in uniques, "claims need UNIQUE (study_id, key) on study system attributes"
    # Optuna's own setter is an upsert: it cannot tell two workers apart, which is why claims insert directly.
    storage_of(study).set_study_system_attr(study_id(study), "k", 1)
    storage_of(study).set_study_system_attr(study_id(study), "k", 2)
    assert storage_of(study).get_study_system_attrs(study_id(study))["k"] == 2
    # Stale recovery relies on the state change being a checked transition: a second FAIL is refused.
    trial = study.ask()
    study.tell(trial, state=TrialState.FAIL)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        storage_of(study).set_trial_state_values(trial_id(trial), TrialState.FAIL)
    with pytest.raises(ValueError, match="Cannot tell a FAIL trial"):
        study.tell(trial.number, state=TrialState.FAIL)


def test_a_particular_waiting_trial_is_taken_first_and_only_once(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'w.db'}", study_name="w")
    study.enqueue_trial({"x": 1})
    study.enqueue_trial({"x": 2}, user_attrs={"baseline": True})
    taken = pop_waiting(study, lambda t: bool(t.user_attrs.get("baseline")))
    assert taken is not None and study.trials[taken.number].user_attrs == {"baseline": True}
    assert study.trials[taken.number].state == TrialState.RUNNING  # the study's own view sees it run
    assert pop_waiting(study, lambda t: bool(t.user_attrs.get("baseline"))) is None
    assert study.ask().number == 0  # the rest is Optuna's as before: the oldest waiting trial


def test_a_running_trial_takes_a_measured_value_as_a_param_with_the_studys_distribution(tmp_path: Path) -> None:
    """A batch cap the client played (tuner/study/_emulate.py) becomes the trial's param after its measurement."""
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    study.enqueue_trial({"x": 2})
    enqueued = study.ask()
    assert fixed_params(enqueued) == {"x": 2}
    study.tell(enqueued, enqueued.suggest_categorical("x", [1, 2, 4]))
    trial = study.ask()
    assert fixed_params(trial) == {}
    fix_param(trial, "cap", 32)
    assert trial.suggest_categorical("cap", [16, 32, 64]) == 32
    assert fixed_params(trial) == {"cap": 32}
    study.tell(trial, 1.0)
    stored = study.trials[trial.number]
    assert stored.params == {"cap": 32}
    assert stored.distributions["cap"] == optuna.distributions.CategoricalDistribution([16, 32, 64])
    assert "fixed_params" not in stored.system_attrs  # what was enqueued stays what was enqueued
