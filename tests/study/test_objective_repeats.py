"""Repeats decided on the whole objective: one repeat of each scenario, more only where the objective is a tie.

The step itself (:func:`tuner.study.refine_on_objective`) runs against the in-process model's benchmark with
constructed references; the study runs the hard case, ``studies/coding-agent.toml``, through the real loop
on the same model (seeded noise), and checks what every trial records.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.bench import ScenarioResult
from tuner.config import BenchmarkSection, ReadinessSection, Scenario, load_config
from tuner.endpoint import Endpoint
from tuner.objective._throughput import bound as objective_bound
from tuner.sim.inprocess import ModelBenchmark, ModelService, model_readiness, run_inprocess
from tuner.spec import LaunchSpec
from tuner.stats import EMPTY_POOL, Noise, Reference, SequentialPolicy
from tuner.study._objective import REFINE_STEP
from tuner.study._steps import Refinement, benchmark_server, objective_refinement, refine_on_objective
from tuner.target.services import Restarted
from tuner.trials import record_of
from tuner.trials._record import as_user_attrs

REPO = Path(__file__).resolve().parents[2]
FLAGS = ["--host", "127.0.0.1", "--enable-metrics", "--speculative-algorithm", "DDTREE",
         "--speculative-ddtree-budget", "12", "--speculative-dflash-block-size", "8"]  # fmt: skip
CHAT = Scenario(name="c1-chat", concurrency=1, prompt_tokens=256, output_tokens=64, requests=2)
LONG = Scenario(name="c4-long", concurrency=4, prompt_tokens=4000, output_tokens=64, requests=8, weight=3.0)
SECTION = BenchmarkSection(scenarios=(CHAT, LONG), warmup="always", warmup_requests=1, min_repeats=1, max_repeats=5,
                           precision=0.01, precision_share=1.25)  # fmt: skip
#: The study's noise as a few configs measured twice would give it: ~2% per repeat.
NOISE = Noise(ss=0.02**2 * 30, df=30)


@dataclasses.dataclass(frozen=True)
class Model:
    service: ModelService
    restarted: Restarted
    bench: ModelBenchmark


def _model() -> Model:
    service = ModelService(base=LaunchSpec(argv=(sys.executable, "-m", "tuner.sim", *FLAGS)), load_time_s=0.1)
    restarted = service.restart(label="refine")
    model_readiness(
        service=service, restarted=restarted, endpoint=Endpoint(base_url="http://127.0.0.1:1"),
        config=ReadinessSection(),
    )  # fmt: skip
    return Model(service, restarted, ModelBenchmark(service=service, config=SECTION, noise=0.02, rng=random.Random(3)))


def _refinement(first: dict[str, ScenarioResult], factor: float) -> Refinement:
    """References at ``factor`` times the first pass's figures, each measured twice."""
    refs = {
        name: Reference(samples=(r.repeats_tok_s[0] * factor,) * 2, margin=0.05, confidence=0.9, noise=NOISE)
        for name, r in first.items()
    }
    policy = SequentialPolicy.from_section(SECTION)
    return Refinement(references=refs, weights=SECTION.objective_weights(), policy=policy)


def _first_pass(model: Model) -> dict[str, ScenarioResult]:
    model.bench.use_reference(lambda name: Reference(samples=(1.0, 1.0), noise=NOISE), on_objective=True)
    outcome = benchmark_server(
        model.bench, SECTION, service=model.service, restarted=model.restarted, on_result=lambda step, r: None
    )
    assert [r.stopped for r in outcome.results] == ["objective", "objective"]  # one repeat each, left to the objective
    assert all(len(r.repeats_tok_s) == 1 for r in outcome.results)
    return {r.name: r for r in outcome.results}


@pytest.mark.parametrize(("factor", "verdict"), [(1.25, "behind"), (0.8, "better")])
def test_a_config_clearly_off_the_reference_costs_one_repeat_of_each_scenario(factor: float, verdict: str) -> None:
    model = _model()
    first = _first_pass(model)
    results, refined = refine_on_objective(
        model.bench, SECTION.scenarios, list(first.values()), _refinement(first, factor),
        service=model.service, restarted=model.restarted,
    )  # fmt: skip
    assert refined.decision.verdict == verdict and refined.added == {"c1-chat": 0, "c4-long": 0}
    assert [r.stopped for r in results] == [verdict, verdict]
    assert refined.describe().startswith(f"objective {verdict}: ")
    assert "against the reference, confidently, after 2 repeats" in refined.describe()


def test_a_tie_is_repeated_until_the_objective_is_precise_and_the_repeats_join_the_scores() -> None:
    model = _model()
    first = _first_pass(model)
    results, refined = refine_on_objective(
        model.bench, SECTION.scenarios, list(first.values()), _refinement(first, 1.0),
        service=model.service, restarted=model.restarted,
    )  # fmt: skip
    assert refined.decision.verdict in ("precise", "max_repeats"), refined.describe()
    assert sum(refined.added.values()) >= 1
    for r in results:
        assert len(r.repeats_tok_s) == 1 + refined.added[r.name] <= SECTION.max_repeats
        assert r.repeats_tok_s[0] == first[r.name].repeats_tok_s[0]
        assert r.stopped == refined.decision.verdict
        assert r.requests == len(r.repeats_tok_s) * (CHAT if r.name == "c1-chat" else LONG).requests
    # The heavily weighted scenario narrows the objective most: it is repeated at least as often per second.
    assert refined.added["c4-long"] >= 1
    assert "+" in refined.describe() and "c4-long +" in refined.describe()


