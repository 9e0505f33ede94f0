"""The Optuna internals `tune` relies on (tuner/trials/_optuna.py): if an upgrade renames one, this fails first."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.trials import current_trial, set_trial_attr, storage_of, study_id, trial_id


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
