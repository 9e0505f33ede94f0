"""``[slo]`` in the study loop: a trial whose open-loop scenario confidently misses its latency promise is
infeasible (Optuna's ``slo`` constraint, so TPE learns the region), never ranked, with the one line that says why.
Runs whole studies on the in-process model, whose open-loop scenarios queue as the simulator's do."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_demo import MakeConfig, make_config

from tuner.trials import MISSES_SLO, feasible, outcome, outcome_text, record_of

__all__ = ["make_config"]

C32 = 'name = "c32-long"\nconcurrency = 32\nprompt_tokens = 1024\noutput_tokens = 16\nrequests = 32\n'
OPEN = 'name = "chat-4rps"\nrate = 4.0\nprompt_tokens = 512\noutput_tokens = 64\nrequests = 60\n'


def _with_slo(slo: str):  # type: ignore[no-untyped-def]
    return lambda text: text.replace(C32, OPEN, 1).replace("[objective]", f"[slo]\n{slo}\n\n[objective]", 1)


def _complete(cfg_name: str, storage: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=cfg_name, storage=storage)
    return [t for t in study.trials if t.state == TrialState.COMPLETE and "slo" in t.constraints]


def test_a_promise_no_config_keeps_makes_every_trial_infeasible(make_config: MakeConfig) -> None:
    from tuner.sim.inprocess import run_inprocess

    cfg = make_config(name="tight", edit=_with_slo("ttft_s = 0.001\nattainment = 0.99"))
    run_inprocess(cfg, storage=cfg.study.storage, trials=3)
    done = _complete("tight", cfg.study.storage)
    assert done, "the trials ran their open-loop scenario"
    for t in done:
        assert t.constraints["slo"] > 0
        missed = record_of(t).slo_missed or ""
        assert missed.startswith("misses the SLO in chat-4rps: 0% of requests within TTFT 1 ms")
        assert t.user_attrs["chat-4rps.attainment"] == 0.0
        assert outcome(t) == MISSES_SLO  # every view says why, in one line
        assert outcome_text(t) == "infeasible: " + missed
    study = optuna.load_study(study_name="tight", storage=cfg.study.storage)
    assert feasible(study) == []


def test_a_promise_every_config_keeps_leaves_the_study_as_it_was(make_config: MakeConfig) -> None:
    from tuner.sim.inprocess import run_inprocess

    cfg = make_config(name="loose", edit=_with_slo("ttft_s = 60\ntpot_s = 10"))
    run_inprocess(cfg, storage=cfg.study.storage, trials=3)
    done = _complete("loose", cfg.study.storage)
    assert done
    for t in done:
        assert t.constraints["slo"] <= 0 and record_of(t).slo_missed is None
        assert t.user_attrs["chat-4rps.attainment"] == 1.0
        assert t.user_attrs["chat-4rps.offered_rps"] > 0 and t.user_attrs["chat-4rps.ttft_p99_s"] > 0
