"""Re-measure the top: the recommendation must not rest on one lucky measurement.

The best of N noisy measurements is biased upwards (the winner's curse): among configs within noise of each
other, the one that drew the luckiest repeats wins. So at the end of a study (and on ``tune best --confirm``)
the top-K feasible configs are measured again, interleaved (A B C A B C: a drift of the machine over time
hits every config alike), each visit a full restart + readiness + benchmark of every scenario. Their
confirmation scores come from these fresh repeats only, scored exactly like a trial
(:func:`tuner.study._scoring.score`) with the study's pooled repeat noise. The winner *held* when the trial
that was best by its own measurement is still the best by confirmation.

A visit measures each scenario once when the study knows its noise (two rounds give every config two samples,
each from its own restart: the variance that matters between configs) and twice when it does not (a study
of fixed repeats measures its fixed number).

After the two rounds it is a race: a finalist that could still be better than the leader (the best by
confirmation so far) by more than the study's ``[benchmark] precision`` is measured in further rounds, up to
:data:`MAX_ROUNDS`, with the leader; one confidently not (the regression pruner's one-sided test on the objective
at its confidence, with the study's noise, against the leader's objective times ``1 + precision``) drops out.
The top configs of a study are often about 1% apart, which two samples each rank wrongly now and then (50 seeds
of the coding-agent study: 14 confirmations chose a finalist up to 1.6 points worse than the best one); a close
race pays for more samples, a clear one does not, and differences below the precision the study asked for are
not worth a restart.

The baseline is re-measured in every round too, first (base A B C base A B C; ``[search] confirm_baseline``),
unless it is a finalist itself: the speed-up every view prints is then the winner's fresh repeats against the
baseline's, measured side by side under the same machine conditions, not against a figure from the start of
the night. The baseline is never a racer: it only stands beside them.

Recorded as the study's user attr ``confirmation`` (Optuna cannot change a finished trial's attrs):
``{"trials": [...], "values": {n: objective from the fresh repeats, 0 when the config failed}, "ranks":
{n: 1 = best}, "errors": {n: reason}, "winner": n, "best_before": n, "held": bool, "rounds": r,
"precision": p, "figures": {n: {scenario: [point, lower bound]}}, "baseline": {"trial": n, "visits": k,
"value": objective} or {"trial": n, "error": reason}}`` (``rounds``: the most any finalist was measured in;
``precision``: what the race resolved; ``figures``: output tok/s of the fresh repeats of the finalists and the
baseline, what the side-by-side speed-up is computed from).

What a visit measures, the value a config's visits confirm, what ``figures`` records and whether the close ones
race are its objective's (:class:`tuner.objective.BaseObjective`): a ``kind = "max_rate"`` study, for one, runs the
rate search again on each fresh restart, from one rate for every config, and does not race (more visits do not
narrow a bracket, the search's steps do).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

from tuner.bench import ScenarioResult, WarmupLookup, pooled_slo_fields
from tuner.config import StudyConfig, launch_spec
from tuner.endpoint import Endpoint
from tuner.errors import TrialFailure
from tuner.objective import BaseObjective, objective_of
from tuner.slo import UNDECIDED, SloVerdict
from tuner.spec import LaunchSpec
from tuner.stats import Noise, SequentialPolicy, pooled_noise
from tuner.study._objective import TrialParts
from tuner.study._steps import benchmark_server, gate_server
from tuner.study._warmups import first_passes_lookup
from tuner.trials import (
    baseline_trial,
    best_trials,
    candidates,
    current_confirmation,
    is_counted,
    record_gate_verdict,
    record_of,
    study_record,
    write_study,
)

__all__ = ["Confirmation", "confirm_top", "settle_final_gate"]

Claim = Callable[[list[int]], bool]
Check = Callable[[Endpoint], bool]

ROUNDS = 2
"""Rounds every finalist is measured in."""
MAX_ROUNDS = 4
"""Rounds a finalist that could still beat the leader by more than the study's precision is measured in, at most."""


