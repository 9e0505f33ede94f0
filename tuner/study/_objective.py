"""One trial, told as a story: apply -> restart -> ready -> (gate) -> benchmark -> refine -> (gate) -> score.

Each step is a named function with a typed result. Any step may raise a
:class:`~tuner.errors.TrialFailure`; :class:`TrialRunner` turns it into the trial's evidence (phase,
reason, log tail) and the loop ends the trial PRUNED, so TPE learns to stay away from it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from tuner.bench import (
    BaseBenchmark,
    ObjectiveDecision,
    Reference,
    ReferenceLookup,
    ScenarioResult,
    SequentialPolicy,
    decide_objective,
)
from tuner.config import BenchmarkSection, ObjectiveSection, Scenario, StudyConfig
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad, GateFailed, RegressionPruned, TrialFailure
from tuner.gate import BaseGate, GateResult
from tuner.metrics import objective_point, objective_value, scenario_attrs
from tuner.readiness import LogWatch
from tuner.services import BaseService, Restarted
from tuner.spec import LaunchSpec
from tuner.study._partial import PartialObjective, projection_reference, reference_lookup
from tuner.study._warmups import first_passes_lookup
from tuner.target import Target
from tuner.trials import attrs

#: The intermediate step that follows the scenarios when the objective asked for more repeats (``steps`` attr).
REFINE_STEP = "objective repeats"

Progress = Callable[[str], None]
BenchmarkFactory = Callable[[Endpoint], BaseBenchmark]
GateFactory = Callable[[Endpoint], BaseGate]
GatePolicy = Callable[[GateResult], None]


@dataclass(frozen=True, kw_only=True)
class BenchmarkOutcome:
    results: tuple[ScenarioResult, ...]
    seconds: float
    skipped: tuple[str, ...] = ()
    refined: Refined | None = None
    """What the objective-level repeats decided (None: each scenario decided its own repeats)."""


@dataclass(frozen=True, kw_only=True)
class Refinement:
    """What the objective-level repeat decision needs (:func:`tuner.bench.decide_objective`)."""

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


@dataclass(frozen=True, kw_only=True)
class Score:
    values: tuple[float, ...]
    per_scenario: dict[str, float] = field(default_factory=dict)


# -- the steps ------------------------------------------------------------------


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
    or precise (:func:`tuner.bench.decide_objective`); every result then records that verdict as ``stopped``."""
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
    """The objective-level repeat decision for a trial, when it applies: a single (geomean) objective on
    aggregate throughput, sequential repeats, and every scenario's reference carrying the study's noise.

    The objective is compared with the pruner's reference, or with ``finalist``: the repeats of the last config
    the end-of-study confirmation would re-measure (:func:`tuner.study.last_finalist`), with the study's noise
    pooled without it.
    """
    if lookup is None or config.objective.kind != "geomean" or config.objective.metric != "output_tok_s":
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


def scenario_metric(r: ScenarioResult, objective: ObjectiveSection) -> float:
    """The figure of one scenario the objective combines (its score, a lower bound)."""
    return objective_value(r, objective.metric)


def scenario_point(r: ScenarioResult, objective: ObjectiveSection) -> float:
    """The point estimate :func:`scenario_metric` is the lower bound of."""
    return objective_point(r, objective.metric)


def objective_bound(points: dict[str, float], scores: dict[str, float], section: BenchmarkSection) -> float:
    """The lower end of the weighted geomean's interval, from per-scenario points and lower bounds.

    With normalised weights ``w`` over the scenarios in ``points`` and per-scenario half-widths on logs
    ``h = log(point / score)``: ``exp(sum(w * log point) - sqrt(sum(w**2 * h**2)))``. Scenario errors are
    independent (different repeats at different times), so their half-widths add in quadrature; the geomean
    of the per-scenario lower bounds would add them linearly, as if every scenario erred low at once.
    """
    weights = {k: w for k, w in section.objective_weights().items() if k in points}
    if not weights:
        weights = dict.fromkeys(points, 1.0)
    total = sum(weights.values())
    log_point = sum(w * math.log(max(points[k], 1e-9)) for k, w in weights.items()) / total
    spread = sum(
        (w / total * max(0.0, math.log(max(points[k], 1e-9)) - math.log(max(scores[k], 1e-9)))) ** 2
        for k, w in weights.items()
    )
    return math.exp(log_point - math.sqrt(spread))


