"""A trial measured while the load generator was the bottleneck is marked wherever it is shown."""

from __future__ import annotations

import optuna
from optuna.distributions import IntDistribution

from tuner.cli._study import trial_row


def _trial(bound: bool) -> optuna.trial.FrozenTrial:
    return optuna.trial.create_trial(
        values=[100.0],
        params={"budget": 8},
        distributions={"budget": IntDistribution(4, 32)},
        user_attrs={"c1.tok_s": 100.0, "c64.tok_s": 900.0, "c64.client_bound": bound, "c1.client_bound": False},
    )


def test_status_rows_name_the_client_bound_scenarios() -> None:
    assert trial_row(_trial(True), ["c1", "c64"])["client_bound"] == ["c64"]
    assert trial_row(_trial(False), ["c1", "c64"])["client_bound"] == []
