"""The steps of a trial after the server is up: benchmark it (cheapest scenario first, so a slow config is
pruned early), refine the repeats on the whole objective, ask the gate; and each step's typed result.

Each step is a named function; any of them may raise a :class:`~tuner.errors.TrialFailure`. The trial runner
(:class:`tuner.study.TrialRunner`) and the end-of-study confirmation call the same functions.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tuner.bench import BaseBenchmark, ScenarioResult
from tuner.config import BenchmarkSection, Scenario, StudyConfig
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad, RegressionPruned
from tuner.gate import BaseGate, GateResult
from tuner.objective import objective_of
from tuner.stats import ObjectiveDecision, Reference, ReferenceLookup, SequentialPolicy, decide_objective
from tuner.target.services import BaseService, Restarted

__all__ = [
    "BenchmarkOutcome",
    "GateFactory",
    "Refined",
    "Refinement",
    "benchmark_server",
    "describe_result",
    "gate_server",
    "objective_refinement",
    "refine_on_objective",
]

GateFactory = Callable[[Endpoint], BaseGate]


@dataclass(frozen=True, kw_only=True)
class BenchmarkOutcome:
    results: tuple[ScenarioResult, ...]
    seconds: float
    skipped: tuple[str, ...] = ()
    refined: Refined | None = None
    """What the objective-level repeats decided (None: each scenario decided its own repeats)."""


@dataclass(frozen=True, kw_only=True)
class Refinement:
    """What the objective-level repeat decision needs (:func:`tuner.stats.decide_objective`)."""

    references: Mapping[str, Reference]
    weights: Mapping[str, float]
    policy: SequentialPolicy


@dataclass(frozen=True, kw_only=True)
class Refined:
    decision: ObjectiveDecision
    added: dict[str, int]
    """Repeats added per scenario after the first pass."""

    def describe(self) -> str:
        added = ", ".join(f"{name} +{n}" for name, n in self.added.items() if n)
        return f"objective {self.decision.verdict}: {self.decision.reason}" + (f" ({added})" if added else "")


def benchmark_server(
    benchmark: BaseBenchmark,
    section: BenchmarkSection,
    *,
    service: BaseService,
    restarted: Restarted,
    on_result: Callable[[int, ScenarioResult], None],
    refinement: Refinement | None = None,
) -> BenchmarkOutcome:
    """Run scenarios cheapest first, so a regression pruner can stop a slow config early; then, with a
    ``refinement``, the repeats the objective asks for (:func:`refine_on_objective`)."""
    ordered = section.in_run_order()
    start = time.monotonic()
    results: list[ScenarioResult] = []
    for step, scenario in enumerate(ordered):
        result = benchmark.run_scenario(scenario)
        _check_alive(service, restarted, scenario.name)
        results.append(result)
        try:
            on_result(step, result)
        except RegressionPruned as pruned:
            pruned.skipped = tuple(s.name for s in ordered[step + 1 :])
            raise
    refined = None
    if refinement is not None:
        results, refined = refine_on_objective(
            benchmark, ordered, results, refinement, service=service, restarted=restarted
        )
    return BenchmarkOutcome(results=tuple(results), seconds=round(time.monotonic() - start, 3), refined=refined)


def refine_on_objective(
    benchmark: BaseBenchmark,
    scenarios: Sequence[Scenario],
    results: Sequence[ScenarioResult],
    refinement: Refinement,
    *,
    service: BaseService,
    restarted: Restarted,
) -> tuple[list[ScenarioResult], Refined]:
    """Repeat scenarios one at a time until the objective is confidently behind or ahead of the reference's,
    or precise (:func:`tuner.stats.decide_objective`); every result then records that verdict as ``stopped``."""
    by_name = {r.name: r for r in results}
    first = {r.name: len(r.repeats_tok_s) for r in results}
    lookup = {s.name: s for s in scenarios}
    while True:
        decision = decide_objective(
            {name: r.repeats_tok_s for name, r in by_name.items()},
            references=refinement.references,
            weights=refinement.weights,
            costs={name: _repeat_seconds(r) for name, r in by_name.items()},
            policy=refinement.policy,
        )
        if decision.stop or decision.repeat is None:
            break
        by_name[decision.repeat] = benchmark.extend_scenario(lookup[decision.repeat], by_name[decision.repeat])
        _check_alive(service, restarted, decision.repeat)
    final = [dataclasses.replace(by_name[r.name], stopped=decision.verdict) for r in results]
    added = {r.name: len(r.repeats_tok_s) - first[r.name] for r in final}
    return final, Refined(decision=decision, added=added)


def _repeat_seconds(result: ScenarioResult) -> float:
    """Seconds one counted repeat of the scenario took (its warm-up left out)."""
    return max(result.seconds - (result.warmup_s or 0.0), 0.0) / max(len(result.repeats_tok_s), 1)


def _check_alive(service: BaseService, restarted: Restarted, scenario: str) -> None:
    if not service.is_alive(restarted.new):
        raise DiedUnderLoad(f"server process exited during scenario {scenario}", evidence=f"{restarted.new} is gone")


def objective_refinement(
    config: StudyConfig,
    policy: SequentialPolicy,
    lookup: ReferenceLookup | None,
    *,
    finalist: ReferenceLookup | None = None,
) -> Refinement | None:
    """The objective-level repeat decision for a trial, when it applies: an objective that refines its repeats
    (:attr:`tuner.objective.BaseObjective.refines_repeats`), sequential repeats, and every scenario's reference
    carrying the study's noise.

    The objective is compared with the pruner's reference, or with ``finalist``: the repeats of the last config
    the end-of-study confirmation would re-measure (:func:`tuner.study.last_finalist`), with the study's noise
    pooled without it.
    """
    if lookup is None or not objective_of(config).refines_repeats:
        return None
    found = {s.name: lookup(s.name) for s in config.benchmark.scenarios}
    references = {name: ref for name, ref in found.items() if ref is not None and policy.on_objective(ref)}
    if len(references) != len(found):
        return None
    if finalist is not None:
        # Repeats beyond the first pass only decide whether this config joins the finalists; the confirmation
        # re-measures those, so it is compared with the last of them, not polished against the best.
        swapped = {name: finalist(name) for name in references}
        if all(ref is not None and policy.on_objective(ref) for ref in swapped.values()):
            references = {name: ref for name, ref in swapped.items() if ref is not None}
    return Refinement(
        references=references,
        weights=config.benchmark.objective_weights(),
        policy=policy,
    )


def gate_server(gate_factory: GateFactory, endpoint: Endpoint) -> GateResult:
    """Ask the correctness gate's problems of the server at ``endpoint`` and judge the answers."""
    gate = gate_factory(endpoint)
    try:
        return gate.run()
    finally:
        gate.close()


