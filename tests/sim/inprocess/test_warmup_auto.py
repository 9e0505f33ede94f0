"""``[benchmark] warmup = "auto"`` in whole studies against the model: warm-ups go once the study has shown the
server does not need them, and stay (as probes that are never counted) on a server that does.

The demo's scenarios cover the three cases: c1-short's warm-up is a whole pass (one request), c8-short's pass
costs about two warm-ups (eight requests at once against one alone), and c32-long's eighteen (32 prompts of
1024 tokens to prefill against one): it is never probed, its one-request warm-up stays."""

from __future__ import annotations

import math

import optuna
from optuna.trial import FrozenTrial

from tuner.sim.inprocess import run_inprocess
from tuner.study._warmups import warmup_states
from tuner.trials import attrs, scenario_repeats

from .conftest import MakeConfig

SCENARIOS = ("c1-short", "c8-short", "c32-long")


def _warmups(t: FrozenTrial) -> dict[str, str]:
    """What ran before each scenario the trial measured."""
    keys = {s: attrs.scenario_key(s, "warmup") for s in SCENARIOS}
    return {s: t.user_attrs[key] for s, key in keys.items() if key in t.user_attrs}


def _study(run) -> optuna.Study:  # type: ignore[no-untyped-def]
    return optuna.load_study(study_name=run.study_name, storage=run.storage)


def test_a_warm_server_loses_its_warmups_after_a_few_probes_and_is_rechecked(make_config: MakeConfig) -> None:
    cfg = make_config()
    assert cfg.benchmark.warmup == "auto"
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=14, seed=1)
    study = _study(run)
    trials = [t for t in study.trials if _warmups(t)]
    assert set(_warmups(trials[0]).values()) == {"requests"}  # the baseline times the warm-up
    for t in trials:
        for s, kind in _warmups(t).items():
            probe = t.user_attrs.get(attrs.scenario_key(s, "first_pass_tok_s"))
            assert (kind == "probe") == isinstance(probe, float), (t.number, s)
            assert kind == "requests" or s != "c32-long", (t.number, s)  # a probe would cost ~18 warm-ups
    # c1-short: timed once, probed until the probes bound the slowdown, then no warm-up, except on the
    # periodic re-check (trial 10).
    c1 = [(t.number, _warmups(t)["c1-short"]) for t in trials if "c1-short" in _warmups(t)]
    kinds = [kind for n, kind in c1 if n != 10]
    settled = kinds.index("none")
    assert kinds[0] == "requests" and set(kinds[1:settled]) == {"probe"} and 3 <= settled - 1 <= 6, c1
    assert set(kinds[settled:]) == {"none"} and dict(c1)[10] == "probe", c1
    states = warmup_states(study, cfg)
    plan, slow = states["c1-short"]
    tolerance = cfg.benchmark.scenario_precision  # the precision each scenario is measured to
    assert plan.kind == "none" and slow is not None and slow.probes >= 3 and slow.upper <= tolerance
    assert states["c8-short"][0].kind == "none"
    c32, never = states["c32-long"]
    assert c32.kind == "requests" and "a probe would cost" in c32.reason and never is None
    # A probe is measured but not counted: every trial still has its counted repeats.
    assert all(scenario_repeats(t, s) for t in trials for s in _warmups(t))


def test_a_cold_server_keeps_its_warmups_and_its_scores_are_not_cold(make_config: MakeConfig) -> None:
    """First passes at a new batch size 20% slower: the probed scenario keeps probing, and no probe counts."""
    cfg = make_config()
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=8, seed=1, cold_start=0.2)
    study = _study(run)
    trials = [t for t in study.trials if _warmups(t)]
    c8 = [_warmups(t)["c8-short"] for t in trials if "c8-short" in _warmups(t)]
    assert c8[0] == "requests" and len(c8) >= 3 and set(c8[1:]) == {"probe"}
    states = warmup_states(study, cfg)
    # Batch size 1 was warmed by the server's own start-up request: c1-short is not cold.
    assert states["c1-short"][1] is not None and abs(states["c1-short"][1].point) < 0.03
    plan, slow = states["c8-short"]
    assert plan.kind == "probe" and plan.reason.startswith("warm-up kept") and slow is not None
    tolerance = cfg.benchmark.scenario_precision
    assert slow.lower > tolerance and math.isclose(slow.point, 0.2, abs_tol=0.03)
    for t in trials:
        probe = t.user_attrs.get(attrs.scenario_key("c8-short", "first_pass_tok_s"))
        repeats = scenario_repeats(t, "c8-short")
        if probe is not None and repeats:
            # Counted repeats are warm: each is well above the cold probe of its trial.
            assert min(repeats) > probe * 1.1, (t.number, probe, repeats)
