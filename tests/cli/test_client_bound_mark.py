"""A trial measured while the load generator was the bottleneck is marked wherever it is shown."""

from __future__ import annotations

import tempfile
from pathlib import Path

import optuna
from optuna.distributions import IntDistribution

from tuner.config import StudyConfig, parse_config
from tuner.report import trial_row

_CONFIG = """
[study]
name = "cb"
[target]
command = ["python", "-m", "tuner.sim", "--port", "30999", "--speculative-ddtree-budget", "8"]
base_url = "http://127.0.0.1:30999"
[space.budget]
type = "int"
low = 4
high = 32
flag = "--speculative-ddtree-budget"
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 16
output_tokens = 16
requests = 1
[[benchmark.scenarios]]
name = "c64"
concurrency = 64
prompt_tokens = 16
output_tokens = 16
requests = 64
"""


def _config() -> StudyConfig:
    return parse_config(_CONFIG, source="cb.toml", base_dir=Path("."))


def _trial(bound: bool) -> optuna.trial.FrozenTrial:
    return optuna.trial.create_trial(
        values=[100.0],
        params={"budget": 8},
        distributions={"budget": IntDistribution(4, 32)},
        user_attrs={"c1.tok_s": 100.0, "c64.tok_s": 900.0, "c64.client_bound": bound, "c1.client_bound": False},
    )


def test_status_rows_name_the_client_bound_scenarios() -> None:
    assert trial_row(_trial(True), _config())["client_bound"] == ["c64"]
    assert trial_row(_trial(False), _config())["client_bound"] == []


def test_the_dashboard_note_marks_a_client_bound_trial() -> None:
    from tuner.report import trial_note_text
    from tuner.trials import Recommendation

    best = _trial(True)
    rec = Recommendation(trial=best, confirmed=False, confirmed_value=None, gate="none", candidates=1)
    note = trial_note_text(best, rec=rec)
    assert note is not None and "RECOMMENDED" in note and "CLIENT-BOUND** in c64" in note
    assert trial_note_text(_trial(False)) is None


def test_the_report_marks_a_client_bound_trial_in_the_top_table() -> None:
    import optuna

    from tuner.report import build_report

    for bound in (True, False):
        study = optuna.create_study(direction="maximize")
        study.add_trial(_trial(bound))
        with tempfile.TemporaryDirectory() as tmp:
            text = build_report(study, _config(), Path(tmp)).path.read_text()
        top = text.split("## Top 10 feasible configs")[1].split("##")[0]
        assert ("CLIENT-BOUND" in top) is bound


def test_a_flag_metric_reads_yes_or_no() -> None:
    from tuner.metrics import by_key

    metric = by_key("client_bound")
    assert (metric.format(True), metric.format(False), metric.format(None)) == ("yes", "no", "-")
    assert by_key("tok_s").format(123.456) == "123.5"
