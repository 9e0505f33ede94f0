"""``[objective] kind = "max_rate"`` on the in-process model: each trial searches the highest rate of its open-loop
scenario that keeps the SLO on the server it brought up, and the bracket it reports is right by the model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.config import StudyConfig, base_spec, load_config
from tuner.errors import ConfigError
from tuner.report import build_report, speedup_clause, study_speedup
from tuner.sim.inprocess import model_scenario, parse_server_config, run_inprocess
from tuner.space import render
from tuner.trials import current_confirmation, recommended, record_of

STUDY = (Path(__file__).resolve().parents[2] / "studies" / "slo-chat.toml").read_text()
GEOMEAN = 'kind = "geomean"              # the SLO is a constraint: the fastest config that keeps the promise\n'


def _config(tmp_path: Path, objective: str) -> StudyConfig:
    path = tmp_path / "max-rate.toml"
    path.write_text(STUDY.replace(GEOMEAN, objective + "\n", 1).replace('metric = "output_tok_s"\n', "", 1))
    return load_config(path)


def _meets(config: StudyConfig, params: dict[str, object], rate: float, draw: int = 0) -> bool:
    """The model's own verdict at ``rate`` on ``draw``'s arrivals: the SLO holds unless the verdict is a miss."""
    scenario = next(s for s in config.benchmark.scenarios if s.name == "chat-4rps")
    cfg = parse_server_config(render(config.space, base_spec(config.target), params))  # type: ignore[arg-type]
    probe = dataclasses.replace(scenario, rate=rate)
    seed = config.benchmark.seed + 100_003 * draw  # BaseBenchmark.draw_seed
    m = model_scenario(cfg, probe, seed=seed, confidence=config.benchmark.confidence)
    return m.latency["slo_verdict"] in ("met", "undecided")


def _check_bracket(
    config: StudyConfig, params: dict[str, object], bracket: object, draws: tuple[int, ...] = (0,)
) -> None:
    """``[highest met, lowest missed]`` is right by the model at both ends: on the trial's arrivals, or (a
    confirmation's bracket over its rounds, each on its own fresh arrivals) on one of the rounds' draws."""
    assert isinstance(bracket, list | tuple) and len(bracket) == 2
    met, missed = bracket
    if met is not None:
        assert any(_meets(config, params, met, d) for d in draws), (params, bracket)
    if missed is not None:
        assert any(not _meets(config, params, missed, d) for d in draws), (params, bracket)
    if met is not None and missed is not None:
        assert met < missed


def test_each_trial_brackets_its_highest_rate_that_keeps_the_slo(tmp_path: Path) -> None:
    """Every searched trial's bracket is right by the model; a trial that misses the SLO at the best's rate is
    pruned there (its remaining passes saved); the confirmation runs the rate search again on every finalist and
    the baseline, from one rate, and the recommendation and its speed-up come from it."""
    assert _config(tmp_path, 'kind = "max_rate"').objective.scenario == "chat-2rps"  # the first, by default
    config = _config(tmp_path, 'kind = "max_rate"\nscenario = "chat-4rps"\nrate_steps = 5')
    assert config.objective.scenario == "chat-4rps" and config.search.pruning and config.search.confirm_top == 3
    storage = f"sqlite:///{tmp_path / 'mr.db'}"
    run = run_inprocess(config, storage=storage, trials=10, seed=0)
    study = optuna.load_study(study_name=run.study_name, storage=storage)
    searched = [t for t in study.trials if t.state == TrialState.COMPLETE and record_of(t).max_rate_bracket is not None]
    pruned = [t for t in study.trials if t.state == TrialState.PRUNED and record_of(t).max_rate_bracket is not None]
    assert len(searched) >= 3 and pruned, [(t.number, t.state) for t in study.trials]
    for t in searched:
        bracket = record_of(t).max_rate_bracket
        assert t.values[0] == (bracket[0] or 0.0) == record_of(t).max_rate_rps  # type: ignore[index]
        _check_bracket(config, t.params, bracket)
        if None not in bracket:  # type: ignore[operator]
            assert bracket[1] < bracket[0] * 1.3  # type: ignore[index]  # five steps narrow the bracket
    for t in pruned:
        bracket = record_of(t).max_rate_bracket
        _check_bracket(config, t.params, bracket)
        # It missed at (or below) the highest rate a trial before it held: its own cannot be higher.
        best_before = max(s.values[0] for s in searched if s.number < t.number)
        assert bracket is not None and bracket[1] is not None and bracket[1] <= best_before
        assert len(record_of(t).pruned_skipped or ()) >= 3  # one pass instead of five
        assert f"misses the SLO in chat-4rps at {bracket[1]:.3g} req/s" in (record_of(t).failure_reason or "")

    confirmation = current_confirmation(study)
    assert confirmation is not None and confirmation["rounds"] == 2 and len(confirmation["trials"]) == 3
    for n, figures in confirmation["figures"].items():
        _check_bracket(config, study.trials[int(n)].params, figures["max_rate_bracket"], draws=(1, 2))
    rec = recommended(study)
    assert rec is not None and rec.trial.number == confirmation["winner"]
    values = confirmation["values"]
    assert values[str(rec.trial.number)] == max(values.values())
    # The baseline (trial #0) is measured beside the finalists, or is one of them.
    assert "0" in confirmation["figures"] and confirmation["figures"]["0"]["max_rate_bracket"][0] is not None
    speedup = study_speedup(study, config, rec.trial)
    assert rec.trial.number != 0  # (seeded: a config beats the baseline's rate)
    assert speedup is not None and speedup.side_by_side
    met, base = (confirmation["figures"][n]["max_rate_bracket"] for n in (str(rec.trial.number), "0"))
    assert speedup.ratio == pytest.approx(met[0] / base[0])
    assert speedup.low == (pytest.approx(met[0] / base[1]) if base[1] else None)
    # The report's sentence quotes the same two rates and the same speed-up as every other view.
    text = build_report(study, config, tmp_path / "report", storage=storage).path.read_text()
    assert f"up to {met[0]:.3g} req/s (baseline: {base[0]:.3g} req/s, {speedup.text})" in text
    assert speedup_clause(speedup) in text
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
