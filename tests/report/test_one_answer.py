"""One answer everywhere: on a study whose end-of-study confirmation overturned the leader, every command and view
names the same recommended trial with the same figure, and `tune apply --best` deploys exactly that config."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_demo import DEMO

from tuner.cli import main
from tuner.config import StudyConfig, launch_spec, load_config
from tuner.report import DashboardServer, figure_text
from tuner.report._notes import annotate_trials
from tuner.sim.inprocess import run_inprocess
from tuner.sim.testing import free_port
from tuner.trials import recommended
from tuner.trials._confirmed import CONFIRMATION

SEEDS = range(40)


def _overturned(tmp: Path) -> tuple[StudyConfig, optuna.Study]:
    """The demo study, in process, on the first seed whose confirmation put another finalist first.

    At the model's 2% noise the top configs are often within noise of each other, so a confirmation overturns the
    leader on a good share of seeds; which ones is fixed by the seed, so the search is deterministic.
    """
    for seed in SEEDS:
        path = tmp / f"over{seed}.toml"
        text = DEMO.replace('name = "demo"', f'name = "over{seed}"').replace("30123", str(free_port()))
        path.write_text(text.replace("trials = 30", "trials = 12"))
        config = load_config(path)
        run = run_inprocess(config, storage=config.study.storage, seed=seed)
        study = optuna.load_study(study_name=run.study_name, storage=run.storage)
        c = study.user_attrs.get(CONFIRMATION)
        if isinstance(c, dict) and not c["held"]:
            return config, study
    raise AssertionError(f"no seed in {SEEDS} overturned the leader: the model's noise or the confirmation changed")


@pytest.fixture(scope="module")
def overturned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StudyConfig, optuna.Study]]:
    yield _overturned(tmp_path_factory.mktemp("one-answer"))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(list(argv)) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_every_view_names_the_confirmed_winner_with_one_figure(
    overturned: tuple[StudyConfig, optuna.Study], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config, study = overturned
    c = study.user_attrs[CONFIRMATION]
    rec = recommended(study)
    assert rec is not None and rec.confirmed and rec.trial.number == c["winner"] != c["best_before"]
    n, figure = rec.trial.number, figure_text(rec.trial, config)
    assert re.fullmatch(r"\d+\.\d \(\d+\.\d ± \d+\.\d\)", figure), figure  # rounded, with its interval
    source = str(config.source)

    best = json.loads(_run(capsys, "best", "--config", source, "--json")[0])
    assert best["number"] == n and best["score"] == figure and best["recommended"] is True
    text = _run(capsys, "best", "--config", source)[0]
    assert f"recommended: trial #{n} (confirmed winner), score {figure}" in text
    assert f"#{n} recommended" in text  # the confirmation's line names it too

    rows = json.loads(_run(capsys, "status", "--config", source, "--json")[0])
    assert [r["number"] for r in rows if r["recommended"]] == [n]
    assert next(r for r in rows if r["number"] == n)["score"] == figure
    status = _run(capsys, "status", "--config", source, "--wide")[0]
    assert re.search(rf"^★\s+{n} ok\s+{re.escape(figure)} ", status, re.MULTILINE), status
    assert f"recommended: trial #{n} (confirmed winner), score {figure}" in status

    exported = json.loads(_run(capsys, "export", "--config", source, "--format", "json")[0])
    assert exported["trial"] == n and exported["score"] == figure and exported["recommended"] is True
    command = _run(capsys, "export", "--config", source, "--format", "command")[0].strip()
    assert command == launch_spec(config, rec.trial).shell_text()

    out = tmp_path / "report"
    _run(capsys, "report", "--config", source, "--out", str(out))
    report = (out / "report.md").read_text()
    assert f"**Recommended: trial #{n} (confirmed winner), score {figure}" in report
    assert f"| #{n} **recommended** |" in report or f"| #{n} (baseline) **recommended** |" in report

    annotate_trials(study)
    detail = _dashboard_detail(study)
    assert [t["number"] for t in detail["best_trials"]] == [n]
    notes = {t["number"]: (t.get("note") or {}).get("body", "") for t in detail["trials"]}
    assert "RECOMMENDED" in notes[n] and all("RECOMMENDED" not in b for k, b in notes.items() if k != n)


def _dashboard_detail(study: optuna.Study) -> dict[str, Any]:
    import urllib.request

    with DashboardServer(storage=study._storage, port=0, refresh_s=None) as server:
        url = f"{server.url}/api/studies/{study._study_id}"
        with urllib.request.urlopen(url, timeout=10) as response:
            return dict(json.loads(response.read()))


def test_apply_best_starts_the_recommended_config(
    overturned: tuple[StudyConfig, optuna.Study], capsys: pytest.CaptureFixture[str]
) -> None:
    config, study = overturned
    rec = recommended(study)
    assert rec is not None
    expected = launch_spec(config, rec.trial).shell_text()
    try:
        out, _ = _run(capsys, "apply", "--best", "--config", str(config.source))
        assert f"applying trial #{rec.trial.number}: {expected}" in out
        assert f"recommended: trial #{rec.trial.number} (confirmed winner)" in out
    finally:
        main(["stop", "--config", str(config.source)])
