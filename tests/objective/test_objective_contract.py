"""The objective seam's contract, run against every kind tune ships (and a kind a user defines, in
tests/objective/test_own_kind.py): a study on the in-process model runs end to end, and every view names the same
recommended trial with the same figure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures_objective import KINDS, check_study, study_file

from tuner.config import load_config
from tuner.objective import objective_of
from tuner.trials import recommended


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_runs_a_study_and_every_view_names_its_recommendation(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = study_file(tmp_path, f"contract-{kind}", KINDS[kind])
    _, objective, study = check_study(capsys, tmp_path, path, trials=4)
    rec = recommended(study)
    assert rec is not None
    if len(objective.directions()) == 1:
        figure = objective.figure(rec.trial)
        assert figure is not None and figure.score == rec.trial.values[0] and figure.text
    else:
        assert rec.front and rec.trial in rec.front
    # Intermediate values are on the objective's scale, or there are none.
    for t in study.trials:
        if t.intermediate_values and len(objective.directions()) == 1 and not objective.measures:
            assert t.state != TrialState.COMPLETE or t.intermediate_values[max(t.intermediate_values)] == pytest.approx(
                t.values[0], rel=1e-6
            )


def test_the_confirmed_value_of_one_visit_is_that_visit_s_score(tmp_path: Path) -> None:
    """A config re-measured once confirms the figure its visit scores: the default rule and the throughput kinds'
    pooled repeats agree on a single visit of noise-free results."""
    from tuner.bench import ScenarioResult
    from tuner.stats import clopper_pearson

    low, high = clopper_pearson(40, 40, 0.8)  # what the pooled verdict finds again of 40 requests that all met it
    for kind in ("geomean", "goodput"):
        config = load_config(study_file(tmp_path, f"one-{kind}", KINDS[kind]))
        objective = objective_of(config)
        visit = tuple(
            ScenarioResult.from_repeats(
                scenario=s, repeats_tok_s=[100.0 * (i + 1)] * 2, repeats_per_stream_tok_s=[10.0] * 2, confidence=0.8,
                attainment=1.0, attainment_low=low, attainment_high=high, slo_verdict="met", slo_required=0.9,
                achieved_rps=2.0, requests=40, output_tokens=40 * s.output_tokens, good_token_share=1.0,
            )
            for i, s in enumerate(config.benchmark.scenarios)
        )  # fmt: skip
        noise: dict[str, object] = {s.name: None for s in config.benchmark.scenarios}
        assert objective.confirmed_value([visit], noise) == pytest.approx(  # type: ignore[arg-type]
            objective.score(visit).values[0], rel=1e-9
        )
