"""Reports and exports built from a real study (the loop against the simulator) and a recorded one."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from tuner.cli import main
from tuner.config import launch_spec
from tuner.report import build_report, export_text
from tuner.report._export import export_dropin
from tuner.target.services._systemd import systemd_split
from tuner.trials import best_trials, recommended

Case = Any  # tests/report/conftest.py's StudyCase (conftest modules are not importable by name)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _assert_pngs(plots: dict[str, Path]) -> None:
    for name, path in plots.items():
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC, name
        assert len(data) > 5000, f"{name} is suspiciously small ({len(data)} bytes)"


def test_report_from_the_real_study(sim_study: Case, tmp_path: Path) -> None:
    report = build_report(sim_study.study, sim_study.config, tmp_path / "out")
    assert len(best_trials(sim_study.study)) == 1
    rec = recommended(sim_study.study)  # the confirmed winner: the top was re-measured at the end
    assert rec is not None and rec.confirmed and report.best_number == rec.trial.number
    assert "Confirmation: #" in report.path.read_text()
    assert {"history", "scenarios", "map"} <= set(report.plots), report.skipped
    _assert_pngs(report.plots)
    text = report.path.read_text()
    assert f"**Recommended: trial #{rec.trial.number} (confirmed winner)" in text
    for name in report.plots.values():
        assert f"]({name.name})" in text
    assert re.search(r"\| c2 \| .* \| \*\*\d\.\d\dx \(\d\.\d\d-\d\.\d\d\)\*\* \|", text)  # speed-up, interval
    assert "## Top 10 feasible configs" in text and "## Failures by reason" in text


def test_report_never_calls_an_infeasible_trial_best(synthetic_study: Case, tmp_path: Path) -> None:
    study = synthetic_study.study
    report = build_report(study, synthetic_study.config, tmp_path / "out")
    assert set(report.plots) == {"history", "scenarios", "map", "importances"}, report.skipped
    _assert_pngs(report.plots)
    text = report.path.read_text()
    assert report.best_number == 5  # 131 tok/s; trial 3 is faster (190) but failed the gate
    assert "**Recommended: trial #5 (best by its own measurement), score 128.4 (131.0 ± 2.6)" in text
    top10 = text.split("## Top 10 feasible configs")[1].split("##")[0]
    assert "| #3 |" not in top10 and "| 1 | #5 **recommended** |" in top10
    assert "#3 (186.2 (190.0 ± 3.8), infeasible: wrong answers (gate 1/2))" in top10
    failures = text.split("## Failures by reason")[1].split("##")[0]
    assert "| failed to start | server logged a fatal error" in failures
    assert "| died under load | died under load" in failures
    assert "| infeasible (wrong answers) | infeasible: wrong answers (gate 1/2) | 1 | #3 |" in failures
    header = text.split("## Recommendation")[0]
    assert "1 infeasible (wrong answers)" in header and "1 failed to start" in header
    assert "1 died under load" in header
    assert "## Parameter importance" in text and "| mem_fraction_static |" in text
    # The recommendation is DFLASH: the map is of its branch, not DDTree's budget x top-k.
    assert "## Score map: block_size × mem_fraction_static (algorithm=DFLASH)" in text


def test_report_with_too_few_trials_says_why(synthetic_study: Case, tmp_path: Path) -> None:
    import optuna

    small = optuna.create_study(study_name="small", directions=["maximize"])
    small.add_trials(synthetic_study.study.trials[:3])
    report = build_report(small, synthetic_study.config, tmp_path / "out")
    text = report.path.read_text()
    assert "Skipped: needs at least 6 feasible trials (this study has 3)" in text
    assert "importances" in report.skipped
    _assert_pngs(report.plots)


def test_export_formats_round_trip(synthetic_study: Case) -> None:
    study, config = synthetic_study.study, synthetic_study.config
    best = study.trials[5]
    spec = launch_spec(config, best)

    dropin = export_text(study, config, fmt="dropin")
    body = [line for line in dropin.splitlines() if line and not line.startswith("#")]
    assert body[0] == "[Service]" and body[1] == "ExecStart="
    assert systemd_split(body[2].removeprefix("ExecStart=")) == list(spec.argv)
    assert "UnsetEnvironment=SGLANG_DDTREE_MAX_TOPK" in body  # DFLASH: the base's top-k must not leak in
    assert "WARNING" not in dropin

    command = export_text(study, config, fmt="command")
    assert command.count("\n") == 1 and shlex.split(command) == list(spec.argv)

    data = json.loads(export_text(study, config, fmt="json"))
    assert data["trial"] == 5 and data["feasible"] is True and data["launch"]["argv"] == list(spec.argv)
    assert data["recommended"] is True and data["score"] == "128.4 (131.0 ± 2.6)"
    assert data["scenarios"]["c2"]["tok_s"] == 131.0
    assert data["scenarios"]["c2"]["speedup_vs_baseline"] == pytest.approx(1.31)

    ddtree = export_dropin(study, config, study.trials[1])
    assert "Environment=SGLANG_DDTREE_MAX_TOPK=4" in ddtree.splitlines()
    wrong = export_dropin(study, config, study.trials[3])
    assert "# WARNING: not the recommended config (this trial: infeasible: wrong answers (gate 1/2))" in wrong


def test_cli_report_and_export(synthetic_study: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_path = Path(synthetic_study.config.source)
    out = tmp_path / "rep"
    assert main(["report", "--config", str(config_path), "--out", str(out)]) == 0
    assert (out / "report.md").exists() and (out / "history.png").exists()
    capsys.readouterr()
    assert main(["export", "--config", str(config_path), "--best", "--format", "command"]) == 0
    assert "--speculative-algorithm DFLASH" in capsys.readouterr().out
    assert main(["export", "--config", str(config_path), "--trial", "3", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["feasible"] is False
    assert "warning: trial #3 is not the recommended config: infeasible: wrong answers (gate 1/2)" in captured.err
    assert main(["export", "--config", str(config_path), "--trial", "42"]) == 1
    capsys.readouterr()
    assert main(["report", "--config", str(config_path), "--study", "nope"]) == 1  # a missing study: one line
    assert "no study 'nope' in sqlite:///" in capsys.readouterr().err


def test_a_mixed_target_study_is_split_by_target(synthetic_study: Case, tmp_path: Path) -> None:
    import optuna

    from tuner.trials._record import as_user_attrs

    mixed = optuna.create_study(study_name="mixed", directions=["maximize"])
    for t in synthetic_study.study.trials:
        target = "gpus 8x H100" if t.number % 2 else "gpus 8x RTX PRO 6000"
        mixed.add_trial(optuna.trial.create_trial(
            state=t.state, values=t.values, params=t.params, distributions=t.distributions,
            user_attrs={**t.user_attrs, **as_user_attrs(target_fingerprint=target)}, system_attrs=t.system_attrs,
        ))  # fmt: skip
    text = build_report(mixed, synthetic_study.config, tmp_path / "out").path.read_text()
    section = text.split("## By target")[1].split("##")[0]
    assert "| gpus 8x H100 |" in section and "| gpus 8x RTX PRO 6000 |" in section
    assert (
        "## By target"
        not in build_report(synthetic_study.study, synthetic_study.config, tmp_path / "one").path.read_text()
    )
