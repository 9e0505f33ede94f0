"""One trial, told as a story: apply -> restart -> ready -> (gate) -> benchmark -> refine -> (gate) -> score.

:class:`TrialRunner` runs the steps (:mod:`tuner.study._steps`) against the trial's parts and turns a
:class:`~tuner.errors.TrialFailure` from any of them into the trial's evidence (phase, reason, log tail of the
process it was about); the loop then ends the trial PRUNED, so TPE learns to stay away from it. What the trial is
measured against is handed in (:class:`~tuner.study._scoring.References`), read from the study before it runs.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from tuner.bench import BaseBenchmark, ScenarioResult
from tuner.config import StudyConfig
from tuner.endpoint import Endpoint
from tuner.errors import DiedUnderLoad, GateFailed, RegressionPruned, TrialFailure
from tuner.gate import GateResult
from tuner.objective import BaseObjective, Score, ServerRun, objective_of
from tuner.spec import LaunchSpec
from tuner.study._emulate import Emulation, play_caps, settle
from tuner.study._scoring import References
from tuner.study._steps import (
    BenchmarkOutcome,
    GateFactory,
    benchmark_server,
    describe_result,
    gate_server,
    objective_refinement,
)
from tuner.target import BroughtUp, Target
from tuner.target.readiness import LogWatch
from tuner.target.services import Restarted
from tuner.trials import record_of, write, write_scenario

__all__ = ["REFINE_STEP", "Evidence", "TrialParts", "TrialRunner"]

#: The intermediate step that follows the scenarios when the objective asked for more repeats (``steps`` attr).
REFINE_STEP = "objective repeats"

Progress = Callable[[str], None]
BenchmarkFactory = Callable[[Endpoint], BaseBenchmark]
GatePolicy = Callable[[GateResult], None]


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
        self._objective: BaseObjective = objective_of(config)
        self._parts = parts
        self._evidence = evidence
        self._progress = progress
        gate = config.gate
        self._gate_when = gate.when if gate is not None and gate.enabled and parts.gate is not None else None

    def run(
        self,
        trial: optuna.Trial,
        spec: LaunchSpec,
        *,
        label: str,
        references: References,
        emulation: Emulation | None = None,
    ) -> Score:
        """apply -> restart -> ready -> (gate) -> benchmark -> (play the caps) -> (gate) -> score; a failure of
        any step is recorded on the trial with its evidence, then raised. ``emulation``: the batch cap the trial
        plays with the client on this one start (:mod:`tuner.study._emulate`); it becomes the trial's param."""
        shown = self._config.secrets.spec(spec)  # the server gets the real values; the study never stores them
        write(trial, command=" ".join(shown.argv))
        if spec.env:
            write(trial, env=dict(shown.env))
        restarted: Restarted | None = None
        try:
            up = self._parts.target.bring_up(spec, label=label, progress=self._progress)
            restarted = up.restarted
            endpoint = self._ready(trial, up)
            if self._gate_when == "before":
                self._gate(trial, endpoint)
            results = self._benchmark(trial, endpoint, up.restarted, references).results
            if emulation is not None:
                results = self._play(trial, endpoint, emulation, results, references)
            measured = self._measure(trial, endpoint, results, references)
            result = measured or self._objective.score(results)
            # A config that breaks the promise needs no gate verdict (an objective that measured on the server
            # judges the promise itself: its scenarios' verdicts are not the trial's).
            if measured is not None or not self._slo(trial, results):
                self._gate_after(trial, endpoint, result, references)
            write(trial, score={k: round(v, 3) for k, v in result.per_scenario.items()})
            return result
        except TrialFailure as failure:
            if emulation is not None:  # it ended before choosing: the config that failed is the server's
                settle(trial, emulation, emulation.server)
            if isinstance(failure, RegressionPruned):
                self._record_savings(trial, failure)
            self._record_failure(trial, failure, restarted or failure.restarted)
            raise

    def _ready(self, trial: optuna.Trial, up: BroughtUp) -> Endpoint:
        write(trial, ready_s=up.ready.seconds)
        write(trial, phase_times=up.ready.phase_times)
        return up.ready.endpoint or self._parts.target.endpoint

    def _benchmark(
        self, trial: optuna.Trial, endpoint: Endpoint, restarted: Restarted, references: References
    ) -> BenchmarkOutcome:
        cfg = self._config
        bench = self._parts.benchmark(endpoint)
        refinement = objective_refinement(cfg, bench.policy, references.pruner, finalist=references.finalist)
        bench.use_reference(references.pruner, on_objective=refinement is not None)
        bench.use_first_passes(references.first_passes)
        measured: list[ScenarioResult] = []
        try:
            outcome = benchmark_server(
                bench,
                cfg.benchmark,
                service=self._parts.target.service,
                restarted=restarted,
                on_result=lambda step, r: self._intermediate(trial, step, r, measured, references.best),
                refinement=refinement,
            )
        finally:
            bench.close()
        if outcome.refined is not None:
            self._refined(trial, outcome)
        write(trial, benchmark_s=outcome.seconds)
        self._evidence.attach_json(trial, "benchmark.json", {"scenarios": [r.to_dict() for r in outcome.results]})
        return outcome

    def _play(
        self,
        trial: optuna.Trial,
        endpoint: Endpoint,
        emulation: Emulation,
        first: Sequence[ScenarioResult],
        references: References,
    ) -> tuple[ScenarioResult, ...]:
        """The smaller caps played by the client on this server (:func:`tuner.study._emulate.play_caps`); the
        trial's figures, command and param become the chosen cap's."""
        bench = self._parts.benchmark(endpoint)
        bench.use_reference(references.pruner)
        bench.use_first_passes(references.first_passes)
        start = time.monotonic()
        try:
            played = play_caps(bench, self._config, emulation, first, say=self._progress or (lambda text: None))
        finally:
            bench.close()
        record = played.record(emulation)
        write(trial, emulated=record)
        write(trial, benchmark_s=round((record_of(trial).benchmark_s or 0.0) + time.monotonic() - start, 3))
        if played.chosen != emulation.server:
            for result in played.results:
                write_scenario(trial, result)
            chosen = emulation.spec(self._config, trial.params, cap=played.chosen)
            shown = self._config.secrets.spec(chosen)
            write(trial, command=" ".join(shown.argv))
            self._evidence.attach_json(trial, "benchmark.json", {"scenarios": [r.to_dict() for r in played.results]})
        settle(trial, emulation, played.chosen)
        self._evidence.attach_json(trial, "emulated.json", record)
        if self._progress and len(played.passes) > 1:
            self._progress(f"{emulation.param.name} {played.chosen} chosen (a finalist is re-measured with the flag)")
        return played.results

    def _slo(self, trial: optuna.Trial, results: Sequence[ScenarioResult]) -> bool:
        """``[slo]``: the scenarios' verdicts as one Optuna constraint, the worst one's (> 0 when one missed: TPE
        learns the region; no ranking, confirmation or recommendation takes it; its size says how far), with the
        line that says why. Returns whether a scenario missed."""
        slos = {s.name: s.slo for s in self._config.benchmark.scenarios if s.slo is not None}
        verdicts = [(r.name, v) for r in results if r.name in slos and (v := r.verdict) is not None]
        if not verdicts:
            return False
        trial.set_constraint("slo", float(max(v.constraint for _, v in verdicts)))
        misses = [v.text(name, slos[name].describe()) for name, v in verdicts if not v.holds]
        if misses:
            write(trial, slo_missed="; ".join(misses))
            if self._progress:
                self._progress(f"infeasible: {misses[0]}")
        return bool(misses)

    def _measure(
        self, trial: optuna.Trial, endpoint: Endpoint, results: Sequence[ScenarioResult], references: References
    ) -> Score | None:
        """The objective's own measurement on this trial's server, beyond the scenarios (the max-rate search),
        with no restart; None when the scenarios' score is the trial's."""
        if not self._objective.measures:
            return None
        bench = self._parts.benchmark(endpoint)
        steps: list[float] = []

        def report(value: float) -> None:
            steps.append(value)
            trial.report(value, len(steps) - 1)

        run = ServerRun(
            bench=bench,
            best=references.best,
            prune=self._config.search.pruning,
            report=report,
            record=lambda **facts: write(trial, **facts),
            say=self._progress or (lambda text: None),
            describe=describe_result,
        )
        try:
            return self._objective.measure(run, results)
        finally:
            bench.close()

    def _gate_after(self, trial: optuna.Trial, endpoint: Endpoint, result: Score, references: References) -> None:
        """The gate after the benchmark: now (``after``), only for a contender (``contenders``), or at the end of
        the study if the config is a finalist (``final``, provisionally feasible until then)."""
        if self._gate_when == "final":
            write(trial, gate_deferred=True)
            write(trial, gate="at the end, if a finalist")
            return
        if self._gate_when not in ("after", "contenders"):
            return
        behind = self._behind(result, references.best) if self._gate_when == "contenders" else None
        if behind is None:
            self._gate(trial, endpoint)
            return
        write(trial, gate=f"not run: {behind}")
        write(trial, gate_skipped=True)
        if self._progress:
            self._progress(f"gate not run: {behind} (not a contender)")

    def _intermediate(
        self,
        trial: optuna.Trial,
        step: int,
        result: ScenarioResult,
        measured: list[ScenarioResult],
        reference: optuna.trial.FrozenTrial | None,
    ) -> None:
        write_scenario(trial, result)
        measured.append(result)
        write(trial, steps=[r.name for r in measured])
        if self._progress:
            self._progress(describe_result(result, last=step == len(self._config.benchmark.scenarios) - 1))
            warning = result.client_warning()
            if warning:
                self._progress(warning)
        # On the objective's scale, or none (several objectives, or one that reports its own measurement's).
        value = self._objective.intermediate(measured, reference)
        if value is None:
            return
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
            write_scenario(trial, result)
        write(trial, repeats_decided=outcome.refined.describe())
        if any(outcome.refined.added.values()):
            # The last intermediate value stays the trial's objective (the dashboard's history and pruning
            # plots end where the trial does): the extra repeats are one more step.
            steps = [*record_of(trial).steps, REFINE_STEP]
            write(trial, steps=steps)
            value = self._objective.intermediate(outcome.results, None)
            if value is not None:
                trial.report(value, len(steps) - 1)
        if self._progress:
            for result in outcome.results:
                if outcome.refined.added.get(result.name):
                    self._progress(describe_result(result))
            self._progress(outcome.refined.describe())

    def _record_savings(self, trial: optuna.Trial, pruned: RegressionPruned) -> None:
        """Benchmark time the pruning saved, estimated from the baseline's timings of the skipped scenarios."""
        write(trial, pruned_skipped=list(pruned.skipped))
        baseline = next((t for t in trial.study.get_trials(deepcopy=False) if record_of(t).is_baseline), None)
        if baseline is None:
            return
        record = record_of(baseline)
        saved = [record.number_figure(name, "seconds") for name in pruned.skipped]
        write(trial, pruning_saved_s=round(sum(s for s in saved if s is not None), 3))

    def _behind(self, result: Score, best: optuna.trial.FrozenTrial | None) -> str | None:
        """How far behind the best feasible trial ``result`` is, when by more than ``[search] prune_margin``."""
        if best is None or len(result.values) != 1 or not best.values or best.values[0] <= 0:
            return None
        ratio = 1.0 / self._objective.better(best.values[0], result.values[0])
        if ratio >= 1.0 - self._config.search.prune_margin:
            return None
        return f"{1.0 - ratio:.0%} behind #{best.number}"

    def _gate(self, trial: optuna.Trial, endpoint: Endpoint) -> None:
        assert self._parts.gate is not None and self._config.gate is not None
        start = time.monotonic()
        try:
            result = gate_server(self._parts.gate, endpoint)
            write(trial, gate_s=round(time.monotonic() - start, 3))
            write(trial, gate=f"{result.passed}/{result.total}")
            failing = [o for o in result.outcomes if not o.passed]
            if failing:
                self._evidence.attach_json(trial, "gate-failures.json", [vars(o) for o in failing])
            passed = result.passed >= self._config.gate.min_passed
            write(trial, correct=passed)
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
            write(trial, correct=False)
            raise

    def _record_failure(self, trial: optuna.Trial, failure: TrialFailure, restarted: Restarted | None) -> None:
        secrets = self._config.secrets
        secrets.scrub(failure)  # in place: the console line and the stop that quote it show it redacted too
        write(trial, failure_phase=str(failure.phase))
        write(trial, failure_reason=failure.reason[:1000])
        if failure.evidence:
            write(trial, evidence=failure.evidence[-4000:])
        watch = self._log_watch(restarted)
        tail = secrets.text("\n".join(watch.tail)) if watch is not None else ""
        if isinstance(failure, DiedUnderLoad) and watch is not None and (cause := watch.cause()):
            failure.reason += f"; the server log says: {secrets.text(cause)}"  # why, in the one line a stop shows
            write(trial, failure_reason=failure.reason[:1000])
        if tail:
            write(trial, log_tail=tail[-4000:])
            self._evidence.attach(trial, "server-log.txt", tail)

    def _log_watch(self, restarted: Restarted | None, lines: int = 60) -> LogWatch | None:
        """The new process's log since its launch, read (None: no process, or its log cannot be read)."""
        if restarted is None:
            return None
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
            return None
        return watch