def test_no_refinement_without_the_study_noise_or_for_fixed_repeats() -> None:
    config = load_config(REPO / "studies" / "coding-agent.toml")
    policy = SequentialPolicy.from_section(config.benchmark)
    with_noise = Reference(samples=(100.0, 101.0), noise=NOISE)
    assert objective_refinement(config, policy, lambda name: with_noise) is not None
    assert objective_refinement(config, policy, lambda name: Reference(samples=(100.0, 101.0))) is None
    assert objective_refinement(config, policy, lambda name: None) is None
    assert objective_refinement(config, policy, None) is None
    fixed = SequentialPolicy(min_repeats=2, max_repeats=2, objective_precision=0.02)
    assert objective_refinement(config, fixed, lambda name: with_noise) is None
    multi = dataclasses.replace(config.objective, kind="multi", objectives=("c1-chat", "c1-agent"))
    assert objective_refinement(dataclasses.replace(config, objective=multi), policy, lambda name: with_noise) is None


def test_the_last_finalist_replaces_the_reference_only_where_it_can_be_compared_on_every_scenario() -> None:
    config = load_config(REPO / "studies" / "coding-agent.toml")
    policy = SequentialPolicy.from_section(config.benchmark)
    baseline = Reference(samples=(100.0, 101.0), noise=NOISE, trial=0)
    finalist = Reference(samples=(120.0,), noise=NOISE, trial=7)
    refinement = objective_refinement(config, policy, lambda name: baseline, finalist=lambda name: finalist)
    assert refinement is not None and {r.trial for r in refinement.references.values()} == {7}
    # The finalist measured once and nobody else repeated a scenario: no noise estimate against it.
    once = dataclasses.replace(finalist, noise=EMPTY_POOL)
    refinement = objective_refinement(config, policy, lambda name: baseline, finalist=lambda name: once)
    assert refinement is not None and {r.trial for r in refinement.references.values()} == {0}
    refinement = objective_refinement(config, policy, lambda name: baseline, finalist=lambda name: None)
    assert refinement is not None and {r.trial for r in refinement.references.values()} == {0}


def test_a_study_decides_repeats_on_the_objective_and_records_why(tmp_path: Path) -> None:
    config = load_config(REPO / "studies" / "coding-agent.toml")
    run = run_inprocess(config, storage=f"sqlite:///{tmp_path}/study.db", trials=24, noise=0.02, seed=6)
    study = optuna.load_study(study_name=run.study_name, storage=run.storage)
    names = [s.name for s in config.benchmark.scenarios]
    decided = [t for t in study.trials if record_of(t).repeats_decided]
    assert len(decided) >= 3, [record_of(t).repeats_decided for t in study.trials]
    cheap = extra = 0
    for t in decided:
        verdict = record_of(t).repeats_decided.split(":")[0].removeprefix("objective ")
        assert verdict in ("precise", "behind", "better", "max_repeats")
        repeats = {n: len(record_of(t).figure(n, "repeats")) for n in names}
        assert all(1 <= k <= config.benchmark.max_repeats for k in repeats.values())
        assert {record_of(t).figure(n, "stopped") for n in names} == {verdict}
        cheap += verdict in ("behind", "better") and set(repeats.values()) == {1}
        # The stored value is the objective of the stored figures, extra repeats included.
        points = {n: record_of(t).figure(n, "point") for n in names}
        scores = {n: record_of(t).figure(n, "score") for n in names}
        assert t.state == TrialState.COMPLETE
        assert t.values[0] == pytest.approx(objective_bound(points, scores, config.benchmark), rel=1e-6)
        # The last intermediate value is the trial's objective: the extra repeats are one more step.
        assert t.intermediate_values[max(t.intermediate_values)] == pytest.approx(t.values[0], rel=1e-6)
        added = sum(repeats.values()) > len(names)
        extra += added
        assert (record_of(t).steps[-1] == REFINE_STEP) == added, record_of(t).steps
        assert ("(" in record_of(t).repeats_decided) == added  # "... (c1-agent +1)"
    assert cheap >= 1, "a config clearly behind or ahead settles on one repeat of each scenario"
    assert extra >= 1, "a tie with the last finalist gets more repeats"


def test_the_dashboard_note_says_what_decided_the_repeats() -> None:
    from optuna.distributions import IntDistribution

    from tuner.report._notes import trial_note_text

    decided = "objective behind: -2.8% against #20, confidently, after 3 repeats"
    t = optuna.trial.create_trial(
        values=[100.0], params={"budget": 8}, distributions={"budget": IntDistribution(4, 32)},
        user_attrs=as_user_attrs(gate_deferred=True, repeats_decided=decided),
    )  # fmt: skip
    note = trial_note_text(t)
    assert note is not None and "not gated yet" in note and f"Repeats beyond the first pass: {decided}." in note