def describe_result(result: ScenarioResult, *, last: bool = False) -> str:
    """One scenario's line: score (point +- half-width), repeats taken and why they stopped.

    ``last``: the trial's last scenario, which is never pruned (nothing is left to skip), so a ``worse`` there
    says who decides instead.
    """
    n = len(result.repeats_tok_s)
    hw = f" ± {result.half_width:.1f}" if result.half_width is not None else ""
    point = result.point if result.point is not None else result.output_tok_s
    accept = f", accept {result.accept_length:.2f}" if result.accept_length else ""
    why = ""
    if result.stopped:
        why = ", more if the objective asks" if result.stopped == "objective" else f", {result.stopped}"
        if result.stopped == "worse" and last:
            why = ", worse than the reference (the last scenario: the objective decides)"
    warm = {"none": ", no warm-up"}.get(result.warmup or "", "")
    if result.first_pass_tok_s is not None:
        warm = f", probe {result.first_pass_tok_s:.1f}"
    if result.client_reruns:
        warm += f", {result.client_reruns} pass{'es' if result.client_reruns != 1 else ''} re-run (client-bound)"
    return (
        f"{result.name}: score {result.score:.1f} ({point:.1f}{hw}) tok/s, "
        f"{n} repeat{'s' if n != 1 else ''}{why}{accept}{warm}"
    )
