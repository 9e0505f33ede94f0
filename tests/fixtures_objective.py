"""Studies for the objective seam's tests: the demo study with an open-loop scenario under an SLO and any
``[objective]`` table, run on the in-process model, and the views every kind must agree in."""

from __future__ import annotations

import json
import math
from pathlib import Path

import optuna
import pytest
from fixtures_demo import DEMO
from optuna.trial import TrialState

from tuner.cli import main
from tuner.config import StudyConfig, load_config
from tuner.objective import BaseObjective, objective_of
from tuner.report import figure_text
from tuner.sim.inprocess import run_inprocess
from tuner.trials import recommended

OPEN = (
    '[[benchmark.scenarios]]\nname = "chat-2rps"\nrate = 2.0\nprompt_tokens = 256\noutput_tokens = 32\n'
    "requests = 40\n\n[slo]\nttft_s = 30\ntpot_s = 1.0\nattainment = 0.9\n\n[objective]"
)

#: Each kind's [objective] table, on the demo study with one open-loop scenario added.
KINDS: dict[str, str] = {
    "geomean": 'kind = "geomean"',
    "goodput": 'kind = "goodput"',
    "multi": 'kind = "multi"\nobjectives = ["c1-short", "c8-short"]',
    "max_rate": 'kind = "max_rate"\nscenario = "chat-2rps"\nrate_steps = 3',
}


def study_file(tmp_path: Path, name: str, objective: str) -> Path:
    """The demo study, named ``name``, with an open-loop scenario under an SLO and ``objective`` as its table."""
    text = DEMO.replace('name = "demo"', f'name = "{name}"').replace("[objective]", OPEN, 1)
    head, _, rest = text.partition("[objective]\n")
    _, _, tail = rest.partition("\n[")  # the demo's own objective keys go
    path = tmp_path / f"{name}.toml"
    path.write_text(f"{head}[objective]\n{objective}\n\n[{tail}")
    return path


def run_views(capsys: pytest.CaptureFixture[str], config: Path, tmp_path: Path) -> dict[str, object]:
    """``tune best --json``, ``tune export --format json`` and ``tune report``, each one's output."""

    def tune(*argv: str) -> str:
        capsys.readouterr()
        code = main([*argv, "--config", str(config)])
        out, err = capsys.readouterr()
        assert code == 0, (argv, out, err)
        return out

    return {
        "best": json.loads(tune("best", "--json")),
        "export": json.loads(tune("export", "--format", "json")),
        "report": tune("report", "--out", str(tmp_path / "report")),
    }


def check_study(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path, *, trials: int
) -> tuple[StudyConfig, BaseObjective, optuna.Study]:
    """Run ``trials`` trials of ``path`` on the model and check what every kind promises."""
    config = load_config(path)
    objective = objective_of(config)
    assert objective.kind == config.objective.kind
    assert len(objective.metric_names()) == len(objective.directions()) >= 1
    run_inprocess(config, storage=config.study.storage, trials=trials, seed=1)
    study = optuna.load_study(study_name=config.study.name, storage=config.study.storage)
    assert study.directions == objective.directions()
    assert study.metric_names == objective.metric_names()
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert done, [t.user_attrs.get("failure_reason") for t in study.trials]
    for t in done:
        assert len(t.values) == len(objective.directions()) and all(math.isfinite(v) for v in t.values)
    rec = recommended(study)
    assert rec is not None
    views = run_views(capsys, path, tmp_path)
    best, export = views["best"], views["export"]
    assert isinstance(best, dict) and isinstance(export, dict)
    assert best["number"] == rec.trial.number == export["trial"]
    assert best["score"] == figure_text(rec.trial, config) == export["score"]
    report = (tmp_path / "report" / "report.md").read_text()
    assert f"#{rec.trial.number}" in report
    return config, objective, study
