"""A batch cap tried without a restart (``[search] emulate``): a trial of studies/slo-chat.toml starts the server at
the space's largest ``--max-running-requests``, plays the smaller caps with the client's ``max_concurrency`` and
keeps the cap it chose as its param; the confirmation restarts with the real flag. Whole studies on the in-process
model, whose open-loop scenarios queue at the client cap and at the server's cap alike."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.config import launch_spec, load_config, parse_config
from tuner.errors import ConfigError
from tuner.sim.inprocess import run_inprocess
from tuner.space import Param
from tuner.study._confirm import bring_up_spec
from tuner.study._emulate import candidate_caps, emulated_param
from tuner.trials import recommended, record_of

STUDY = Path(__file__).resolve().parents[2] / "studies" / "slo-chat.toml"
CAPS = (128, 96, 64, 48, 32, 16)


def _flag(argv: tuple[str, ...] | list[str]) -> int:
    return int(argv[list(argv).index("--max-running-requests") + 1])


def test_each_trial_plays_the_caps_on_one_start_and_keeps_the_one_it_chose(tmp_path: Path) -> None:
    config = load_config(STUDY)
    storage = f"sqlite:///{tmp_path / 'emulate.db'}"
    run = run_inprocess(config, storage=storage, trials=8, seed=0)
    study = optuna.load_study(study_name=run.study_name, storage=storage)
    played = [t for t in study.trials if t.state == TrialState.COMPLETE and record_of(t).emulated]
    assert len(played) >= 5, [t.user_attrs for t in study.trials]
    chose_smaller = 0
    for t in played:
        e = record_of(t).emulated
        assert e is not None and e["server"] == 128 and e["flag"] == "--max-running-requests"
        caps = [c["cap"] for c in e["caps"]]
        # The server's own first; then a bisection between the caps that queue and those whose batch is too big.
        assert caps[0] == 128 and set(caps) <= set(CAPS) and len(set(caps)) == len(caps) <= 4
        holding = [c["cap"] for c in e["caps"] if c["holds"]]
        # The largest cap that keeps every SLO; none keeps it: the closest to keeping it.
        if holding:
            assert e["chosen"] == max(holding)
        else:
            closest = min(e["caps"], key=lambda c: c["constraint"])
            assert e["chosen"] == closest["cap"]
        # The chosen cap is the trial's param (what the sampler learns), its command and its relaunch.
        assert t.params["max_running_requests"] == e["chosen"]
        assert t.distributions["max_running_requests"] == optuna.distributions.CategoricalDistribution(list(CAPS[::-1]))
        assert _flag(str(record_of(t).command).split()) == e["chosen"]
        assert _flag(launch_spec(config, t).argv) == e["chosen"]
        spec = bring_up_spec(config, t)
        assert spec is not None and _flag(spec.argv) == e["chosen"]
        chose_smaller += e["chosen"] != 128
        # Its figures are the chosen cap's: the SLO scenarios of that pass.
        if e["chosen"] != 128:
            chosen = next(c for c in e["caps"] if c["cap"] == e["chosen"])
            for p in chosen["passes"]:
                assert t.user_attrs.get(f"{p['scenario']}.attainment") == p["attainment"]
    assert chose_smaller >= 1
    # The baseline runs its own command: nothing played.
    baseline = next(t for t in study.trials if record_of(t).is_baseline)
    assert record_of(baseline).emulated is None and baseline.params["max_running_requests"] == 64
    rec = recommended(study)
    assert rec is not None and rec.trial.params["max_running_requests"] < 128


def test_a_study_can_turn_it_off(tmp_path: Path) -> None:
    config = load_config(STUDY)
    off = dataclasses.replace(config, search=dataclasses.replace(config.search, emulate=False))
    assert emulated_param(config) is not None and emulated_param(off) is None
    storage = f"sqlite:///{tmp_path / 'off.db'}"
    run = run_inprocess(off, storage=storage, trials=4, seed=0)
    study = optuna.load_study(study_name=run.study_name, storage=storage)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert done and all(record_of(t).emulated is None and "max_running_requests" in t.params for t in done)


def test_emulate_is_a_bool_in_search() -> None:
    text = STUDY.read_text().replace("[objective]", '[search]\nemulate = "yes"\n\n[objective]', 1)
    with pytest.raises(ConfigError) as err:
        parse_config(text, source="slo.toml", base_dir=STUDY.parent)
    assert "search.emulate" in str(err.value)


def test_only_a_study_with_an_slo_plays_its_cap() -> None:
    config = load_config(STUDY)
    scenarios = tuple(dataclasses.replace(s, slo=None) for s in config.benchmark.scenarios)
    no_slo = dataclasses.replace(config, benchmark=dataclasses.replace(config.benchmark, scenarios=scenarios))
    assert emulated_param(no_slo) is None


def test_the_caps_an_int_range_is_played_at() -> None:
    assert candidate_caps(Param(name="c", kind="int", low=8, high=64, step=8, flag="-np")) == (64, 32, 16, 8)
    assert candidate_caps(Param(name="c", kind="int", low=1, high=4, flag="-np")) == (4, 2, 1)
    assert candidate_caps(Param(name="c", kind="categorical", choices=(16, 128, 32), flag="-np")) == (128, 32, 16)
    # A choice that is no cap (a word): nothing to play.
    assert candidate_caps(Param(name="c", kind="categorical", choices=(16, "auto"), flag="-np")) == ()
