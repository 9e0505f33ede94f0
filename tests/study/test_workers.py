"""Two workers, each with its own server, share one study in one database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from fixtures_study import study_toml
from optuna.trial import TrialState

from tuner.sim.testing import free_port
from tuner.study import counted_trials
from tuner.trials import attrs


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_workers_share_a_study_and_stop_at_the_total(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgresql":
        storage = request.getfixturevalue("postgres_url")
        study_name = f"shared-{tmp_path.name}"
    else:
        storage = f"sqlite:///{tmp_path / 'shared.db'}"
        study_name = "shared"
    procs = []
    for worker in ("a", "b"):
        text = study_toml(name=study_name, port=free_port(), gate=False)
        text = text.replace(f'[study]\nname = "{study_name}"', f'[study]\nname = "{study_name}"\nstorage = "{storage}"')
        path = tmp_path / f"worker-{worker}.toml"
        path.write_text(text)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "tuner", "start", "--trials", "6", "--config", str(path)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    study = optuna.load_study(study_name=study_name, storage=storage)
    # Each worker counts the other's running trial as in flight; two workers checking at the same instant can
    # still start one trial more than asked.
    assert counted_trials(study) in (6, 7)
    workers = {t.user_attrs[attrs.WORKER] for t in study.trials}
    assert len(workers) == 2
    # Both workers may enqueue the baseline at the same instant; the second copy is never run twice: it is
    # either a repeat of the measured one or FAIL as "running elsewhere".
    measured = [t for t in study.trials if t.user_attrs.get(attrs.BASELINE) and attrs.COMMAND in t.user_attrs]
    assert len(measured) == 1
    assert not study.get_trials(states=(TrialState.RUNNING,))
    assert all(t.user_attrs.get(attrs.DUPLICATE_OF) is not None for t in study.get_trials(states=(TrialState.FAIL,)))
