"""A kind of objective defined here, in the test, and nowhere in tune: the lowest TTFT p99 of one open-loop scenario.

It is registered, and a study that names it runs end to end on the simulator (its trials, ``tune best``, ``tune
report``, ``tune export``) without a line of tune changed: the seam's promise. It minimises, so it also proves every
ranking follows the objective's direction.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from optuna.study import StudyDirection
from optuna.trial import TrialState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures_objective import check_study, study_file

from tuner.bench import ScenarioResult
from tuner.objective import BaseObjective, Score, register
from tuner.trials import feasible, recommended, study_record


@register
class LowestTtftP99(BaseObjective):
    """The lowest TTFT p99 of ``[objective] scenario``."""

    kind = "test_lowest_ttft_p99"

    def directions(self) -> list[StudyDirection]:
        return [StudyDirection.MINIMIZE]

    def metric_names(self) -> list[str]:
        return [f"TTFT p99 s ({self.section.scenario})"]

    def score(self, results: Sequence[ScenarioResult]) -> Score:
        mine = next(r for r in results if r.name == self.section.scenario)
        assert mine.ttft_p99_s is not None
        return Score(values=(mine.ttft_p99_s,), per_scenario={mine.name: mine.ttft_p99_s})


def test_a_kind_defined_outside_tune_runs_a_study_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = study_file(tmp_path, "own-kind", f'kind = "{LowestTtftP99.kind}"\nscenario = "chat-2rps"')
    _, objective, study = check_study(capsys, tmp_path, path, trials=3)
    assert isinstance(objective, LowestTtftP99)
    assert study.directions == [StudyDirection.MINIMIZE]
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    for t in done:
        assert t.values[0] == pytest.approx(t.user_attrs["chat-2rps.ttft_p99_s"], abs=1e-4)  # attrs keep 4 places
    # Lowest first: the ranking and the recommendation follow the objective's direction.
    ranked = feasible(study)
    assert [t.values[0] for t in ranked] == sorted(t.values[0] for t in ranked)
    rec = recommended(study)
    # The search's lowest, unless the confirmation re-measured the finalists and another came out lowest there.
    confirmation = study_record(study).confirmation
    winner = confirmation["winner"] if confirmation else ranked[0].number
    assert rec is not None and rec.trial.number == winner and rec.confirmed == bool(confirmation)


def test_a_kind_s_own_keys_are_checked_like_any_other(tmp_path: Path) -> None:
    from tuner.config import load_config
    from tuner.errors import ConfigError

    path = study_file(tmp_path, "bad-kind", f'kind = "{LowestTtftP99.kind}"\nscenario = "no-such"')
    with pytest.raises(ConfigError, match=r"objective\.scenario"):
        load_config(path)
    path = study_file(tmp_path, "unknown-kind", 'kind = "lowest_everything"')
    with pytest.raises(ConfigError, match=r"objective\.kind"):
        load_config(path)
