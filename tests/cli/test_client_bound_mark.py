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


def test_the_dashboard_note_marks_a_client_bound_trial() -> None:
    from tuner.report._notes import trial_note_text

    best = _trial(True)
    note = trial_note_text(best, best_numbers=frozenset({best.number}))
    assert note is not None and "BEST feasible trial" in note and "CLIENT-BOUND** in c64" in note
    assert trial_note_text(_trial(False)) is None


def test_the_report_marks_a_client_bound_trial_in_the_top_table() -> None:
    from tuner.report._report import _top_row

    assert "CLIENT-BOUND" in _top_row(1, _trial(True), ["c1", "c64"])
    assert "CLIENT-BOUND" not in _top_row(1, _trial(False), ["c1", "c64"])


def test_a_flag_metric_reads_yes_or_no() -> None:
    from tuner.metrics import by_key

    metric = by_key("client_bound")
    assert (metric.format(True), metric.format(False), metric.format(None)) == ("yes", "no", "-")
    assert by_key("tok_s").format(123.456) == "123.5"