def score(outcome: BenchmarkOutcome, objective: ObjectiveSection, section: BenchmarkSection) -> Score:
    per = {r.name: scenario_metric(r, objective) for r in outcome.results}
    if objective.kind == "multi":
        return Score(values=tuple(per[name] for name in objective.objectives), per_scenario=per)
    points = {r.name: scenario_point(r, objective) for r in outcome.results}
    return Score(values=(objective_bound(points, per, section),), per_scenario=per)


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


# -- evidence ------------------------------------------------------------------


class Evidence:
    """Attaches files to a trial in the study's artifact store (the dashboard shows them)."""

    def __init__(self, *, artifacts_dir: Path | None) -> None:
        self._store: Any = None
        if artifacts_dir is not None:
            from optuna.artifacts import FileSystemArtifactStore

            artifacts_dir.mkdir(parents=True, exist_ok=True)
            self._store = FileSystemArtifactStore(str(artifacts_dir))

    @property
    def store(self) -> Any:
        return self._store

    def attach(self, trial: optuna.Trial, name: str, content: str, *, mimetype: str = "text/plain") -> None:
        if self._store is None or not content:
            return
        from optuna.artifacts import upload_artifact

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(content)
            upload_artifact(artifact_store=self._store, file_path=str(path), study_or_trial=trial, mimetype=mimetype)

    def attach_json(self, trial: optuna.Trial, name: str, data: Any) -> None:
        self.attach(trial, name, json.dumps(data, indent=2, default=str), mimetype="application/json")


# -- the runner ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TrialParts:
    """The seams a trial runs through; the runner never learns which implementations it got."""

    target: Target
    benchmark: BenchmarkFactory
    gate: GateFactory | None = None
    gate_policy: GatePolicy | None = None


