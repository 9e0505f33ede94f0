"""RegressionPruner and the [search] section, without running trials."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from tuner.config._search import SearchSection
from tuner.errors import ConfigError
from tuner.search import FeasibleFirstSampler, RegressionPruner, make_pruner, make_sampler, scenario_order
from tuner.stats import EMPTY_POOL

from .conftest import MakeConfig

SCENARIOS = ("c1-short", "c8-short", "c32-long")
DIST = {"x": FloatDistribution(0, 1)}


def _study(*trials: optuna.trial.FrozenTrial) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    for t in trials:
        study.add_trial(t)
    return study


def _done(value: float, repeats: list[float], *, baseline: bool = False, x: float = 0.5) -> optuna.trial.FrozenTrial:
    return create_trial(
        value=value,
        params={"x": x},
        distributions=DIST,
        user_attrs={"baseline": baseline, f"{SCENARIOS[0]}.repeats": repeats},
    )


def _candidate(repeats: list[float], *, step: int = 0) -> optuna.trial.FrozenTrial:
    t = create_trial(
        state=TrialState.RUNNING,
        params={"x": 0.1},
        distributions=DIST,
        user_attrs={f"{SCENARIOS[0]}.repeats": repeats},
        intermediate_values={s: repeats[0] for s in range(step + 1)},
    )
    t.number = 99
    return t


@pytest.mark.parametrize("reference", ["baseline", "best"])
def test_prunes_a_clearly_slower_config_and_keeps_one_within_noise(reference: str) -> None:
    study = _study(_done(300, [400, 404, 396], baseline=True), _done(310, [460, 455, 462], x=0.7))
    pruner = RegressionPruner(scenarios=SCENARIOS, reference=reference, margin=0.05, confidence=0.9)
    ref_level = 400 if reference == "baseline" else 460
    assert pruner.prune(study, _candidate([0.8 * ref_level, 0.81 * ref_level, 0.79 * ref_level]))
    assert not pruner.prune(study, _candidate([0.99 * ref_level, 1.01 * ref_level, 0.98 * ref_level]))


def test_never_prunes_without_evidence_or_at_the_last_step() -> None:
    study = _study(_done(300, [400, 404], baseline=True))
    pruner = RegressionPruner(scenarios=SCENARIOS, reference="baseline", margin=0.05, confidence=0.9)
    assert pruner.prune(study, _candidate([200, 201]))
    # One repeat: the baseline's own repeats are the study's noise estimate (no other config repeated yet).
    assert pruner.prune(study, _candidate([200]))
    assert not pruner.prune(_study(_done(300, [400], baseline=True)), _candidate([200]))  # no noise estimate
    assert not pruner.prune(study, _candidate([200, 201], step=2))  # nothing left to skip
    assert not pruner.prune(_study(), _candidate([200, 201]))  # nothing to compare with
    noisy = _study(_done(300, [300, 500], baseline=True))
    assert not pruner.prune(noisy, _candidate([330, 350]))  # the difference is within the noise
    assert not pruner.prune(noisy, _candidate([330]))


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="reference"):
        RegressionPruner(scenarios=SCENARIOS, reference="median")
    with pytest.raises(ValueError, match="margin"):
        RegressionPruner(scenarios=SCENARIOS, margin=1.0)
    with pytest.raises(ValueError, match="min_repeats"):
        RegressionPruner(scenarios=SCENARIOS, min_repeats=1)


def test_search_section_and_factories(make_config: MakeConfig) -> None:
    cfg = make_config(search='prune_against = "baseline"\nprune_margin = 0.1\nprune_confidence = 0.95')
    assert cfg.search.prune_against == "baseline" and cfg.search.prune_margin == 0.1
    assert SearchSection().pruning is True
    assert scenario_order(cfg) == SCENARIOS  # cheapest first, as the objective runs them
    assert isinstance(make_pruner(cfg), RegressionPruner)
    assert isinstance(make_pruner(make_config(name="off", search="pruning = false")), optuna.pruners.NopPruner)
    multi = make_config(
        name="multi",
        edit=lambda text: text.replace('kind = "geomean"', 'kind = "multi"\nobjectives = ["c1-short", "c32-long"]'),
    )
    assert isinstance(make_pruner(multi), optuna.pruners.NopPruner)  # Trial.report is single-objective only
    tpe = make_sampler(cfg, offset=3)  # TPE, drawing at random while no trial is feasible
    assert isinstance(tpe, FeasibleFirstSampler) and isinstance(tpe.inner, optuna.samplers.TPESampler)
    random = make_config(name="random", search='sampler = "random"')
    assert isinstance(make_sampler(random, offset=0), optuna.samplers.RandomSampler)
    with pytest.raises(ConfigError, match="prune_margin"):
        make_config(name="bad", search="prune_margin = 1.5")
    with pytest.raises(ConfigError, match="prune_confidence"):
        make_config(name="bad2", search="prune_confidence = 1.0")
    with pytest.raises(ConfigError, match="prune_against"):
        make_config(name="bad3", search='prune_against = "median"')
    assert SearchSection().prune_objective_margin is None  # off unless a study file asks
    assert cfg.search.prune_objective_margin == 0.03  # the demo file asks
    objective = make_config(name="objective", search="prune_objective_margin = 0.05")
    assert objective.search.prune_objective_margin == 0.05
    assert isinstance(make_pruner(objective), RegressionPruner)
    with pytest.raises(ConfigError, match=r"search\.prune_objective_margin.*a fraction in \[0, 1\)"):
        make_config(name="bad4", search="prune_objective_margin = 1.0")


def test_one_repeat_is_enough_evidence_once_the_study_knows_its_noise() -> None:
    # Two finished configs besides the reference measured ~1% noise: the pool gives a single repeat a test.
    study = _study(
        _done(300, [400, 404, 396], baseline=True), _done(290, [380, 384, 377], x=0.3), _done(280, [350, 353], x=0.2)
    )
    pruner = RegressionPruner(scenarios=SCENARIOS, reference="baseline", margin=0.05, confidence=0.9)
    reference = pruner.reference_lookup(study, exclude=99)(SCENARIOS[0])
    assert reference is not None and reference.noise is not None and reference.noise.df == 3
    assert pruner.prune(study, _candidate([300]))  # 25% slower after one repeat
    assert not pruner.prune(study, _candidate([385]))  # 4% slower: within the 5% margin, however sure


def test_the_noise_pool_leaves_out_the_candidate_and_the_reference_it_is_compared_with() -> None:
    baseline, other = _done(300, [400, 404], baseline=True), _done(310, [460, 455, 462], x=0.7)
    pruner = RegressionPruner(scenarios=SCENARIOS, reference="baseline", margin=0.05, confidence=0.9)
    alone = pruner.reference_lookup(_study(baseline), exclude=99)(SCENARIOS[0])
    # Nobody else repeated it: the baseline's own repeats (added by every test) are all the study knows.
    assert alone is not None and alone.noise == EMPTY_POOL and alone.comparable
    assert pruner.reference_lookup(_study(_done(300, [400], baseline=True)), exclude=99)(SCENARIOS[0]) is None
    study = _study(baseline, other)
    to_baseline = pruner.reference_lookup(study, exclude=99)(SCENARIOS[0])
    assert to_baseline is not None and to_baseline.samples == (400, 404) and to_baseline.noise is not None
    assert to_baseline.noise.df == 2  # the other config's three repeats
    against = study.trials[1]
    to_other = pruner.reference_lookup(study, exclude=99, against=against)(SCENARIOS[0])
    assert to_other is not None and to_other.samples == (460, 455, 462) and to_other.trial == against.number
    assert to_other.noise is not None and to_other.noise.df == 1  # the baseline's two, not the other's again


def _two_scenarios(repeats: dict[str, list[float]], *, value: float | None = None, x: float = 0.5, step: int = 1):  # type: ignore[no-untyped-def]
    """A finished trial (``value``) or the running candidate (#99, at ``step``) with repeats of two scenarios."""
    user_attrs = {f"{name}.repeats": r for name, r in repeats.items()}
    if value is not None:
        return create_trial(value=value, params={"x": x}, distributions=DIST, user_attrs=user_attrs)
    t = create_trial(
        state=TrialState.RUNNING,
        params={"x": 0.1},
        distributions=DIST,
        user_attrs=user_attrs,
        intermediate_values={s: 1.0 for s in range(step + 1)},
    )
    t.number = 99
    return t


def test_the_objective_so_far_prunes_a_config_a_little_slower_on_every_scenario() -> None:
    c1, c8 = SCENARIOS[0], SCENARIOS[1]
    # Three configs measured three times each: ~0.5% noise on both scenarios.
    study = _study(
        _two_scenarios({c1: [400, 402, 398], c8: [700, 703, 697]}, value=300),
        _two_scenarios({c1: [380, 382, 379], c8: [690, 687, 692]}, value=290, x=0.3),
        _two_scenarios({c1: [360, 358, 361], c8: [650, 653, 648]}, value=280, x=0.2),
    )
    slower = _two_scenarios({c1: [388, 387], c8: [679, 680]})  # 3% behind the best on both: within 5% on each
    with_objective = RegressionPruner(scenarios=SCENARIOS, objective_margin=0.02, weights={c1: 2.0, c8: 1.0})
    assert with_objective.prune(study, slower)
    assert not RegressionPruner(scenarios=SCENARIOS).prune(study, slower)  # the per-scenario test alone keeps it
    # Behind on one scenario, ahead on the heavier one: the objective so far is not behind.
    mixed = _two_scenarios({c1: [412, 410], c8: [679, 680]})
    assert not with_objective.prune(study, mixed)
    # Within the margin, however sure: 1% behind on both.
    assert not with_objective.prune(study, _two_scenarios({c1: [396, 396], c8: [693, 693]}))
    # The last scenario is never pruned.
    assert not with_objective.prune(study, _two_scenarios({c1: [388, 387], c8: [679, 680]}, step=2))
    with pytest.raises(ValueError, match="objective_margin"):
        RegressionPruner(scenarios=SCENARIOS, objective_margin=1.0)


def test_the_objective_so_far_needs_the_studys_noise_for_every_scenario() -> None:
    c1, c8 = SCENARIOS[0], SCENARIOS[1]
    # Only the reference measured the scenarios, once each: no pooled noise, nothing to test with.
    study = _study(_two_scenarios({c1: [400], c8: [700]}, value=300))
    pruner = RegressionPruner(scenarios=SCENARIOS, objective_margin=0.02)
    assert not pruner.prune(study, _two_scenarios({c1: [380], c8: [660]}))
