"""``[objective] kind = "max_rate"`` on the in-process model: each trial searches the highest rate of its open-loop
scenario that keeps the SLO on the server it brought up, and the bracket it reports is right by the model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.bench import slo_miss
from tuner.config import StudyConfig, base_spec, load_config
from tuner.errors import ConfigError
from tuner.sim.inprocess import model_scenario, parse_server_config, run_inprocess
from tuner.space import render
from tuner.trials import recommended, record_of

STUDY = (Path(__file__).resolve().parents[2] / "studies" / "slo-chat.toml").read_text()
GEOMEAN = 'kind = "geomean"              # the SLO is a constraint: the fastest config that keeps the promise\n'


def _config(tmp_path: Path, objective: str) -> StudyConfig:
    path = tmp_path / "max-rate.toml"
    path.write_text(STUDY.replace(GEOMEAN, objective + "\n", 1).replace('metric = "output_tok_s"\n', "", 1))
    return load_config(path)


def _meets(config: StudyConfig, params: dict[str, object], rate: float) -> bool:
    """The model's own verdict at ``rate``: the SLO holds unless the attainment is confidently below target."""
    scenario = next(s for s in config.benchmark.scenarios if s.name == "chat-4rps")
    cfg = parse_server_config(render(config.space, base_spec(config.target), params))  # type: ignore[arg-type]
    probe = dataclasses.replace(scenario, rate=rate)
    m = model_scenario(cfg, probe, seed=config.benchmark.seed, confidence=config.benchmark.confidence)

    class Result:  # slo_miss reads a result's name and attainment figures
        name = "chat-4rps"
        attainment = m.latency["attainment"]
        attainment_high = m.latency["attainment_high"]

    return slo_miss(Result(), scenario.slo) is None


def test_each_trial_brackets_its_highest_rate_that_keeps_the_slo(tmp_path: Path) -> None:
    assert _config(tmp_path, 'kind = "max_rate"').objective.scenario == "chat-2rps"  # the first, by default
    config = _config(tmp_path, 'kind = "max_rate"\nscenario = "chat-4rps"\nrate_steps = 5')
    assert config.objective.scenario == "chat-4rps" and not config.search.pruning and config.search.confirm_top <= 1
    storage = f"sqlite:///{tmp_path / 'mr.db'}"
    run = run_inprocess(config, storage=storage, trials=5, seed=0)
    study = optuna.load_study(study_name=run.study_name, storage=storage)
    searched = [t for t in study.trials if t.state == TrialState.COMPLETE and record_of(t).max_rate_bracket is not None]
    assert len(searched) >= 3
    for t in searched:
        bracket = record_of(t).max_rate_bracket
        assert bracket is not None
        met, missed = bracket
        assert t.values[0] == (met or 0.0) == record_of(t).max_rate_rps
        if met is not None:
            assert _meets(config, t.params, met)
        if missed is not None:
            assert not _meets(config, t.params, missed)
        if met is not None and missed is not None:
            assert met < missed < met * 1.3  # five steps narrow the bracket
    rec = recommended(study)
    assert rec is not None and rec.trial.values[0] == max(t.values[0] for t in searched)
    assert study.metric_names == ["max rate req/s (chat-4rps)"]


@pytest.mark.parametrize(
    ("objective", "key", "expected"),
    [
        ('kind = "max_rate"\nscenario = "c64-batch"', "objective.scenario", "an open-loop scenario (rate) with an SLO"),
        ('kind = "max_rate"\nrate_steps = 1', "objective.rate_steps", ">= 2"),
    ],
)
def test_max_rate_errors_name_file_key_and_expectation(
    tmp_path: Path, objective: str, key: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _config(tmp_path, objective)
    assert info.value.key == key and expected in info.value.expected and "max-rate.toml" in str(info.value)