@dataclass(frozen=True, kw_only=True)
class Confirmation:
    trials: tuple[int, ...]
    values: dict[int, float]
    best_before: int
    winner: int
    held: bool


def confirm_top(
    study: optuna.Study,
    config: StudyConfig,
    *,
    parts: TrialParts,
    k: int,
    progress: Any = None,
    until: float | None = None,
) -> Confirmation | None:
    """Re-measure the top ``k`` configs interleaved over two rounds, and the close ones over up to
    :data:`MAX_ROUNDS` (see the module docstring).

    In a ``[gate] when = "final"`` study each finalist is gated on its first visit, before its benchmark; one
    that fails is out and the next best takes its place in the same round. Returns None (and measures nothing)
    for multi-objective studies or fewer than two feasible configs: there is no ranking to confirm. ``until``
    (Unix time, the study's deadline): a race round starts only if its visits, at the mean visit so far, end
    before it.
    """
    if len(study.directions) > 1 or k < 2:
        return None
    ranked = candidates(study)
    if len(ranked[:k]) < 2:
        return None
    say = progress or (lambda text: None)
    noise = study_noise(study, config)
    race = _Race(
        study=study,
        config=config,
        parts=parts,
        say=say,
        until=until,
        top=ranked[:k],
        reserve=ranked[k:],
        noise=noise,
        policy=visit_policy(config, noise_known=all(n is not None for n in noise.values())),
        warmups=first_passes_lookup(study, config, trial_number=-1),
        gating=gates_at_the_end(config, parts),
        baseline=_beside(study, config, ranked[:k]),
        objective=objective_of(config),
        leader=ranked[0],
    )
    say(
        f"confirming the top {len(race.top)}: "
        + " ".join(f"#{t.number}" for t in race.top)
        + f" ({ROUNDS} rounds, up to {MAX_ROUNDS} while one could beat the leader by more than "
        + f"{config.benchmark.precision:.1%})"
        + (f", the baseline #{race.baseline.number} re-measured beside them" if race.baseline is not None else "")
    )
    for r in range(MAX_ROUNDS):
        racing = race.racing(r)
        if racing is None:
            break
        race.run_round(r, racing)
    if len(race.top) < 2:
        return None
    race.judge_slo()
    values = {t.number: 0.0 if t.number in race.errors else race.value(t) for t in race.top}
    return _record(study, race, values, say)


