"""``[benchmark] warmup = "auto"`` in whole studies against the model: no warm-ups while the study's own first
passes show the server does not need them, and warm-ups (probes, never counted) once they show it does.

The demo's scenarios cover the three cases: c1-short's pass is one request (a probe costs what a warm-up does),
c8-short's costs about two warm-ups (eight requests at once against one alone), and c32-long's eighteen (32
prompts of 1024 tokens to prefill against one): a needed warm-up of it stays ``warmup_requests`` requests."""

from __future__ import annotations

import math

import optuna
from optuna.trial import FrozenTrial

from tuner.sim.inprocess import run_inprocess
from tuner.study._warmups import first_passes, warmup_states
from tuner.trials import record_of

from .conftest import MakeConfig

SCENARIOS = ("c1-short", "c8-short", "c32-long")


def _warmups(t: FrozenTrial) -> dict[str, str]:
    """What ran before each scenario the trial measured."""
    record = record_of(t)
    return {s: w for s in SCENARIOS if (w := record.figure(s, "warmup")) is not None}


def _study(run) -> optuna.Study:  # type: ignore[no-untyped-def]
    return optuna.load_study(study_name=run.study_name, storage=run.storage)


def test_a_warm_server_runs_without_warmups_and_its_first_passes_are_the_evidence(make_config: MakeConfig) -> None:
    cfg = make_config()
    assert cfg.benchmark.warmup == "auto"
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=14, seed=1)
    study = _study(run)
    trials = [t for t in study.trials if _warmups(t)]
    assert len(trials) >= 10
    assert {kind for t in trials for kind in _warmups(t).values()} == {"none"}
    assert all(record_of(t).figure(s, "first_pass_tok_s") is None for t in trials for s in SCENARIOS)
    # The evidence is free: the first counted repeat of every run with two or more, against the later ones.
    multi = [(t, s) for t in trials for s in _warmups(t) if len(record_of(t).repeats(s)) >= 2]
    assert multi, "the baseline alone measures its scenarios more than once"
    finished = list(study.get_trials(deepcopy=False))
    for s in SCENARIOS:
        pairs = first_passes(finished, s).pairs
        expected = [(record_of(t).repeats(n)[0], tuple(record_of(t).repeats(n)[1:])) for t, n in multi if n == s]
        assert sorted(pairs) == sorted(expected), s
    states = warmup_states(study, cfg)
    tolerance = cfg.benchmark.scenario_precision
    for s in SCENARIOS:
        plan, slow = states[s]
        assert plan.kind == "none" and plan.reason.startswith("no warm-up: first passes"), plan.reason
        assert slow is not None and slow.pairs >= 1 and slow.point < tolerance, (s, slow)


def test_a_cold_server_gets_warmups_once_its_first_passes_show_it(make_config: MakeConfig) -> None:
    """First passes at a new batch size 20% slower: the baseline shows it, and from then on c8-short is probed."""
    cfg = make_config()
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=8, seed=1, cold_start=0.2)
    study = _study(run)
    trials = [t for t in study.trials if _warmups(t)]
    c8 = [_warmups(t)["c8-short"] for t in trials if "c8-short" in _warmups(t)]
    # The baseline has no evidence yet; then the one-request warm-up is timed once; then a probe every time.
    assert c8[0] == "none" and c8[1] == "requests" and len(c8) >= 4 and set(c8[2:]) == {"probe"}, c8
    states = warmup_states(study, cfg)
    # Batch size 1 was warmed by the server's own start-up request: c1-short is not cold.
    c1, c1_slow = states["c1-short"]
    assert c1.kind == "none" and c1_slow is not None and abs(c1_slow.point) < 0.03
    plan, slow = states["c8-short"]
    assert plan.kind == "probe" and plan.reason.startswith("warm-up (a probe)") and slow is not None
    tolerance = cfg.benchmark.scenario_precision
    assert slow.lower > tolerance and math.isclose(slow.point, 0.2, abs_tol=0.03)
    # c32-long's probe would cost 18 warm-ups: its needed warm-up is the configured request.
    assert states["c32-long"][0].kind == "requests", states["c32-long"][0]
    for t in trials:
        probe = record_of(t).figure("c8-short", "first_pass_tok_s")
        repeats = record_of(t).repeats("c8-short")
        if probe is not None and repeats:
            # Counted repeats are warm: each is well above the cold probe of its trial.
            assert min(repeats) > probe * 1.1, (t.number, probe, repeats)