class TrialRunner:
    def __init__(
        self, *, config: StudyConfig, parts: TrialParts, evidence: Evidence, progress: Progress | None = None
    ) -> None:
        self._config = config
        self._parts = parts
        self._evidence = evidence
        self._progress = progress

    def run(self, trial: optuna.Trial, spec: LaunchSpec, *, label: str) -> Score:
        """Run the whole story; raises TrialFailure with its evidence recorded on the trial."""
        from tuner.study._confirm import last_finalist  # _confirm imports this module: import at call time
        cfg = self._config
        target = self._parts.target
        shown = cfg.secrets.spec(spec)  # the server gets the real values; the study never stores them
        trial.set_user_attr(attrs.COMMAND, " ".join(shown.argv))
        if spec.env:
            trial.set_user_attr(attrs.ENV, dict(shown.env))
        target.last_restarted = None
        try:
            up = target.bring_up(spec, label=label, progress=self._progress)
            trial.set_user_attr(attrs.READY_S, up.ready.seconds)
            trial.set_user_attr(attrs.PHASE_TIMES, up.ready.phase_times)
            endpoint = up.ready.endpoint or target.endpoint
            gate_when = cfg.gate.when if cfg.gate and cfg.gate.enabled and self._parts.gate else None
            if gate_when == "before":
                self._gate(trial, endpoint)
            bench = self._parts.benchmark(endpoint)
            lookup = reference_lookup(trial)
            finalist = last_finalist(trial.study, cfg, exclude=trial.number)
            refinement = objective_refinement(
                cfg, bench.policy, lookup, finalist=reference_lookup(trial, against=finalist) if finalist else None
            )
            bench.use_reference(lookup, on_objective=refinement is not None)
            bench.use_first_passes(first_passes_lookup(trial.study, cfg, trial_number=trial.number))
            partial = PartialObjective(config=cfg, reference=projection_reference(trial.study, exclude=trial.number))
            try:
                outcome = benchmark_server(
                    bench,
                    cfg.benchmark,
                    service=target.service,
                    restarted=up.restarted,
                    on_result=lambda step, r: self._intermediate(trial, step, r, partial),
                    refinement=refinement,
                )
            finally:
                bench.close()
            if outcome.refined is not None:
                self._refined(trial, outcome)
            trial.set_user_attr(attrs.BENCHMARK_S, outcome.seconds)
            self._evidence.attach_json(trial, "benchmark.json", {"scenarios": [r.to_dict() for r in outcome.results]})
            result = score(outcome, cfg.objective, cfg.benchmark)
            if gate_when == "final":
                # Gated at the end if it is a finalist (tuner.study._confirm); provisionally feasible until then.
                trial.set_user_attr(attrs.GATE_DEFERRED, True)
                trial.set_user_attr(attrs.GATE, "at the end, if a finalist")
            elif gate_when in ("after", "contenders"):
                behind = self._behind_the_best(trial, result) if gate_when == "contenders" else None
                if behind is None:
                    self._gate(trial, endpoint)
                else:
                    trial.set_user_attr(attrs.GATE, f"not run: {behind}")
                    trial.set_user_attr(attrs.GATE_SKIPPED, True)
                    if self._progress:
                        self._progress(f"gate not run: {behind} (not a contender)")
            trial.set_user_attr(attrs.SCORE, {k: round(v, 3) for k, v in result.per_scenario.items()})
            return result
        except TrialFailure as failure:
            if isinstance(failure, RegressionPruned):
                self._record_savings(trial, failure)
            self._record_failure(trial, failure, target.last_restarted)
            raise

    def _intermediate(self, trial: optuna.Trial, step: int, result: ScenarioResult, partial: PartialObjective) -> None:
        for key, value in scenario_attrs(result).items():
            trial.set_user_attr(key, value)
        value = partial.add(result)
        trial.set_user_attr(attrs.STEPS, partial.steps)
        if self._progress:
            self._progress(describe_result(result, last=step == len(self._config.benchmark.scenarios) - 1))
            warning = result.client_warning()
            if warning:
                self._progress(warning)
        if len(trial.study.directions) > 1:
            return  # Optuna has no intermediate values (hence no pruning) for multi-objective studies
        trial.report(value, step)
        if trial.should_prune():
            search = self._config.search
            if result.stopped == "worse" or search.prune_objective_margin is None:
                why = (
                    f"{result.output_tok_s:.1f} tok/s is confidently more than {search.prune_margin:.0%} slower "
                    "than the reference's"
                )
            else:  # the pruner's objective-so-far test (the per-scenario one ran after each repeat already)
                why = (
                    f"confidently slower than the reference (by more than {search.prune_margin:.0%} on this "
                    f"scenario, or by more than {search.prune_objective_margin:.0%} on the objective so far)"
                )
            raise RegressionPruned(
                f"pruned after scenario {result.name}: {why}",
                evidence=json.dumps(result.to_dict(), default=str),
            )

    def _refined(self, trial: optuna.Trial, outcome: BenchmarkOutcome) -> None:
        """The scenarios' figures after the objective's repeats, and what decided them."""
        assert outcome.refined is not None
        for result in outcome.results:
            for key, value in scenario_attrs(result).items():
                trial.set_user_attr(key, value)
        trial.set_user_attr(attrs.REPEATS_DECIDED, outcome.refined.describe())
        if any(outcome.refined.added.values()):
            # The last intermediate value stays the trial's objective (the dashboard's history and pruning
            # plots end where the trial does): the extra repeats are one more step.
            steps = [*trial.user_attrs.get(attrs.STEPS, []), REFINE_STEP]
            trial.set_user_attr(attrs.STEPS, steps)
            trial.report(score(outcome, self._config.objective, self._config.benchmark).values[0], len(steps) - 1)
        if self._progress:
            for result in outcome.results:
                if outcome.refined.added.get(result.name):
                    self._progress(describe_result(result))
            self._progress(outcome.refined.describe())

    def _record_savings(self, trial: optuna.Trial, pruned: RegressionPruned) -> None:
        """Benchmark time the pruning saved, estimated from the baseline's timings of the skipped scenarios."""
        trial.set_user_attr(attrs.PRUNED_SKIPPED, list(pruned.skipped))
        baseline = next((t for t in trial.study.get_trials(deepcopy=False) if t.user_attrs.get(attrs.BASELINE)), None)
        if baseline is None:
            return
        saved = [baseline.user_attrs.get(attrs.scenario_key(name, "seconds")) for name in pruned.skipped]
        trial.set_user_attr(attrs.PRUNING_SAVED_S, round(sum(s for s in saved if isinstance(s, int | float)), 3))

    def _behind_the_best(self, trial: optuna.Trial, result: Score) -> str | None:
        """How far behind the best feasible trial ``result`` is, when by more than ``[search] prune_margin``."""
        best = projection_reference(trial.study, exclude=trial.number)
        if best is None or len(result.values) != 1 or not best.values or best.values[0] <= 0:
            return None
        ratio = result.values[0] / best.values[0]
        if ratio >= 1.0 - self._config.search.prune_margin:
            return None
        return f"{1.0 - ratio:.0%} behind #{best.number}"

    def _gate(self, trial: optuna.Trial, endpoint: Endpoint) -> None:
        assert self._parts.gate is not None and self._config.gate is not None
        start = time.monotonic()
        try:
            result = gate_server(self._parts.gate, endpoint)
            trial.set_user_attr(attrs.GATE_S, round(time.monotonic() - start, 3))
            trial.set_user_attr(attrs.GATE, f"{result.passed}/{result.total}")
            failing = [o for o in result.outcomes if not o.passed]
            if failing:
                self._evidence.attach_json(trial, "gate-failures.json", [vars(o) for o in failing])
            passed = result.passed >= self._config.gate.min_passed
            trial.set_user_attr(attrs.CORRECT, passed)
            # Optuna 5 constraints: <= 0 is feasible. best_trial and TPE honour it; the dashboard does not,
            # hence the `correct` attr as well.
            trial.set_constraint("correctness", float(self._config.gate.min_passed - result.passed))
            if self._parts.gate_policy:
                self._parts.gate_policy(result)
            elif not passed:
                raise GateFailed(
                    f"correctness gate: {result.passed}/{result.total} passed (need {self._config.gate.min_passed})",
                    evidence="\n".join(f"{o.task_id}: {o.reason}" for o in failing),
                )
        except GateFailed:
            trial.set_user_attr(attrs.CORRECT, False)
            raise

    def _record_failure(self, trial: optuna.Trial, failure: TrialFailure, restarted: Restarted | None) -> None:
        secrets = self._config.secrets
        secrets.scrub(failure)  # in place: the console line and the stop that quote it show it redacted too
        trial.set_user_attr(attrs.FAILURE_PHASE, str(failure.phase))
        trial.set_user_attr(attrs.FAILURE_REASON, failure.reason[:1000])
        if failure.evidence:
            trial.set_user_attr(attrs.EVIDENCE, failure.evidence[-4000:])
        tail = secrets.text(self._log_tail(restarted))
        if tail:
            trial.set_user_attr(attrs.LOG_TAIL, tail[-4000:])
            self._evidence.attach(trial, "server-log.txt", tail)

    def _log_tail(self, restarted: Restarted | None, lines: int = 60) -> str:
        if restarted is None:
            return ""
        watch = LogWatch(
            service=self._parts.target.service,
            cursor=restarted.log_cursor,
            fatal_patterns=(),
            phase_markers=(),
            tail_lines=lines,
        )
        try:
            watch.poll(elapsed=0)
            watch.flush(elapsed=0)
        except Exception:  # evidence is best effort: never hide the real failure behind a log-read error
            return ""
        return "\n".join(watch.tail)