@dataclass(kw_only=True)
class _Race:
    """The confirmation's state: who is still a finalist, what each measured, what failed."""

    study: optuna.Study
    config: StudyConfig
    parts: TrialParts
    say: Callable[[str], None]
    until: float | None
    top: list[FrozenTrial]
    reserve: list[FrozenTrial]
    """The next best configs, in order: a finalist that fails the gate hands its place to the first."""
    noise: dict[str, Noise | None]
    policy: SequentialPolicy
    warmups: WarmupLookup | None
    gating: bool
    baseline: FrozenTrial | None = None
    """The baseline, re-measured first in every round beside the finalists (None: not, or it failed)."""
    objective: BaseObjective
    leader: FrozenTrial
    """The best trial before the confirmation: where a visit's measurement may start, the same for every config."""
    baseline_error: tuple[int, str] | None = None
    visits: dict[int, list[tuple[ScenarioResult, ...]]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    missed: dict[int, str] = field(default_factory=dict)
    """Finalists whose SLO verdict over their visits is a miss, and why: ranked after every other."""
    spent: list[float] = field(default_factory=list)
    """Seconds of each visit."""
    rounds: int = 0

    def value(self, t: FrozenTrial) -> float:
        return self.objective.confirmed_value(self.visits[t.number], self.noise)

    def measured(self, n: int) -> bool:
        return n not in self.errors and n in self.visits

    def keep(self, n: int, visit: tuple[ScenarioResult, ...]) -> None:
        self.visits.setdefault(n, []).append(visit)

    def figures(self, n: int) -> dict[str, Any]:
        return self.objective.confirmed_figures(self.visits[n], self.noise)

    def verdicts(self, n: int) -> dict[str, SloVerdict]:
        """Per scenario with an SLO, ``n``'s verdict over every request of its visits (fresh arrivals each round):
        the burden of proof for an answer to deploy is on these, not on the trial's own pass."""
        confidence = self.config.benchmark.confidence
        out: dict[str, SloVerdict] = {}
        for s in self.config.benchmark.scenarios:
            results = [r for visit in self.visits.get(n, []) for r in visit if r.name == s.name]
            pooled = pooled_slo_fields(results, confidence) if s.slo is not None else {}
            if pooled and (v := SloVerdict.read(pooled.get, requests=int(pooled["requests"]))) is not None:
                out[s.name] = v
        return out

    def slo_missed(self, n: int) -> str | None:
        """Why finalist ``n`` misses the SLO on re-measurement (None: it does not)."""
        slos = {s.name: s.slo for s in self.config.benchmark.scenarios if s.slo is not None}
        missed = [v.text(name, slos[name].describe()) for name, v in self.verdicts(n).items() if not v.holds]
        return "; ".join(missed) or None

    def judge_slo(self) -> None:
        """After the rounds: a finalist that breaks the promise on re-measurement is no answer, however fast."""
        for t in self.top:
            if t.number not in self.errors and (why := self.slo_missed(t.number)) is not None:
                self.missed[t.number] = why
                self.say(f"  #{t.number} misses the SLO on re-measurement: {why}")

    def undecided(self, t: FrozenTrial) -> bool:
        """Whether some SLO verdict of ``t`` is still undecided after its visits (another round may decide it)."""
        return t.number not in self.errors and any(v.state == UNDECIDED for v in self.verdicts(t.number).values())

    def measure(self, t: FrozenTrial, r: int, check: Check | None) -> tuple[ScenarioResult, ...] | None:
        """Visit ``t`` in round ``r``, saying so before the restart and what the visit measured after it (a visit
        on a large model is minutes of loading: the console never goes quiet that long without a word)."""
        who = " (the baseline)" if self.baseline is not None and t.number == self.baseline.number else ""
        self.say(f"  round {r + 1}: #{t.number}{who}: restart with its config, wait until ready, measure")
        t0 = time.monotonic()
        visit = _measure(self.parts, self.config, t, self.policy, in_round=r, check=check, warmups=self.warmups,
                         objective=self.objective, leader=self.leader)  # fmt: skip
        if visit is not None:
            value = self.objective.format(self.objective.confirmed_value([visit], self.noise))
            self.say(f"    #{t.number}: {value} this visit ({time.monotonic() - t0:.0f} s)")
        return visit

    def racing(self, r: int) -> list[FrozenTrial] | None:
        """The finalists round ``r`` measures (None: the race is over): every one in the fixed rounds; after them
        the ones that could still beat the leader (when the objective races) and the ones whose SLO verdict the
        requests so far could not decide."""
        if len(self.top) < 2:
            return None  # finalists failed the gate and none took their place
        if r < ROUNDS:
            return self.top
        close = self.contenders() if self.objective.races else []
        close = close if len(close) > 1 else []  # a race needs the leader and one that could still beat it
        unsure = [t for t in self.top if t.number not in self.missed and self.undecided(t)]
        chosen = {t.number for t in (*close, *unsure)}
        racing = [t for t in self.top if t.number in chosen]
        if not racing:
            return None
        shown = " ".join(f"#{t.number}" for t in racing)
        visits = len(racing) + (self.baseline is not None)
        if self.until is not None and time.time() + visits * _mean(self.spent) > self.until:
            self.say(f"  no round {r + 1} for {shown}: it would end after the deadline")
            return None
        why = [f"one could still be more than {self.config.benchmark.precision:.1%} faster"] if close else []
        why += [f"#{t.number}'s SLO verdict is not decided yet" for t in unsure]
        self.say(f"  round {r + 1}: {shown} ({'; '.join(why)})")
        return racing

    def contenders(self) -> list[FrozenTrial]:
        """The finalists still in the race, in ``top``'s order (the objective's rule)."""
        alive = [t for t in self.top if t.number not in self.errors and self.slo_missed(t.number) is None]
        pooled = {t.number: [r for v in self.visits[t.number] for r in v] for t in alive}
        kept = {t.number for t in self.objective.contenders(alive, pooled, self.noise)}
        return [t for t in alive if t.number in kept]

    def run_round(self, r: int, racing: list[FrozenTrial]) -> None:
        self.rounds = r + 1
        if self.baseline is not None:
            self.visit_baseline(r)
        i = 0
        while i < len(racing):  # grows while it is walked: a finalist that fails the gate hands over its place
            t = racing[i]
            i += 1
            if t.number not in self.errors and not self.visit(t, r):
                i -= 1

    def visit_baseline(self, r: int) -> None:
        """The baseline's visit of round ``r``: one that fails leaves the speed-up to the night's figures."""
        assert self.baseline is not None
        n = self.baseline.number
        try:
            results = self.measure(self.baseline, r, None)
        except TrialFailure as failure:
            self.baseline_error = (n, f"[{failure.phase}] {failure.reason}"[:500])
            self.say(f"  the baseline #{n} failed on re-measurement: {self.baseline_error[1]}")
            self.baseline = None
            self.visits.pop(n, None)
            return
        if results is not None:
            self.keep(n, results)

    def visit(self, t: FrozenTrial, r: int) -> bool:
        """One visit of finalist ``t`` in round ``r``; False when it failed the end-of-study gate (it is out)."""
        check = None
        if self.gating and r == 0 and record_of(t).gate_pending:
            check = _finalist_check(self.study, self.config, self.parts, t, self.say)
        try:
            t0 = time.monotonic()
            results = self.measure(t, r, check)
            self.spent.append(time.monotonic() - t0)
        except TrialFailure as failure:
            self.errors[t.number] = f"[{failure.phase}] {failure.reason}"[:500]
            self.say(f"  #{t.number} failed on re-measurement: {self.errors[t.number]}")
            return True
        if results is None:
            self.top.remove(t)
            if self.reserve:
                self.top.append(self.reserve.pop(0))
                self.say(f"  #{self.top[-1].number} takes its place")
            return False
        self.keep(t.number, results)
        return True


def _beside(study: optuna.Study, config: StudyConfig, top: list[FrozenTrial]) -> FrozenTrial | None:
    """The baseline to re-measure beside the finalists: a measured one that is not a finalist itself."""
    base = baseline_trial(study) if config.search.confirm_baseline else None
    if base is None or base.state != optuna.trial.TrialState.COMPLETE or base.number in {t.number for t in top}:
        return None
    return base


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else 0.0


def _measure(
    parts: TrialParts,
    config: StudyConfig,
    t: FrozenTrial,
    policy: SequentialPolicy,
    *,
    in_round: int,
    check: Check | None,
    warmups: WarmupLookup | None,
    objective: BaseObjective,
    leader: FrozenTrial,
) -> tuple[ScenarioResult, ...] | None:
    """One visit in round ``in_round``: apply, restart, wait until the new process serves, (gate,) measure what the
    objective visits (every scenario, by default; ``leader``: where a measurement of the objective's own starts),
    on the round's own draw of arrivals and prompts (fresh from the trials', the same for every config of it).

    None when ``check`` (the end-of-study gate) fails the config: it is not benchmarked.
    """
    target = parts.target
    up = target.bring_up(bring_up_spec(config, t), label=f"confirm-{t.number:04d}-{in_round + 1}")
    endpoint = up.ready.endpoint or target.endpoint
    if check is not None and not check(endpoint):
        return None
    bench = parts.benchmark(endpoint)
    bench.policy = policy
    bench.draw = in_round + 1
    bench.use_first_passes(warmups)

    def scenarios() -> tuple[ScenarioResult, ...]:
        on_result = lambda step, r: None  # noqa: E731 - a visit reports nothing between scenarios
        return benchmark_server(
            bench, config.benchmark, service=target.service, restarted=up.restarted, on_result=on_result
        ).results

    try:
        return objective.visit(bench, scenarios, leader=leader)
    finally:
        bench.close()


def bring_up_spec(config: StudyConfig, t: FrozenTrial) -> LaunchSpec | None:
    """What to bring up to run trial ``t`` again: its launch spec, or None for the baseline (every change
    dropped, rather than the base applied as one)."""
    return None if record_of(t).is_baseline else launch_spec(config, t)


def _finalist_check(
    study: optuna.Study, config: StudyConfig, parts: TrialParts, t: FrozenTrial, say: Callable[[str], None]
) -> Check:
    """The end-of-study gate of finalist ``t`` against its running server: records the verdict, says it."""

    def check(endpoint: Endpoint) -> bool:
        assert parts.gate is not None and config.gate is not None
        result = gate_server(parts.gate, endpoint)
        correct = result.passed >= config.gate.min_passed
        failures = tuple(f"{o.task_id}: {o.reason or 'failed'}"[:300] for o in result.failures[:5])
        verdict = record_gate_verdict(
            study,
            t.number,
            passed=result.passed,
            total=result.total,
            correct=correct,
            seconds=round(result.seconds, 3),
            failures=failures,
        )
        if correct:
            say(f"  #{t.number} gate {verdict.text}: passed")
        else:
            say(f"  #{t.number} gate {verdict.text}: FAILED (need {config.gate.min_passed}); never recommended")
        return correct

    return check


def settle_final_gate(
    study: optuna.Study,
    config: StudyConfig,
    *,
    parts: TrialParts,
    say: Callable[[str], None],
    claim: Claim | None = None,
) -> None:
    """Gate the best config until one passes, when it has no end-of-study verdict (``when = "final"`` and no
    confirmation gated it: ``confirm_top`` below 2, or a single candidate); in a multi-objective study, every
    member of the Pareto front (one that fails leaves the front, and may let others in). ``claim``: as for the
    confirmation, one worker of a fleet gates a given config."""
    while gates_at_the_end(config, parts):
        pending = [t for t in best_trials(study) if record_of(t).gate_pending]
        if not pending:
            return
        t = pending[0]
        if claim is not None and not claim([t.number]):
            say(f"the gate of #{t.number} is run by another worker")
            return
        say(f"gating #{t.number} at the end of the study (a finalist)")
        target = parts.target
        try:
            up = target.bring_up(bring_up_spec(config, t), label=f"gate-{t.number:04d}")
        except TrialFailure as failure:
            say(f"  #{t.number} did not start again, so it has no gate verdict: [{failure.phase}] {failure.reason}")
            return
        _finalist_check(study, config, parts, t, say)(up.ready.endpoint or target.endpoint)


def gates_at_the_end(config: StudyConfig, parts: TrialParts) -> bool:
    return bool(config.gate and config.gate.enabled and config.gate.when == "final" and parts.gate is not None)


def visit_policy(config: StudyConfig, *, noise_known: bool) -> SequentialPolicy:
    """A fixed number of repeats per visit: the study's fixed ``repeats``; else 1 when the study's pooled noise
    is known for every scenario, 2 when it is not (the fresh repeats must then estimate it themselves).

    Sequential stops need a reference to stop against, and confirming *is* the comparison: every config gets
    the same fresh samples, so the ranking is not decided by who was stopped early.
    """
    b = config.benchmark
    if b.min_repeats == b.max_repeats:
        return SequentialPolicy(min_repeats=b.min_repeats, max_repeats=b.max_repeats)
    n = 1 if noise_known else min(2, b.max_repeats)
    return SequentialPolicy(min_repeats=n, max_repeats=n)


def study_noise(study: optuna.Study, config: StudyConfig) -> dict[str, Noise | None]:
    """Per scenario, the repeat noise pooled over every trial of the study (None: no trial repeated it)."""
    trials = [t for t in study.get_trials(deepcopy=False) if is_counted(t)]
    return {s.name: pooled_noise(record_of(t).repeats(s.name) for t in trials) for s in config.benchmark.scenarios}


def _record(study: optuna.Study, race: _Race, values: dict[int, float], say: Any) -> Confirmation:
    top = race.top
    sign = -1.0 if race.objective.directions()[0] == StudyDirection.MINIMIZE else 1.0
    # Best first in the objective's direction; a config that failed on re-measurement last, whatever its 0.
    ranked = sorted(values, key=lambda n: (n in race.errors, n in race.missed, -sign * values[n]))
    result = Confirmation(
        trials=tuple(t.number for t in top),
        values=values,
        best_before=top[0].number,
        winner=ranked[0],
        held=ranked[0] == top[0].number,
    )
    measured = [n for n in race.visits if race.measured(n)]
    write_study(
        study,
        confirmation={
            "trials": list(result.trials),
            "values": {str(n): _kept(v) for n, v in values.items()},
            "ranks": {str(n): rank for rank, n in enumerate(ranked, start=1)},
            "errors": {str(n): e for n, e in race.errors.items()},
            "best_before": result.best_before,
            "winner": result.winner,
            "held": result.held,
            "rounds": race.rounds,
            "precision": race.config.benchmark.precision,
            # How the views print each value, and whether the winner is within the precision of the best before
            # (both the objective's: its units and its direction).
            "shown": {str(n): race.objective.format(v) for n, v in values.items()},
            "close": race.objective.better(values[result.winner], values[result.best_before])
            < 1 + race.config.benchmark.precision,
            "figures": {str(n): race.figures(n) for n in sorted(measured)},
            # Each measured config's SLO verdicts over its visits' requests (the views' verdict for a finalist).
            "slo": {str(n): {s: {**v.figures(), "requests": v.requests} for s, v in race.verdicts(n).items()}
                    for n in sorted(measured) if race.verdicts(n)},
            "slo_missed": {str(n): why for n, why in race.missed.items()},
            "baseline": _baseline_record(race),
        },
    )
    say(study_record(study).confirmation_text or "")
    return result


def _baseline_record(race: _Race) -> dict[str, Any] | None:
    if race.baseline_error is not None:
        return {"trial": race.baseline_error[0], "error": race.baseline_error[1]}
    if race.baseline is None:
        return None
    n = race.baseline.number
    return {"trial": n, "visits": race.rounds, "value": _kept(race.value(race.baseline))}


def _kept(value: float) -> float:
    """A value as the record keeps it: six significant digits, whatever the objective's scale (a TTFT in
    seconds as well as a throughput in tok/s)."""
    return float(f"{value:.6g}")


def maybe_confirm(
    study: optuna.Study,
    config: StudyConfig,
    *,
    parts: TrialParts,
    console: Any,
    force: bool = False,
    claim: Callable[[list[int]], bool] | None = None,
    until: float | None = None,
) -> Confirmation | None:
    """The end-of-study call: confirm the top ``[search] confirm_top`` unless that exact top was confirmed.

    ``force`` (``tune best --confirm``) re-measures even an already confirmed top. ``claim`` (a fleet's
    workers) lets one worker confirm a given top; the others leave it to that one. ``until``: the study's
    deadline, for the race rounds (:func:`confirm_top`).
    """
    k = config.search.confirm_top
    result = None
    top = [t.number for t in candidates(study)[: max(k, 2)]]
    if force or (k >= 2 and current_confirmation(study) is None):
        if not force and claim is not None and len(top) >= 2 and not claim(top):
            console.line(f"confirmation of the top {len(top)} is done by another worker")
            return None  # and so is its end-of-study gate
        result = confirm_top(study, config, parts=parts, k=max(k, 2), progress=console.line, until=until)
    if gates_at_the_end(config, parts):
        settle_final_gate(study, config, parts=parts, say=console.line, claim=None if force else claim)
    return result
